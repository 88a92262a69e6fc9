/**
 * Recovers completions whose webhook never came (the receiver was down longer than
 * the gateway retries): polls the jobs recorded as pending, and runs each finished
 * one through the same claim, in the same store, as the webhook path, so each job's
 * handler runs once whichever path delivers it.
 */
import { isGatewayError, PayloadInvalidError } from '../base/errors.js';
import { parseRfc3339, validateEvent, type JobCompletedEvent, type JsonObjectValue } from '../core/event.js';
import type { IdempotencyStore, PendingJob, PendingStore } from '../jobs/store.js';
import { errorDetails, type Logger, type LoggerInput } from '../base/log.js';
import { optionalNumber } from '../base/options.js';
import { checkOptionNames, type OptionNamesOf } from '../base/options.js';
import { eventContext, type PollEventContext } from '../jobs/context.js';
import { fail, TELEMETRY_OPTIONS, type Telemetry, type TelemetryOptions } from '../runtime/telemetry.js';
import {
  logBesideRunner,
  retentionMs,
  runnerFor,
  type FailureStage,
  type JobRunner,
  type JobRunnerOptions,
  type RunResult,
} from '../jobs/runner.js';
import type { GatewayClient, JobResource } from './client.js';
import { DEFAULT_MAX_AGE_SECONDS, DEFAULT_MAX_FUTURE_SKEW_SECONDS } from '../base/protocol.js';

export interface ReconcilerOptions<Tx = unknown> extends TelemetryOptions {
  /** Reads job resources (`createGatewayClient(...)`, or anything with `getJob`). */
  client: Pick<GatewayClient, 'getJob'>;
  /**
   * The receivers' job runner (`createJobRunner`), shared: the same claim, store, clock and
   * repair queue, so a job runs once whichever path wins. Or give `store` (and the lease
   * options) and the reconciler makes its own runner on it.
   */
  runner?: JobRunner;
  /** The receivers' store: the claim is shared, so a job runs once whichever path wins. */
  store?: IdempotencyStore;
  /** The handler for completions found by polling (`context.source === 'poll'`). */
  onEvent: (event: JobCompletedEvent, context: PollEventContext<Tx>) => void | Promise<void>;
  /** Only jobs pending for longer than this are polled (default 5 min: the webhook had its chance, retries included). */
  graceMs?: number;
  /** Between rounds of `start()` (default 60 s). */
  intervalMs?: number;
  /** Jobs polled per round (default 100). */
  batchSize?: number;
  /** Jobs polled at once (default 4). */
  concurrency?: number;
  /** As the receivers' (defaults 5 s and 24 h). */
  leaseMs?: number;
  retainMs?: number;
  /**
   * The receivers' replay window and the clock skew they tolerate (defaults as theirs:
   * 86,400 s and 300 s): a completion found by polling is kept at least their sum past the
   * later of its `finished_at` and the completion, as the receivers keep theirs, so a
   * delivery of the job any receiver still accepts finds it done.
   */
  maxAgeSeconds?: number;
  maxFutureSkewSeconds?: number;
  /** As the receivers' (default 2 s): a poll finding another holder's lease over waits this long before taking the job. */
  takeoverGraceMs?: number;
  /** As the receivers' `log` and `onError`. */
  log?: LoggerInput;
  onError?: (error: unknown, context: { jobId?: string; stage: FailureStage }) => void;
  /** Clock of the pending records, epoch ms (default: the runner's). */
  now?: () => number;
}

/** What one round found. */
export interface ReconcileReport {
  /** Pending jobs polled. */
  checked: number;
  /** Finished jobs whose handler ran in this round. */
  processed: number;
  /** Already processed (by a webhook, or another round): recorded as done, handler not called. */
  duplicates: number;
  /**
   * Still processing at the gateway, held by another delivery, or not found for the
   * first or second time: polled again in a later round, after the other due jobs.
   */
  pending: number;
  /** The handler or the gateway failed: polled again in a later round, after the other due jobs. */
  failed: number;
  /** Unknown to the gateway (404 in three rounds in a row): reported and no longer polled. */
  forgotten: string[];
}

export interface Reconciler {
  /** One round: polls the pending jobs older than `graceMs`. A round already running is joined, not doubled. */
  runOnce(): Promise<ReconcileReport>;
  /** Runs a round every `intervalMs` (the timer does not keep the process alive). */
  start(): void;
  /** Stops the timer and waits for the round in progress, and for store operations still waiting. */
  stop(): Promise<void>;
}

/** The `async_job_completed` event a finished job's resource stands for. */
export function eventFromJob(
  job: JobResource,
  userParameters: JsonObjectValue | undefined,
): JobCompletedEvent {
  const event: Record<string, unknown> = {
    event: 'async_job_completed',
    job_id: job.public_id,
    status: job.status,
  };
  for (const field of [
    'feature',
    'subfeature',
    'provider',
    'model',
    'created_at',
    'finished_at',
    'original_response',
  ] as const) {
    if (job[field] !== undefined) event[field] = job[field];
  }
  if (job.status === 'success') event.output = job.output;
  else event.error = job.error;
  if (userParameters !== undefined) event.user_parameters = userParameters;
  return validateEvent(event as JsonObjectValue);
}

/** 404s in a row, over rounds, before a pending job is forgotten (a job just created may not be visible everywhere yet). */
const NOT_FOUND_ROUNDS = 3;

type TrackingStore = Omit<PendingStore, 'deferPending'> & Pick<IdempotencyStore, 'deferPending'>;

function pendingStore(store: IdempotencyStore): TrackingStore {
  if (
    typeof store?.listPending !== 'function' ||
    typeof store.forgetPending !== 'function' ||
    typeof store.trackPending !== 'function'
  ) {
    throw new TypeError(
      "store must track pending jobs (trackPending, listPending, forgetPending): all of jobhook's stores do",
    );
  }
  return store as TrackingStore;
}

/** The reconciler's options, checked and resolved once at construction. */
interface ReconcilerSettings<Tx> {
  readonly client: Pick<GatewayClient, 'getJob'>;
  readonly onEvent: ReconcilerOptions<Tx>['onEvent'];
  readonly runner: JobRunner;
  /** The runner was made here (from the reconciler's own options): `stop()` closes it. */
  readonly ownsRunner: boolean;
  readonly store: TrackingStore;
  /** The runner's, taken once. */
  readonly telemetry: Telemetry;
  readonly now: () => number;
  readonly log: Logger;
  readonly graceMs: number;
  readonly intervalMs: number;
  readonly batchSize: number;
  readonly concurrency: number;
  /** The receivers' window plus skew, ms: how long past max(finished_at, completion) a completion is kept. */
  readonly markMs: number;
}

/** Checks the options (TypeError for mistakes), takes or makes the runner, and resolves the rest into a frozen record. */
function resolveReconciler<Tx>(options: ReconcilerOptions<Tx>): ReconcilerSettings<Tx> {
  checkOptionNames(options, RECONCILER_OPTIONS);
  if (typeof options !== 'object' || options === null)
    throw new TypeError('options must be an object with client, store (or runner) and onEvent');
  if (typeof options.client?.getJob !== 'function')
    throw new TypeError('client must have getJob(id) (createGatewayClient)');
  if (typeof options.onEvent !== 'function')
    throw new TypeError('onEvent must be a function (event, context) => void | Promise<void>');
  if (options.runner === undefined && options.store === undefined)
    throw new TypeError(
      "store (or runner) is required: the receivers' store, so a job runs once whichever path delivers it",
    );
  const runner = runnerFor(options as JobRunnerOptions & { runner?: JobRunner });
  return Object.freeze({
    client: options.client,
    onEvent: options.onEvent,
    runner,
    ownsRunner: options.runner === undefined,
    store: pendingStore(runner.options.store),
    telemetry: runner.options.telemetry,
    now: options.now ?? runner.options.clock.now,
    log: logBesideRunner(options, runner),
    graceMs: optionalNumber(options.graceMs, 'graceMs', 5 * 60_000, { min: 0 }),
    intervalMs: optionalNumber(options.intervalMs, 'intervalMs', 60_000),
    batchSize: optionalNumber(options.batchSize, 'batchSize', 100, { integer: true }),
    concurrency: optionalNumber(options.concurrency, 'concurrency', 4, { integer: true }),
    markMs:
      (optionalNumber(options.maxAgeSeconds, 'maxAgeSeconds', DEFAULT_MAX_AGE_SECONDS, { min: 0 }) +
        optionalNumber(
          options.maxFutureSkewSeconds,
          'maxFutureSkewSeconds',
          DEFAULT_MAX_FUTURE_SKEW_SECONDS,
          {
            min: 0,
          },
        )) *
      1000,
  });
}

/**
 * Recovers completions the webhook path missed: polls the jobs recorded as pending for
 * longer than `graceMs` and runs each finished one through the same claim, in the same
 * store, as the receivers, so each job's handler runs once whichever path wins.
 * `runOnce()` does one round; `start()` runs one every `intervalMs`.
 *
 * @example
 * ```ts
 * import { createReconciler } from 'jobhook/gateway';
 *
 * const reconciler = createReconciler({ client: gateway, store, onEvent: handle }); // handle: (event, context) => …
 * reconciler.start();
 * process.on('SIGTERM', () => void reconciler.stop());
 * ```
 */
export function createReconcilerCore<Tx>(options: ReconcilerOptions<Tx>): Reconciler {
  const settings = resolveReconciler(options);
  if (typeof settings.store.deferPending !== 'function') {
    settings.log.warn(
      'jobhook: the store has no deferPending(): jobs that stay unfinished are polled first every round, and more of them than batchSize keep the others from being polled.',
    );
  }
  const reconciler = new ReconcilerCore(settings);
  // Each method usable on its own (`process.on('SIGTERM', reconciler.stop)`).
  return {
    runOnce: () => reconciler.runOnce(),
    start: () => reconciler.start(),
    stop: () => reconciler.stop(),
  };
}

/** The rounds of one reconciler: the jobs due, polled a few at a time, each run through the runner once finished. */
class ReconcilerCore<Tx> {
  /** 404s in a row of each job, over rounds. */
  private readonly notFound = new Map<string, number>();
  private round: Promise<ReconcileReport> | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly s: ReconcilerSettings<Tx>) {}

  runOnce(): Promise<ReconcileReport> {
    this.round ??= this.runRound().finally(() => (this.round = undefined));
    return this.round;
  }

  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => {
      this.runOnce().catch((err: unknown) =>
        this.s.log.error('jobhook: a reconciliation round failed', errorDetails(err)),
      );
    }, this.s.intervalMs);
    this.timer.unref?.();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.round?.catch(() => undefined);
    // A shared runner belongs to its maker (they close it); one made here is closed here.
    if (this.s.ownsRunner) await this.s.runner.close();
  }

  private async runRound(): Promise<ReconcileReport> {
    const { store, now, graceMs, batchSize, concurrency, log } = this.s;
    const report: ReconcileReport = {
      checked: 0,
      processed: 0,
      duplicates: 0,
      pending: 0,
      failed: 0,
      forgotten: [],
    };
    const due = await store.listPending({ before: now() - graceMs, limit: batchSize });
    let next = 0;
    const worker = async () => {
      while (next < due.length) await this.poll(due[next++]!, report);
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, due.length) }, worker));
    if (report.checked > 0)
      log.info(`jobhook: reconciled ${report.checked} pending job(s)`, {
        ...report,
        forgotten: report.forgotten.length,
      });
    return report;
  }

  /** Polls one pending job, and sends it behind the jobs due now when it is not done. */
  private async poll(p: PendingJob, report: ReconcileReport): Promise<void> {
    let again: boolean;
    try {
      again = await this.reconcile(p, report);
    } catch (err) {
      report.failed++;
      this.s.runner.report('poll', err, p.jobId);
      again = true;
    }
    if (again) await this.defer(p);
  }

  /** Sends a job that is not done behind the jobs due now: every due job gets its turn. */
  private async defer(p: PendingJob): Promise<void> {
    try {
      await this.s.store.deferPending?.(p.jobId, { since: this.s.now() - this.s.graceMs });
    } catch (err) {
      this.s.log.debug(
        `jobhook: could not move pending job ${p.jobId} back (it is polled first again)`,
        errorDetails(err),
      );
    }
  }

  /** Polls one pending job; true when it is not done (and should wait its turn again). */
  private async reconcile(p: PendingJob, report: ReconcileReport): Promise<boolean> {
    report.checked++;
    let job: JobResource;
    try {
      job = await this.s.client.getJob(p.jobId);
    } catch (err) {
      return this.getJobFailed(p, report, err);
    }
    this.notFound.delete(p.jobId);
    if (job.status !== 'success' && job.status !== 'fail') {
      report.pending++;
      return true;
    }
    let event: JobCompletedEvent;
    try {
      event = eventFromJob(job, p.userParameters);
    } catch (err) {
      report.failed++;
      this.s.runner.report(
        'poll',
        err instanceof PayloadInvalidError ? err : new PayloadInvalidError(String(err)),
        p.jobId,
      );
      return true;
    }
    return this.tally(p, await this.runJob(p, event), report);
  }

  /** The gateway did not give the job: polled again, or forgotten after NOT_FOUND_ROUNDS 404s in a row. */
  private async getJobFailed(p: PendingJob, report: ReconcileReport, err: unknown): Promise<boolean> {
    const { log } = this.s;
    if (isGatewayError(err) && err.code === 'GATEWAY_NOT_FOUND') {
      const times = (this.notFound.get(p.jobId) ?? 0) + 1;
      if (times < NOT_FOUND_ROUNDS) {
        this.notFound.set(p.jobId, times);
        report.pending++;
        log.warn(
          `jobhook: the gateway does not know pending job ${p.jobId} (404, ${times} of ${NOT_FOUND_ROUNDS} rounds before it is forgotten).`,
        );
        return true;
      }
      this.notFound.delete(p.jobId);
      report.forgotten.push(p.jobId);
      log.warn(
        `jobhook: the gateway does not know pending job ${p.jobId} (404 in ${NOT_FOUND_ROUNDS} rounds); it is no longer polled.`,
      );
      await this.s.store.forgetPending(p.jobId);
      return false;
    }
    this.notFound.delete(p.jobId);
    report.failed++;
    this.s.runner.report('poll', err, p.jobId);
    return true;
  }

  /** Runs a finished job's event through the runner, in a `jobhook.reconcile` span. */
  private async runJob(p: PendingJob, event: JobCompletedEvent): Promise<RunResult> {
    const { runner, onEvent, telemetry } = this.s;
    const payload = event as unknown as JsonObjectValue;
    const result = await telemetry.within('jobhook.reconcile', 'consumer', undefined, async (span) => {
      span?.setAttribute('jobhook.job_id', p.jobId);
      const r = await runner.run(
        p.jobId,
        (claim) =>
          onEvent(event, eventContext<Tx, { source: 'poll' }>({ source: 'poll' }, p.jobId, payload, claim)),
        this.retention(event),
      );
      if (r.kind !== 'processed' && r.kind !== 'duplicate') fail(span, undefined, r.kind);
      return r;
    });
    if (result.kind === 'processed') telemetry.recovered?.add(1);
    return result;
  }

  /** How long the completion is kept: as a receiver keeps it (its window plus skew past max(finished_at, completion)). */
  private retention(event: JobCompletedEvent): { retainMs: number; finishedAt?: number } {
    const finishedAt = parseRfc3339(event.finished_at);
    const retainMs = retentionMs(this.s.markMs, this.s.runner.options.clock.now(), finishedAt);
    return finishedAt === undefined ? { retainMs } : { retainMs, finishedAt };
  }

  /** Counts what running the job came to; true when it is not done. */
  private async tally(p: PendingJob, result: RunResult, report: ReconcileReport): Promise<boolean> {
    switch (result.kind) {
      case 'processed':
        report.processed++;
        return false;
      case 'duplicate':
        // Done before (its completion removed it, unless it completed before it was recorded).
        report.duplicates++;
        await this.s.store.forgetPending(p.jobId);
        return false;
      case 'in_progress':
      case 'claim_lost':
        report.pending++;
        return true;
      default:
        report.failed++;
        return true;
    }
  }
}

/** The names of {@link ReconcilerOptions}. */
export const RECONCILER_OPTIONS = {
  ...TELEMETRY_OPTIONS,
  client: true,
  runner: true,
  store: true,
  onEvent: true,
  graceMs: true,
  intervalMs: true,
  batchSize: true,
  concurrency: true,
  leaseMs: true,
  retainMs: true,
  maxAgeSeconds: true,
  maxFutureSkewSeconds: true,
  takeoverGraceMs: true,
  log: true,
  onError: true,
  now: true,
} as const satisfies OptionNamesOf<ReconcilerOptions>;
