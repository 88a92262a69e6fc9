/**
 * Store operations that must not be lost when the store fails for a moment: the
 * release of a claim whose outcome is unknown (its reply was lost, so it may have
 * been written and would block the job for a whole lease), and the completion of a
 * job whose handler succeeded. Retried in the background, soon after any store call
 * succeeds, until done or pointless (the lease or the retention is over). Bounded.
 * One queue per store in a process, so receivers and the reconciler see each other's
 * pending completions; each task speaks to the log, and reads the clock, of the
 * receiver or reconciler that made it.
 */
import { errorDetails, type Logger } from '../log.js';
import type { IdempotencyStore } from '../idempotency/types.js';

export type RepairStage = 'release' | 'complete';

interface Task {
  stage: RepairStage;
  jobId: string;
  token: string;
  /**
   * A release of a claim whose outcome is unknown: it may still land in the store
   * after a release found nothing, so "nothing to release" is retried until `until`.
   */
  unconfirmed: boolean;
  /** An attempt was sent: a stale one may still reach the store, so the token is spent. */
  sent: boolean;
  /** The store answered "nothing to release" at least once (an unconfirmed release). */
  answered: boolean;
  /** The operation is pointless after this (lease or retention end), epoch ms. */
  until: number;
  /** Retention to complete with. */
  retainMs: number;
  attempts: number;
  dueAt: number;
  /** Told when the task ends, whichever way (the runner stops renewing its lease then). */
  settled: (() => void) | undefined;
  /** Whose task it is: its messages go to that log, `until` is on that clock. */
  owner: RepairOwner;
}

/** The receiver or reconciler a task comes from: its logger and its clock. */
export interface RepairOwner {
  log: Logger;
  now: () => number;
}

export interface RepairQueueOptions {
  store: IdempotencyStore;
  /** Most tasks held (default 10,000); past it the oldest releases go first (their leases end anyway). */
  maxTasks?: number;
}

const FIRST_RETRY_MS = 50;
const MAX_RETRY_MS = 1000;

const queues = new WeakMap<IdempotencyStore, RepairQueue>();

/** The repair queue of `store` in this process (made on first use). */
export function repairQueueFor(o: RepairQueueOptions): RepairQueue {
  let q = queues.get(o.store);
  if (q === undefined) {
    q = new RepairQueue(o);
    queues.set(o.store, q);
  }
  return q;
}

export class RepairQueue {
  private readonly tasks = new Map<string, Task>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Infinity;
  private running: Promise<void> | undefined;
  private readonly maxTasks: number;
  /** Retry times are on the real clock (they set real timers); each task's `until` on its owner's. */
  private readonly now = Date.now;

  constructor(private readonly o: RepairQueueOptions) {
    this.maxTasks = o.maxTasks ?? 10_000;
  }

  /** Tasks waiting. */
  get size(): number {
    return this.tasks.size;
  }

  /**
   * Releases `token`'s claim on `jobId` once the store answers (pointless after
   * `until`). `unconfirmed`: the claim's outcome is unknown, so it may land late.
   */
  release(jobId: string, token: string, until: number, unconfirmed: boolean, owner: RepairOwner): void {
    this.add({ stage: 'release', jobId, token, unconfirmed, sent: false, answered: false, until, retainMs: 0, attempts: 0, dueAt: this.now() + FIRST_RETRY_MS, settled: undefined, owner });
  }

  /** Marks `jobId` completed once the store answers; meanwhile `completing(jobId)` is true. */
  complete(jobId: string, token: string, retainMs: number, owner: RepairOwner, settled?: () => void): void {
    const until = owner.now() + retainMs;
    this.add({ stage: 'complete', jobId, token, unconfirmed: false, sent: false, answered: false, until, retainMs, attempts: 0, dueAt: this.now() + FIRST_RETRY_MS, settled, owner });
  }

  /** True while this process holds the job's completion, not yet stored: the job is done. */
  completing(jobId: string): boolean {
    return this.tasks.get(jobId)?.stage === 'complete';
  }

  /**
   * The token of a claim on `jobId` whose outcome is unknown, taken out of the queue,
   * when no release of it was ever sent: claiming again with it acquires the job if
   * that claim was written. Once a release was sent it may still land, and would
   * delete a claim made again with the same token, so the token is not reused then.
   */
  takeUnconfirmed(jobId: string): string | undefined {
    const t = this.tasks.get(jobId);
    if (t === undefined || t.stage !== 'release' || !t.unconfirmed || t.sent) return undefined;
    this.tasks.delete(jobId);
    return t.token;
  }

  /** The store just answered: retry what is waiting now rather than at its backoff. */
  kick(): void {
    if (this.tasks.size === 0) return;
    const now = this.now();
    for (const t of this.tasks.values()) t.dueAt = Math.min(t.dueAt, now);
    this.schedule(now);
  }

  /**
   * Retries everything until done, pointless, or `timeoutMs` passes (for a graceful
   * shutdown). Releases of lost claims the store has already answered "nothing" for
   * are not waited on: the claim most likely never landed, and its lease ends anyway.
   * What is left is reported to `log` (the caller's).
   */
  async drain(timeoutMs: number, log: Logger): Promise<void> {
    const end = this.now() + timeoutMs;
    const waiting = () => [...this.tasks.values()].some((t) => !t.answered);
    while (waiting() && this.now() < end) {
      await Promise.all([...this.tasks.values()].map((t) => this.attempt(t)));
      if (this.tasks.size > 0) await new Promise((r) => setTimeout(r, Math.min(MAX_RETRY_MS / 4, Math.max(0, end - this.now()))));
    }
    const left = [...this.tasks.values()].filter((t) => !t.answered);
    if (left.length > 0) {
      log.error(`jobhook: shutting down with ${left.length} store operation(s) not done (the store did not answer).`, { jobs: left.slice(0, 20).map((t) => t.jobId) });
    }
    // What is left keeps retrying on its (unref'd) timer while the process lives.
  }

  private add(task: Task): void {
    const before = this.tasks.get(task.jobId);
    if (before?.stage === 'complete' && task.stage === 'release') {
      // This process finished the job and holds its claim (renewed until the completion
      // is stored): another of its claims, lost on the way, cannot have taken the job,
      // and the completion must not be dropped for it.
      return;
    }
    // A completion supersedes a pending release of the same job (same claim, later step).
    this.end(before);
    if (this.tasks.size >= this.maxTasks) this.evict();
    this.tasks.set(task.jobId, task);
    this.schedule(this.now());
  }

  /** Takes `t` out of the queue (if it is still in it) and tells whoever waits on it. */
  private end(t: Task | undefined): void {
    if (t === undefined || this.tasks.get(t.jobId) !== t) return;
    this.tasks.delete(t.jobId);
    t.settled?.();
  }

  private evict(): void {
    for (const t of this.tasks.values()) {
      if (t.stage === 'release') {
        this.end(t);
        t.owner.log.warn(`jobhook: too many store operations waiting (${this.maxTasks}); dropped the release of job ${t.jobId}, which waits for its lease (and takeover grace) to end instead.`);
        return;
      }
    }
    const [t] = this.tasks.values();
    if (t !== undefined) {
      this.end(t);
      t.owner.log.error(`jobhook: too many store operations waiting (${this.maxTasks}); dropped the completion of job ${t.jobId}: a redelivery after its lease may run it again.`);
    }
  }

  private schedule(now: number): void {
    let next = Infinity;
    for (const t of this.tasks.values()) if (t.dueAt < next) next = t.dueAt;
    if (next === Infinity || next >= this.timerAt) return;
    clearTimeout(this.timer);
    this.timerAt = next;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Infinity;
      this.running ??= this.runDue().finally(() => {
        this.running = undefined;
        this.schedule(this.now());
      });
    }, Math.max(0, next - now));
    // Never keeps the process alive; a graceful shutdown calls drain().
    this.timer.unref?.();
  }

  private async runDue(): Promise<void> {
    const now = this.now();
    const due = [...this.tasks.values()].filter((t) => t.dueAt <= now);
    await Promise.all(due.map((t) => this.attempt(t)));
  }

  private retryLater(t: Task): void {
    t.attempts++;
    t.dueAt = this.now() + Math.min(FIRST_RETRY_MS * 2 ** t.attempts, MAX_RETRY_MS);
  }

  private async attempt(t: Task): Promise<void> {
    if (this.tasks.get(t.jobId) !== t) return; // superseded or done meanwhile
    const { log } = t.owner;
    if (t.owner.now() > t.until) {
      this.end(t);
      if (t.stage === 'complete') log.error(`jobhook: gave up recording the completion of job ${t.jobId}: the store did not answer within the retention.`);
      else log.debug(`jobhook: the lease and takeover grace of job ${t.jobId} are over; its claim no longer blocks it.`);
      return;
    }
    t.sent = true;
    let done: boolean;
    try {
      done = t.stage === 'release' ? await this.o.store.release(t.jobId, t.token) : await this.o.store.complete(t.jobId, t.token, { retainMs: t.retainMs });
    } catch (err) {
      this.retryLater(t);
      if (t.attempts === 1) log.debug(`jobhook: ${t.stage} of job ${t.jobId} failed again; retrying in the background`, errorDetails(err));
      return;
    }
    if (t.stage === 'release' && !done && t.unconfirmed) {
      // Nothing to release yet: the lost claim may still be on its way to the store.
      t.answered = true;
      this.retryLater(t);
      return;
    }
    this.end(t);
    if (t.stage === 'complete') {
      if (done) log.info(`jobhook: recorded the completion of job ${t.jobId} after ${t.attempts + 1} attempt(s).`);
      else log.warn(`jobhook: job ${t.jobId} was claimed by another delivery before its completion could be recorded: it may run twice.`);
    } else {
      log.debug(`jobhook: released the claim on job ${t.jobId}.`);
    }
  }
}
