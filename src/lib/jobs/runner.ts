/**
 * The job runner: runs each job's handler at most once at a time across deliveries,
 * instances and reconciliation, and never lets a double pass in silence. It owns the
 * store, the leases (claims with heartbeat and self-fencing), the repair queue and the
 * clock; receivers and the reconciler share one. Knows nothing about HTTP.
 *
 * What "once" means (docs/protocol.md, "Idempotency"): effects written through a transactional store's
 * transaction happen exactly once (the completion commits with them, conditioned on the
 * claim's token and fencing number); every other effect happens at least once, and
 * each job that may have run twice is reported (`onError` stage `superseded`).
 */
import { isWebhookError, JobSupersededError } from '../base/errors.js';
import { MemoryIdempotencyStore } from './memory-store.js';
import {
  checkGraceMs,
  newToken,
  type ClaimResult,
  type IdempotencyStore,
  type StoreTransaction,
  type TransactionalStore,
} from './store.js';
import { errorDetails, resolveLogger, type Logger, type LoggerInput } from '../base/log.js';
import { checkMs, checkOptionNames, type OptionNamesOf } from '../base/options.js';
import { DEFAULT_LEASE_MS, DEFAULT_RETAIN_MS, DEFAULT_TAKEOVER_GRACE_MS } from '../base/protocol.js';
import { HeldClaim, type ClaimOwner } from './claim.js';
import { systemClock, type Clock } from './clock.js';
import { completeReply } from './replies.js';
import { FailureLog } from './failure-log.js';
import { RepairQueue } from './repair.js';
import {
  createTelemetry,
  TELEMETRY_OPTIONS,
  type Telemetry,
  type TelemetryOptions,
} from '../runtime/telemetry.js';
import { timedStore } from './timed-store.js';

/** Where a failure happened, for `onError` and the log. `superseded`: a job that may have run twice. */
export type FailureStage =
  'body' | 'claim' | 'handler' | 'renew' | 'complete' | 'release' | 'poll' | 'superseded';

/** `onError`'s signature. */
export type ErrorListener = (error: unknown, context: { jobId?: string; stage: FailureStage }) => void;

/** Options of `createJobRunner` (and of the receivers and the reconciler that make their own). */
export interface JobRunnerOptions extends TelemetryOptions {
  /** Idempotency store shared by the runner's instances (default: a `MemoryIdempotencyStore` of this runner). */
  store?: IdempotencyStore;
  /**
   * Lease of a claim (default 5 s), renewed every third of it while the handler runs: a
   * slow handler keeps its job, a crashed process frees its jobs within one lease.
   */
  leaseMs?: number;
  /**
   * When a delivery finds another holder's lease over, how long it waits before taking
   * the job over (default 2 s; 0: at once). A holder cut off from the store for longer
   * than its lease (a store outage, a partition) may be alive with the job done: this
   * gives it time to record that once the store answers, so the job does not run twice.
   */
  takeoverGraceMs?: number;
  /**
   * How long completed job ids are remembered (default 24 h 5 min), past the later of the
   * event's `finished_at` and the completion; a receiver sharing the runner refuses one
   * shorter than its replay window plus the clock skew it tolerates.
   */
  retainMs?: number;
  /**
   * How long a handler may run (default 120 s: four of the gateway's 30 s attempts). At
   * the deadline its `signal` aborts and jobhook stops waiting for it: the transaction is
   * rolled back, the claim released (the retry is reported as a job that may have run
   * twice) and the log names the job that hung. Raise it for handlers that take longer.
   */
  handlerTimeoutMs?: number;
  /** Where jobhook says what happened (default: warnings and errors to the console). */
  log?: LoggerInput;
  /**
   * Hears every failure that is not the sender's: the handler throwing, the store failing
   * to claim, renew, complete or release, a job that may have run twice (`superseded`),
   * a body that cannot be read, a poll that failed.
   */
  onError?: ErrorListener;
}

/** The runner's options, resolved once at construction. */
export interface ResolvedRunnerOptions {
  readonly store: IdempotencyStore;
  readonly leaseMs: number;
  readonly takeoverGraceMs: number;
  readonly retainMs: number;
  readonly handlerTimeoutMs: number;
  /** How long before its lease ends (as this process counts) a holder stops trusting it. */
  readonly selfFenceMarginMs: number;
  /** Whether handlers get a transaction (a transactional store made with `transactional: true`). */
  readonly transactional: boolean;
  readonly log: Logger;
  readonly onError: ErrorListener | undefined;
  readonly clock: Clock;
  /** Metrics and spans (OpenTelemetry), or none. */
  readonly telemetry: Telemetry;
}

/** What `health()` finds, for a readiness probe. */
export interface RunnerHealth {
  /** The store answered within the timeout (a store without `ping()` is not asked: ok). */
  ok: boolean;
  store: { ok: boolean; latencyMs?: number; error?: string; code?: string };
  /** Store operations waiting to be retried (a growing queue: the store is failing). */
  repairQueue: number;
}

/** What a handler gets from the runner about its claim. */
export interface ClaimContext<Tx = unknown> {
  /** Aborted when this process lost its claim on the job, or could not confirm its lease in time. */
  readonly signal: AbortSignal;
  /**
   * The claim's fencing number: larger for every later holder of this job (a takeover
   * after a lease ran out). Make a downstream write conditional on it (store it with the
   * effect; refuse a write carrying a smaller one) and a superseded holder cannot
   * overwrite the newer one's effect.
   */
  readonly fencingToken: number;
  /**
   * Whether this process still holds the claim, from the monotonic clock (true right
   * after a process pause only if the lease was confirmed recently enough). Ask it right
   * before an effect that must not happen twice.
   */
  holdsClaim(): boolean;
  /** With a transactional store: the connection inside the transaction that will record the job's completion. */
  readonly transaction: Tx | undefined;
}

/** What running a job came to. */
export type RunResult =
  /** The handler ran and its completion is recorded (or being recorded). `superseded`: the job was also run by another holder (reported). */
  | { kind: 'processed'; superseded?: boolean }
  /** Completed before (or being recorded by this runner): the handler was not called. */
  | { kind: 'duplicate' }
  /** Another delivery holds the job. */
  | { kind: 'in_progress'; retryAfterMs: number | undefined }
  | { kind: 'handler_failed' }
  | { kind: 'store_unavailable' }
  /** Transactional: the handler's transaction was rolled back because the claim was taken over or its lease could not be held. Nothing of it was applied. */
  | { kind: 'claim_lost'; retryAfterMs: number };

export interface RunOptions {
  /** Retention of this job's completion mark from its completion, if longer than the runner's `retainMs`. */
  retainMs?: number;
  /**
   * The event's `finished_at` (epoch ms), when known: the runner's `retainMs` is then
   * counted from the later of it and the completion, as the receivers count their replay
   * window (a gateway ahead of this clock signs a `finished_at` in this clock's future).
   */
  finishedAt?: number | undefined;
}

/**
 * How long past its completion (at `now`) a job's mark is kept: `keepMs` past the later of
 * the event's `finished_at` and the completion, and never less than `atLeastMs`. The one
 * retention rule of every path that completes a job (receivers, the reconciler, queue
 * workers): a replay accepted anywhere inside its window still finds the mark.
 */
export function retentionMs(keepMs: number, now: number, finishedAt?: number, atLeastMs = 0): number {
  const from = finishedAt !== undefined && Number.isFinite(finishedAt) ? Math.max(finishedAt, now) : now;
  return Math.ceil(Math.max(from + keepMs - now, atLeastMs));
}

export interface JobRunner {
  /** The options, resolved once. */
  readonly options: ResolvedRunnerOptions;
  /** Claims `jobId` and runs `handler` once it is held. */
  run(
    jobId: string,
    handler: (claim: ClaimContext) => void | Promise<void>,
    options?: RunOptions,
  ): Promise<RunResult>;
  /** Reports a failure to the log and `onError` (never throws). */
  report(stage: FailureStage, error: unknown, jobId?: string): void;
  /** Finishes the store operations still waiting (graceful shutdown), `timeoutMs` at most (default 10 s). */
  close(timeoutMs?: number): Promise<void>;
  /** Store operations waiting to be retried. */
  readonly pending: number;
  /** Asks the store (its `ping()`) within `timeoutMs` (default 1 s), for a readiness probe. */
  health(timeoutMs?: number): Promise<RunnerHealth>;
}

/** A handler that did not settle by its deadline (`handlerTimeoutMs`): the reason of its aborted signal, reported at stage `handler`. */
export class HandlerTimeoutError extends Error {
  override readonly name = 'HandlerTimeoutError';
  constructor(
    readonly jobId: string,
    timeoutMs: number,
  ) {
    super(
      `the handler of job ${jobId} did not settle within ${timeoutMs} ms (handlerTimeoutMs): its signal is aborted, its transaction rolled back and its claim released; a retry runs it again (reported as a job that may have run twice). Find what it waits for, or raise handlerTimeoutMs`,
    );
  }
}

/** A handler's deadline by default: four of the gateway's 30 s attempts. */
export const DEFAULT_HANDLER_TIMEOUT_MS = 120_000;

/** How often a delivery waiting out a takeover grace asks the store again. */
const STALE_POLL_MS = 250;

/** The time left of a takeover grace, when `claim` found another holder's lease over. */
function graceLeft(claim: ClaimResult | undefined): number | undefined {
  return claim?.status === 'in_progress' && claim.stale === true ? (claim.retryAfterMs ?? 0) : undefined;
}

function isTransactional(store: IdempotencyStore): store is TransactionalStore {
  const s = store as Partial<TransactionalStore>;
  return s.transactional === true && typeof s.begin === 'function';
}

/** Checks the options (TypeError for mistakes) and resolves them once. */
export function resolveRunnerOptions(
  options: JobRunnerOptions,
  clock: Clock = systemClock,
): ResolvedRunnerOptions {
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object');
  const log = resolveLogger(options.log);
  if (options.onError !== undefined && typeof options.onError !== 'function')
    throw new TypeError('onError must be a function (error, context) => void');
  // The default store logs to the runner's log, resolved once above.
  const store = options.store ?? new MemoryIdempotencyStore({ log });
  for (const m of ['claim', 'complete', 'release'] as const) {
    if (typeof (store as unknown as Record<string, unknown>)[m] !== 'function')
      throw new TypeError(`store must implement ${m}()`);
  }
  if (typeof store.renew !== 'function') {
    log.warn(
      'jobhook: the idempotency store has no renew(): leases are not renewed, so a handler slower than leaseMs may run twice.',
    );
  }
  const leaseMs = options.leaseMs === undefined ? DEFAULT_LEASE_MS : checkMs(options.leaseMs, 'leaseMs');
  return Object.freeze({
    store,
    leaseMs,
    takeoverGraceMs: checkGraceMs(options.takeoverGraceMs, DEFAULT_TAKEOVER_GRACE_MS),
    retainMs: options.retainMs === undefined ? DEFAULT_RETAIN_MS : checkMs(options.retainMs, 'retainMs'),
    handlerTimeoutMs:
      options.handlerTimeoutMs === undefined
        ? DEFAULT_HANDLER_TIMEOUT_MS
        : checkMs(options.handlerTimeoutMs, 'handlerTimeoutMs'),
    // A fifth of the lease (1 s of the default 5 s): renewals every third of it leave the
    // lease confirmed well inside that, while a holder cut off or paused stops trusting its
    // claim before the store can let another take it.
    selfFenceMarginMs: Math.max(1, Math.floor(leaseMs / 5)),
    transactional: isTransactional(store),
    log,
    onError: options.onError,
    clock,
    telemetry: createTelemetry(options),
  });
}

/**
 * Creates the job runner that receivers and the reconciler share: one store, one
 * lease policy, one repair queue, one clock.
 *
 * @example
 * ```ts
 * import { createJobRunner, createReconciler } from 'jobhook';
 * import { createReceiver } from 'jobhook/express';
 *
 * const runner = createJobRunner({ store, leaseMs: 5_000 });
 * app.post('/webhooks/gateway', createReceiver({ publicKey, runner, onEvent: handle }));
 * createReconciler({ client: gateway, runner, onEvent: handle }).start();
 * ```
 */
export function createJobRunner(options: JobRunnerOptions = {}, clock?: Clock): JobRunner {
  checkOptionNames(options, JOB_RUNNER_OPTIONS);
  return jobRunner(resolveRunnerOptions(options, clock));
}

/** Options that belong to the job runner: given beside a `runner`, they would be ignored. */
const RUNNER_OWN = [
  'store',
  'leaseMs',
  'takeoverGraceMs',
  'retainMs',
  'handlerTimeoutMs',
  'onError',
  'meterProvider',
  'tracerProvider',
] as const;

/**
 * The runner of a receiver, the reconciler or a queue worker: the shared one it was given
 * (`runner`, then the runner's own options are refused beside it), or one made from its
 * own options (their names are checked by its own constructor: the runner's are among them).
 */
export function runnerFor(options: JobRunnerOptions & { runner?: JobRunner }): JobRunner {
  if (options.runner === undefined) return jobRunner(resolveRunnerOptions(options));
  if (typeof options.runner?.run !== 'function')
    throw new TypeError('runner must be a job runner made by createJobRunner()');
  const given = RUNNER_OWN.filter((k) => options[k] !== undefined);
  if (given.length > 0)
    throw new TypeError(
      `${given.join(', ')} belong${given.length === 1 ? 's' : ''} to the job runner: give ${given.length === 1 ? 'it' : 'them'} to createJobRunner(), not with runner`,
    );
  return options.runner;
}

/**
 * The log of what runs on a runner (a receiver, the reconciler): the runner's, resolved
 * once with it, unless a shared runner was given and the user has a log of its own.
 */
export function logBesideRunner(
  options: { runner?: JobRunner; log?: LoggerInput },
  runner: JobRunner,
): Logger {
  return options.runner !== undefined && options.log !== undefined
    ? resolveLogger(options.log)
    : runner.options.log;
}

/** The runner for resolved options: its methods, each usable on its own (`const { run } = runner`). */
export function jobRunner(o: ResolvedRunnerOptions): JobRunner {
  const runner = new Runner(o);
  return {
    options: o,
    run: (jobId, handler, runOptions) => runner.run(jobId, handler, runOptions),
    report: (stage, error, jobId) => runner.report(stage, error, jobId),
    close: (timeoutMs = 10_000) => runner.repair.drain(timeoutMs),
    get pending() {
      return runner.repair.size;
    },
    health: (timeoutMs) => runner.health(timeoutMs),
  };
}

/** A job's handler, as `run` takes it. */
type Handler = (claim: ClaimContext) => void | Promise<void>;

/** What `claim` came to, and when its request was sent (monotonic ms): the lease is counted from then. */
interface Claimed {
  result: ClaimResult | undefined;
  sentAt: number;
}

/** What `report` says happened, by stage. */
function failureText(stage: FailureStage): string {
  switch (stage) {
    case 'handler':
      return 'the handler failed';
    case 'body':
      return 'the request body could not be read';
    case 'poll':
      return 'polling the gateway failed';
    case 'superseded':
      return 'a job may have run twice';
    default:
      return `the idempotency store failed to ${stage}`;
  }
}

/**
 * A handler that failed: 500, or 503 when what failed is a store or broker it hands the
 * event to (a StoreUnavailableError: the queue handlers of jobhook/bullmq and jobhook/nats).
 * The gateway retries both.
 */
function failed(err: unknown): RunResult {
  return isWebhookError(err) && err.code === 'STORE_UNAVAILABLE'
    ? { kind: 'store_unavailable' }
    : { kind: 'handler_failed' };
}

/**
 * A completion or COMMIT that failed because of the handler's own use of the transaction
 * (refused by the server, so nothing is in doubt). `tainted`: the handler committed writes
 * of its own (it ended the transaction with COMMIT), which a retry repeats.
 */
function handlersFault(err: unknown): { error: Error; tainted: boolean } | undefined {
  const cause = ((err as { cause?: unknown })?.cause ?? err) as
    { code?: unknown; ended?: unknown; message?: unknown } | undefined;
  const code = cause?.code;
  const fault = (message: string, tainted = false) => ({
    error: new Error(message, { cause: err }),
    tainted,
  });
  if (code === '25P02')
    return fault(
      `the handler's transaction was aborted by an SQL error (caught, so onEvent resolved): every later statement fails. Take a SAVEPOINT around a statement that may fail, or let the error reach jobhook.`,
    );
  if (code === '40001' || code === '40P01')
    return fault(
      `the handler's transaction could not be serialized (${String(code)}): keep it at READ COMMITTED (the lease renewals update the job's row while it runs).`,
    );
  if (code === '25P01') {
    // Ended by the handler (the store saw another transaction, or none, where it began one).
    return cause!.ended === 'COMMIT'
      ? fault(
          `the handler ended the transaction (COMMIT) on context.transaction: its writes were committed without the job's completion, and a retry runs it again (reported as a job that may have run twice). Never end context.transaction: jobhook commits it.`,
          true,
        )
      : fault(
          `the handler ended the transaction (ROLLBACK) on context.transaction: nothing it wrote there was applied. Never end context.transaction: throw to roll it back.`,
        );
  }
  // A constraint checked at COMMIT (a deferred one): the handler's data, refused.
  if (typeof code === 'string' && code.startsWith('23'))
    return fault(
      `the handler's writes broke a constraint checked at COMMIT (${code}: ${String(cause?.message ?? '')}): nothing was applied.`,
    );
  return undefined;
}

function handlerContext(claim: HeldClaim, transaction: StoreTransaction | undefined): ClaimContext {
  return {
    // Read only when the handler reads it: the claim makes its AbortController then.
    get signal() {
      return claim.signal;
    },
    fencingToken: claim.fence,
    holdsClaim: () => claim.holds(),
    transaction: transaction?.client,
  };
}

/** The store's `ping()` within `timeoutMs` (a store without one is not asked: ok). */
async function pingStore(store: IdempotencyStore, timeoutMs: number): Promise<RunnerHealth['store']> {
  const ping = store.ping?.bind(store);
  if (ping === undefined) return { ok: true };
  const started = performance.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([
      ping(),
      new Promise(
        (_, reject) =>
          (timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs)),
      ),
    ]);
    return { ok: true, latencyMs: Math.round((performance.now() - started) * 100) / 100 };
  } catch (err) {
    return {
      ok: false,
      error: (err as Error)?.message ?? String(err),
      ...(isWebhookError(err) ? { code: err.code } : {}),
    };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The runner's state (its options, the timed store, the repair queue, what its claims
 * need) and the steps of a run: claim (waiting out a takeover grace), the handler, then
 * the completion, plain or inside the handler's transaction.
 */
class Runner {
  /** The runner's own calls go through the timed store (the same one when nothing is recorded). */
  private readonly store: IdempotencyStore;
  readonly repair: RepairQueue;
  private readonly owner: ClaimOwner;
  /** Store and body failures: the first of each kind, then a summary per interval. */
  private readonly failures: FailureLog;

  constructor(private readonly o: ResolvedRunnerOptions) {
    const { clock, log, telemetry } = o;
    this.store = timedStore(o.store, telemetry);
    this.failures = new FailureLog(log);
    const repair = new RepairQueue({
      store: this.store,
      log,
      clock,
      superseded: (jobId, detail) => this.superseded(jobId, detail),
    });
    this.repair = repair;
    telemetry.gauge(
      'jobhook.repair.queue',
      'Store operations (completions, releases) waiting to be retried',
      () => repair.size,
    );
    this.owner = {
      store: this.store,
      leaseMs: o.leaseMs,
      selfFenceMarginMs: o.selfFenceMarginMs,
      clock,
      renewFailed: (jobId, error) => this.report('renew', error, jobId),
      lostClaim: (jobId, why) =>
        log.warn(
          why === 'superseded'
            ? `jobhook: lost the claim on job ${jobId} while its handler runs (another delivery took it over); its signal is aborted.`
            : `jobhook: could not confirm the lease on job ${jobId} in time (the store did not answer, or this process was paused); its signal is aborted.`,
        ),
    };
  }

  report(stage: FailureStage, error: unknown, jobId?: string): void {
    const { log } = this.o;
    this.failures.tell(stage, failureText(stage), error, jobId);
    try {
      this.o.onError?.(error, { ...(jobId === undefined ? {} : { jobId }), stage });
    } catch (err) {
      log.error('jobhook: onError threw', errorDetails(err));
    }
  }

  private superseded(jobId: string, detail: string): void {
    this.o.telemetry.superseded?.add(1);
    this.report('superseded', new JobSupersededError(jobId, detail), jobId);
  }

  async run(jobId: string, handler: Handler, runOptions: RunOptions = {}): Promise<RunResult> {
    const { repair, o } = this;
    if (repair.completing(jobId)) return { kind: 'duplicate' };
    const retainMs = retentionMs(o.retainMs, o.clock.now(), runOptions.finishedAt, runOptions.retainMs);
    // Reusing the token of an unconfirmed claim acquires the job if that claim was written.
    const token = repair.takeUndo(jobId) ?? newToken();
    const got = await o.telemetry.phase('jobhook.claim', () => this.claimWaitingOutGrace(jobId, token));
    if (got === 'completing') return { kind: 'duplicate' };
    const { result: claimed, sentAt } = got;
    if (claimed === undefined) return { kind: 'store_unavailable' };
    if (claimed.status === 'completed') return { kind: 'duplicate' };
    if (claimed.status === 'in_progress') return { kind: 'in_progress', retryAfterMs: claimed.retryAfterMs };
    // Jobs claimed from stores written for earlier versions carry no fencing number.
    const fence = claimed.fence ?? 0;
    if (claimed.tookOver === true) {
      // Also when this claim is one whose reply was lost (claimed again with its token), or
      // follows the release of such a claim: the store keeps the takeover's taint.
      this.superseded(
        jobId,
        'it was taken over from a holder whose lease ran out (or from the release of a claim that had taken it over); if that holder had applied its effect, the job runs twice',
      );
    }
    const claim = new HeldClaim(this.owner, jobId, token, fence, sentAt);
    return o.transactional
      ? this.runInTransaction(claim, handler, retainMs)
      : this.runPlain(claim, handler, retainMs);
  }

  async health(timeoutMs = 1000): Promise<RunnerHealth> {
    const storeHealth = await pingStore(this.o.store, timeoutMs);
    return { ok: storeHealth.ok, store: storeHealth, repairQueue: this.repair.size };
  }

  // --- The claim

  /** Undoes a claim whose outcome is unknown (it may have been written). */
  private undo(jobId: string, token: string): void {
    this.repair.release('undo', jobId, token, this.o.leaseMs + this.o.takeoverGraceMs);
  }

  private async claimJob(jobId: string, token: string): Promise<Claimed> {
    const { o } = this;
    const sentAt = o.clock.monotonic();
    try {
      const result = await this.store.claim(jobId, {
        leaseMs: o.leaseMs,
        token,
        takeoverGraceMs: o.takeoverGraceMs,
      });
      this.repair.kick();
      return { result, sentAt };
    } catch (err) {
      // The claim may have been written although no reply came (or may still land): undo
      // it by token once the store answers, or the job stays blocked for a lease. (Not
      // when the store said its tables are missing: nothing was written.)
      if (!isWebhookError(err) || err.code !== 'STORE_NOT_MIGRATED') this.undo(jobId, token);
      this.report('claim', err, jobId);
      return { result: undefined, sentAt };
    }
  }

  /**
   * Claims the job. When the holder's lease ran out, that holder may be alive and only cut
   * off from the store, with a completion to record now that the store answers: wait
   * (open) through the grace, asking again every STALE_POLL_MS, then take the job over.
   */
  private async claimWaitingOutGrace(jobId: string, token: string): Promise<Claimed | 'completing'> {
    const { clock, takeoverGraceMs } = this.o;
    let got = await this.claimJob(jobId, token);
    const end = clock.monotonic() + takeoverGraceMs + STALE_POLL_MS;
    for (
      let left = graceLeft(got.result);
      left !== undefined && left <= takeoverGraceMs && clock.monotonic() < end;
      left = graceLeft(got.result)
    ) {
      await new Promise((r) => setTimeout(r, Math.min(STALE_POLL_MS, left + 5)));
      if (this.repair.completing(jobId)) return 'completing';
      got = await this.claimJob(jobId, token);
    }
    return got;
  }

  /**
   * Releases a claim this runner holds (its handler failed, or its transaction was rolled
   * back). `tainted`: its handler may have applied an effect the next holder repeats (it
   * finished, but its transaction was rolled back): the next claim is then a takeover,
   * reported as a job that may have run twice.
   */
  private async release(claim: HeldClaim, tainted = false): Promise<void> {
    await claim.end();
    try {
      await (tainted
        ? this.store.release(claim.jobId, claim.token, { tainted })
        : this.store.release(claim.jobId, claim.token));
    } catch (err) {
      this.repair.release(
        'release',
        claim.jobId,
        claim.token,
        this.o.leaseMs + this.o.takeoverGraceMs,
        tainted,
      );
      this.report('release', err, claim.jobId);
    }
  }

  // --- The handler and the completion

  /** The handler, in a `jobhook.handler` span (the application's spans stay in the delivery's context), timed. */
  private async handle(
    claim: HeldClaim,
    handler: Handler,
    transaction: StoreTransaction | undefined,
  ): Promise<void> {
    const { telemetry, handlerTimeoutMs } = this.o;
    const started = performance.now();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new HandlerTimeoutError(claim.jobId, handlerTimeoutMs);
        claim.abort(error);
        reject(error);
      }, handlerTimeoutMs);
    });
    let running: Promise<void>;
    try {
      running = Promise.resolve(
        telemetry.phase('jobhook.handler', () => handler(handlerContext(claim, transaction))),
      );
    } catch (err) {
      running = Promise.reject(err);
    }
    // Settling after its deadline: nothing waits for it any more.
    running.catch(() => undefined);
    try {
      await Promise.race([running, deadline]);
    } finally {
      clearTimeout(timer);
      telemetry.handlerDuration?.record((performance.now() - started) / 1000);
    }
  }

  /**
   * The handler resolved after its signal fired (the lease unconfirmed in time, or its
   * deadline): final, it may have stopped part way. Not recorded as processed: reported now
   * as a job that may run twice, its transaction rolled back and its claim released, so the
   * retry runs the job again.
   */
  private async givenUp(claim: HeldClaim, tx: StoreTransaction | undefined): Promise<RunResult> {
    this.o.log.warn(
      `jobhook: job ${claim.jobId}: onEvent resolved after its signal was aborted (the lease could not be confirmed in time): not recorded as processed${tx === undefined ? '' : ', its transaction rolled back'}; a retry runs it again (reported as a job that may have run twice).`,
    );
    this.superseded(
      claim.jobId,
      'its signal was aborted while onEvent ran (the lease could not be confirmed in time), so this run is not recorded as processed: what it did before it stopped runs again with the retry',
    );
    if (tx === undefined) await this.release(claim);
    else await this.rollBackAndRelease(claim, tx);
    return { kind: 'claim_lost', retryAfterMs: this.o.leaseMs };
  }

  private async runPlain(claim: HeldClaim, handler: Handler, retainMs: number): Promise<RunResult> {
    try {
      await this.handle(claim, handler, undefined);
    } catch (err) {
      return this.handlerFailed(claim, err, undefined);
    }
    if (claim.abortedWhileRunning && claim.state !== 'lost') return this.givenUp(claim, undefined);
    claim.finishing();
    return this.completePlain(claim, retainMs);
  }

  private async completePlain(claim: HeldClaim, retainMs: number): Promise<RunResult> {
    const { jobId, token, fence } = claim;
    let reply;
    try {
      reply = completeReply(
        await this.o.telemetry.phase('jobhook.complete', () =>
          this.store.complete(jobId, token, { retainMs, fence }),
        ),
      );
    } catch (err) {
      // Done, but not yet recorded: answer as processed (a 5xx would bring the job back),
      // keep answering duplicate for it here, keep its lease alive, and record it when the
      // store answers.
      this.repair.complete(jobId, token, fence, retainMs, () => void claim.end());
      this.report('complete', err, jobId);
      return { kind: 'processed' };
    }
    await claim.end();
    if (reply === 'superseded') {
      this.superseded(
        jobId,
        'its handler finished here, but another delivery had taken the job over (this holder was cut off, paused, or slower than its lease)',
      );
      return { kind: 'processed', superseded: true };
    }
    return { kind: 'processed' };
  }

  // --- The transactional run: begin, handle, complete inside the transaction, commit

  private async runInTransaction(claim: HeldClaim, handler: Handler, retainMs: number): Promise<RunResult> {
    const tx = await this.begin(claim);
    if (tx === undefined) return { kind: 'store_unavailable' };
    try {
      await this.handle(claim, handler, tx);
    } catch (err) {
      return this.handlerFailed(claim, err, tx);
    }
    if (claim.abortedWhileRunning && claim.state !== 'lost') return this.givenUp(claim, tx);
    return (await this.completeInTransaction(claim, tx, retainMs)) ?? this.commit(claim, tx);
  }

  /**
   * The handler threw (500), or did not settle by its deadline: then the operator is told
   * which job hung, and the claim is released tainted (it may still be applying effects):
   * the retry is reported as a job that may have run twice.
   */
  private async handlerFailed(
    claim: HeldClaim,
    err: unknown,
    tx: StoreTransaction | undefined,
  ): Promise<RunResult> {
    const hung = err instanceof HandlerTimeoutError;
    if (hung) this.o.log.error(`jobhook: ${err.message}`);
    this.report('handler', err, claim.jobId);
    if (tx === undefined) await this.release(claim, hung);
    else await this.rollBackAndRelease(claim, tx, hung);
    return failed(err);
  }

  /**
   * The handler's transaction, or undefined when the store could not begin it (reported,
   * the claim released). Each renewal of the claim keeps it alive: the store ends a
   * transaction left idle for longer than the lease (its holder cut off).
   */
  private async begin(claim: HeldClaim): Promise<StoreTransaction | undefined> {
    try {
      const tx = await (this.store as TransactionalStore).begin(claim.jobId, claim.token, {
        fence: claim.fence,
        leaseMs: this.o.leaseMs,
      });
      if (typeof tx.keepAlive === 'function') claim.onRenewed = () => tx.keepAlive!();
      return tx;
    } catch (err) {
      this.report('claim', err, claim.jobId);
      await this.release(claim);
      return undefined;
    }
  }

  /**
   * Writes the completion inside the transaction, while the claim still holds. Undefined:
   * ready to commit; otherwise the run ends here, rolled back.
   */
  private async completeInTransaction(
    claim: HeldClaim,
    tx: StoreTransaction,
    retainMs: number,
  ): Promise<RunResult | undefined> {
    const { jobId } = claim;
    // No renewal may wait on the row this transaction is about to lock.
    claim.finishing();
    claim.stopRenewing();
    // Whether to commit is decided by the completion statement, not this holder's clock:
    // it matched the claim's token and fencing number and locked the job's row, so no one
    // can take the job over before the COMMIT (a taker waits on the row, then finds it
    // completed); a takeover that happened first makes it answer superseded.
    let reply;
    try {
      reply = await this.o.telemetry.phase('jobhook.complete', () => tx.complete({ retainMs }));
    } catch (err) {
      const fault = handlersFault(err);
      if (fault !== undefined) return this.handlersFailure(claim, fault, tx);
      // onEvent finished, and its transaction is rolled back: what it did outside the
      // transaction happened, and the retry does it again (the release's taint reports it).
      this.report('complete', err, jobId);
      await this.rollBackAndRelease(claim, tx, true);
      return { kind: 'store_unavailable' };
    }
    if (reply === 'superseded') {
      await this.rollback(jobId, tx);
      await claim.end();
      return this.lost(jobId, 'another delivery took the job over');
    }
    return undefined;
  }

  /** The handler's own use of the transaction failed it (refused by the server): rolled back, the claim released, 500. */
  private async handlersFailure(
    claim: HeldClaim,
    fault: { error: Error; tainted: boolean },
    tx: StoreTransaction | undefined,
  ): Promise<RunResult> {
    this.o.log.warn(`jobhook: job ${claim.jobId}: ${fault.error.message}`);
    this.report('handler', fault.error, claim.jobId);
    if (tx === undefined) await this.release(claim, fault.tainted);
    else await this.rollBackAndRelease(claim, tx, fault.tainted);
    return { kind: 'handler_failed' };
  }

  /** Commits the handler's writes with the completion. */
  private async commit(claim: HeldClaim, tx: StoreTransaction): Promise<RunResult> {
    const { jobId } = claim;
    // Not waiting for a renewal in flight: it may be waiting for the row this transaction
    // locked, until the COMMIT (it then finds the job completed by this token).
    claim.stop();
    try {
      await this.o.telemetry.phase('jobhook.commit', () => tx.commit());
    } catch (err) {
      // Refused, not in doubt: nothing was committed.
      const fault = handlersFault(err);
      if (fault !== undefined) return this.handlersFailure(claim, fault, undefined);
      // Committed or not: the store knows. A retry finds the job completed, or the claim
      // (this holder's) running out and taken over after the grace.
      this.report('complete', err, jobId);
      return { kind: 'store_unavailable' };
    }
    return { kind: 'processed' };
  }

  private async rollback(jobId: string, tx: StoreTransaction): Promise<void> {
    try {
      await tx.rollback();
    } catch (err) {
      // The connection is dropped instead: the server rolls the transaction back.
      this.o.log.debug(`jobhook: the rollback of job ${jobId}'s transaction failed`, errorDetails(err));
    }
  }

  private async rollBackAndRelease(claim: HeldClaim, tx: StoreTransaction, tainted = false): Promise<void> {
    await this.rollback(claim.jobId, tx);
    await this.release(claim, tainted);
  }

  /**
   * Rolled back after onEvent finished because another delivery took the job over: nothing
   * written through the transaction survives, but what the handler did outside it (an
   * e-mail, a call to another system) happened, and the taker does it again: reported.
   */
  private lost(jobId: string, why: string): RunResult {
    this.o.log.warn(
      `jobhook: rolled back the transaction of job ${jobId}: ${why}. Nothing written through context.transaction was applied; a retry processes the job.`,
    );
    this.superseded(
      jobId,
      `its transaction was rolled back after onEvent finished (${why}): what the handler did outside context.transaction will run again`,
    );
    return { kind: 'claim_lost', retryAfterMs: this.o.leaseMs };
  }
}

/** `createJobRunner` from `jobhook`. */
export const JOB_RUNNER_OPTIONS = {
  ...TELEMETRY_OPTIONS,
  store: true,
  leaseMs: true,
  takeoverGraceMs: true,
  retainMs: true,
  handlerTimeoutMs: true,
  log: true,
  onError: true,
} as const satisfies OptionNamesOf<JobRunnerOptions>;
