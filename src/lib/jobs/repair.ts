/**
 * Store operations a job runner must not lose when the store fails for a moment:
 * - `undo`: the release of a claim whose outcome is unknown (its reply was lost, so it
 *   may have been written, and would block the job for a whole lease);
 * - `release`: the release of a claim this runner holds (its handler failed);
 * - `complete`: the completion of a job whose handler succeeded.
 * Retried in the background, soon after any store call succeeds, until done or pointless
 * (the lease or the retention is over). Bounded. Owned by one job runner: its log, its
 * clock, its store.
 */
import { errorDetails, type Logger } from '../base/log.js';
import type { IdempotencyStore } from './store.js';
import type { Clock } from './clock.js';
import { completeReply } from './replies.js';

export type RepairKind = 'undo' | 'release' | 'complete';

/**
 * Where a task stands.
 * - `queued`: never sent. An `undo` in this state can be taken back: claiming again with
 *   its token acquires the job if the lost claim was written.
 * - `sent`: an attempt went out without a definite answer; a stale attempt may still
 *   reach the store, so the token is spent.
 * - `not_found` (undo only): the store answered that nothing is held by the token; the lost
 *   claim may still be on its way, so it is asked again until the lease is over, but a
 *   shutdown does not wait for it.
 */
export type RepairState = 'queued' | 'sent' | 'not_found';

interface Task {
  readonly kind: RepairKind;
  readonly jobId: string;
  readonly token: string;
  readonly fence: number | undefined;
  state: RepairState;
  /** Pointless after this (lease + grace, or retention end), on the monotonic clock. */
  readonly until: number;
  readonly retainMs: number;
  /** A release that leaves the job tainted (its holder may have applied an effect the next one repeats). */
  readonly tainted: boolean;
  attempts: number;
  dueAt: number;
  /** Told when the task ends, whichever way: the completion's reply, or undefined. */
  readonly settled: ((reply: 'completed' | 'superseded' | undefined) => void) | undefined;
}

export interface RepairOptions {
  store: IdempotencyStore;
  log: Logger;
  clock: Clock;
  /** Reports a job that may have run twice (the runner's `report('superseded', …)`). */
  superseded(jobId: string, detail: string): void;
  /** Most tasks held (default 10,000); past it the oldest releases go first (their leases end anyway). */
  maxTasks?: number;
}

const FIRST_RETRY_MS = 50;
const MAX_RETRY_MS = 1000;

/** A task's key: one per claim (job and token), so two claims of one job never replace each other. */
const keyOf = (jobId: string, token: string): string => `${jobId}\u0000${token}`;

export class RepairQueue {
  private readonly tasks = new Map<string, Task>();
  /** The tasks of each job (claims of this runner that were taken over keep theirs). */
  private readonly byJob = new Map<string, Set<Task>>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Infinity;
  private running: Promise<void> | undefined;
  private readonly maxTasks: number;

  constructor(private readonly options: RepairOptions) {
    this.maxTasks = options.maxTasks ?? 10_000;
  }

  private get now(): number {
    return this.options.clock.monotonic();
  }

  /** Tasks waiting. */
  get size(): number {
    return this.tasks.size;
  }

  /**
   * Releases `token`'s claim on `jobId` once the store answers. `kind` `undo`: the claim's
   * outcome is unknown. `tainted`: see the store's `release`.
   */
  release(kind: 'undo' | 'release', jobId: string, token: string, forMs: number, tainted = false): void {
    this.add({
      kind,
      jobId,
      token,
      fence: undefined,
      state: 'queued',
      until: this.now + forMs,
      retainMs: 0,
      tainted,
      attempts: 0,
      dueAt: this.now + FIRST_RETRY_MS,
      settled: undefined,
    });
  }

  /** Records `jobId`'s completion once the store answers; meanwhile `completing(jobId)` is true. */
  complete(
    jobId: string,
    token: string,
    fence: number,
    retainMs: number,
    settled?: (reply: 'completed' | 'superseded' | undefined) => void,
  ): void {
    this.add({
      kind: 'complete',
      jobId,
      token,
      fence,
      state: 'queued',
      until: this.now + retainMs,
      retainMs,
      tainted: false,
      attempts: 0,
      dueAt: this.now + FIRST_RETRY_MS,
      settled,
    });
  }

  /** True while this runner holds a completion of the job, not yet stored: the job is done. */
  completing(jobId: string): boolean {
    for (const t of this.byJob.get(jobId) ?? []) if (t.kind === 'complete') return true;
    return false;
  }

  /**
   * The token of a claim on `jobId` whose outcome is unknown, taken out of the queue,
   * while no release of it was sent: claiming again with it acquires the job if that
   * claim was written. Once a release was sent it may still land, and would delete a
   * claim made again with the same token, so the token is not reused then.
   */
  takeUndo(jobId: string): string | undefined {
    for (const t of this.byJob.get(jobId) ?? []) {
      if (t.kind !== 'undo' || t.state !== 'queued') continue;
      this.forget(t);
      return t.token;
    }
    return undefined;
  }

  /** The store just answered: retry what is waiting now rather than at its backoff. */
  kick(): void {
    if (this.tasks.size === 0) return;
    const now = this.now;
    for (const t of this.tasks.values()) t.dueAt = Math.min(t.dueAt, now);
    this.schedule(now);
  }

  /**
   * Retries everything until done, pointless, or `timeoutMs` passes (a graceful
   * shutdown). Undos the store has answered "nothing held" for are not waited on: the
   * lost claim most likely never landed, and its lease ends anyway. What is left is
   * reported; it keeps retrying on its (unref'd) timer while the process lives.
   */
  async drain(timeoutMs: number): Promise<void> {
    const end = this.now + timeoutMs;
    const waiting = () => [...this.tasks.values()].some((t) => t.state !== 'not_found');
    while (waiting() && this.now < end) {
      await Promise.all([...this.tasks.values()].map((t) => this.attempt(t)));
      if (this.tasks.size > 0)
        await new Promise((r) => setTimeout(r, Math.min(MAX_RETRY_MS / 4, Math.max(0, end - this.now))));
    }
    const left = [...this.tasks.values()].filter((t) => t.state !== 'not_found');
    if (left.length > 0) {
      this.options.log.error(
        `jobhook: shutting down with ${left.length} store operation(s) not done (the store did not answer).`,
        { jobs: left.slice(0, 20).map((t) => t.jobId) },
      );
    }
  }

  private add(task: Task): void {
    const key = keyOf(task.jobId, task.token);
    const before = this.tasks.get(key);
    // A claim's completion is never dropped for a release of that same claim.
    if (before?.kind === 'complete' && task.kind !== 'complete') return;
    // A later step of the same claim supersedes the waiting one (a completion after an undo).
    this.end(before, undefined);
    if (this.tasks.size >= this.maxTasks) this.evict();
    this.tasks.set(key, task);
    let job = this.byJob.get(task.jobId);
    if (job === undefined) this.byJob.set(task.jobId, (job = new Set()));
    job.add(task);
    this.schedule(this.now);
  }

  /** Takes `t` out of the queue and its job's set. */
  private forget(t: Task): void {
    this.tasks.delete(keyOf(t.jobId, t.token));
    const job = this.byJob.get(t.jobId);
    job?.delete(t);
    if (job?.size === 0) this.byJob.delete(t.jobId);
  }

  /** Takes `t` out of the queue (if it is still in it) and tells whoever waits on it. */
  private end(t: Task | undefined, reply: 'completed' | 'superseded' | undefined): void {
    if (t === undefined || this.tasks.get(keyOf(t.jobId, t.token)) !== t) return;
    this.forget(t);
    t.settled?.(reply);
  }

  private evict(): void {
    for (const t of this.tasks.values()) {
      if (t.kind !== 'complete') {
        this.end(t, undefined);
        this.options.log.warn(
          `jobhook: too many store operations waiting (${this.maxTasks}); dropped the release of job ${t.jobId}, which waits for its lease (and takeover grace) to end instead.`,
        );
        return;
      }
    }
    const [t] = this.tasks.values();
    if (t !== undefined) {
      this.end(t, undefined);
      this.options.log.error(
        `jobhook: too many store operations waiting (${this.maxTasks}); dropped the completion of job ${t.jobId}: a redelivery after its lease may run it again.`,
      );
    }
  }

  private schedule(now: number): void {
    let next = Infinity;
    for (const t of this.tasks.values()) if (t.dueAt < next) next = t.dueAt;
    if (next === Infinity || next >= this.timerAt) return;
    clearTimeout(this.timer);
    this.timerAt = next;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.timerAt = Infinity;
        this.running ??= this.runDue().finally(() => {
          this.running = undefined;
          this.schedule(this.now);
        });
      },
      Math.max(0, next - now),
    );
    // Never keeps the process alive; a graceful shutdown calls drain().
    (this.timer as { unref?: () => void }).unref?.();
  }

  private async runDue(): Promise<void> {
    const now = this.now;
    await Promise.all([...this.tasks.values()].filter((t) => t.dueAt <= now).map((t) => this.attempt(t)));
  }

  private retryLater(t: Task): void {
    t.attempts++;
    t.dueAt = this.now + Math.min(FIRST_RETRY_MS * 2 ** t.attempts, MAX_RETRY_MS);
  }

  private async attempt(t: Task): Promise<void> {
    if (this.tasks.get(keyOf(t.jobId, t.token)) !== t) return; // superseded or done meanwhile
    const { log } = this.options;
    if (this.now > t.until) {
      this.end(t, undefined);
      if (t.kind === 'complete')
        log.error(
          `jobhook: gave up recording the completion of job ${t.jobId}: the store did not answer within the retention.`,
        );
      else
        log.debug(
          `jobhook: the lease and takeover grace of job ${t.jobId} are over; its claim no longer blocks it.`,
        );
      return;
    }
    if (t.state === 'queued') t.state = 'sent';
    let reply: 'released' | 'not_held' | 'completed' | 'superseded';
    try {
      if (t.kind === 'complete') {
        reply = completeReply(
          await this.options.store.complete(t.jobId, t.token, {
            retainMs: t.retainMs,
            ...(t.fence === undefined ? {} : { fence: t.fence }),
          }),
        );
      } else {
        reply = (await (t.tainted
          ? this.options.store.release(t.jobId, t.token, { tainted: true })
          : this.options.store.release(t.jobId, t.token)))
          ? 'released'
          : 'not_held';
      }
    } catch (err) {
      this.retryLater(t);
      if (t.attempts === 1)
        log.debug(
          `jobhook: ${t.kind} of job ${t.jobId} failed again; retrying in the background`,
          errorDetails(err),
        );
      return;
    }
    if (t.kind === 'undo' && reply === 'not_held') {
      // Nothing to release yet: the lost claim may still be on its way to the store.
      t.state = 'not_found';
      this.retryLater(t);
      return;
    }
    this.end(t, reply === 'completed' || reply === 'superseded' ? reply : undefined);
    if (t.kind !== 'complete') log.debug(`jobhook: released the claim on job ${t.jobId}.`);
    else if (reply === 'completed')
      log.info(`jobhook: recorded the completion of job ${t.jobId} after ${t.attempts + 1} attempt(s).`);
    else
      this.options.superseded(
        t.jobId,
        'its completion, retried while the store was unavailable, found the job taken over by another delivery (or its claim released)',
      );
  }
}
