/**
 * Recovers completions whose webhook never came (the receiver was down longer than
 * the gateway retries): polls the jobs recorded as pending, and runs each finished
 * one through the same claim, in the same store, as the webhook path, so each job's
 * handler runs once whichever path delivers it.
 */
import { isGatewayError, PayloadInvalidError } from '../base/errors.js';
import { validateEvent, type JobCompletedEvent, type JsonObjectValue } from '../core/event.js';
import type { IdempotencyStore, PendingJob, PendingStore } from '../jobs/store.js';
import { errorDetails, resolveLogger, type LoggerInput } from '../base/log.js';
import { optionalNumber } from '../base/options.js';
import { checkOptionNames, type OptionNamesOf } from '../base/options.js';
import { eventContext, type PollEventContext } from '../jobs/context.js';
import { fail, TELEMETRY_OPTIONS, type TelemetryOptions } from '../runtime/telemetry.js';
import { runnerFor, type FailureStage, type JobRunner, type JobRunnerOptions } from '../jobs/runner.js';
import type { GatewayClient, JobResource } from './client.js';

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
export function eventFromJob(job: JobResource, userParameters: JsonObjectValue | undefined): JobCompletedEvent {
  const event: Record<string, unknown> = { event: 'async_job_completed', job_id: job.public_id, status: job.status };
  for (const field of ['feature', 'subfeature', 'provider', 'model', 'created_at', 'finished_at', 'original_response'] as const) {
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
  if (typeof store?.listPending !== 'function' || typeof store.forgetPending !== 'function' || typeof store.trackPending !== 'function') {
    throw new TypeError("store must track pending jobs (trackPending, listPending, forgetPending): all of jobhook's stores do");
  }
  return store as TrackingStore;
}

export function createReconcilerCore<Tx>(options: ReconcilerOptions<Tx>): Reconciler {
  checkOptionNames(options, RECONCILER_OPTIONS);
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object with client, store (or runner) and onEvent');
  if (typeof options.client?.getJob !== 'function') throw new TypeError('client must have getJob(id) (createGatewayClient)');
  if (typeof options.onEvent !== 'function') throw new TypeError('onEvent must be a function (event, context) => void | Promise<void>');
  if (options.runner === undefined && options.store === undefined) throw new TypeError("store (or runner) is required: the receivers' store, so a job runs once whichever path delivers it");
  const runner = runnerFor(options as JobRunnerOptions & { runner?: JobRunner });
  const store = pendingStore(runner.options.store);
  const now = options.now ?? runner.options.clock.now;
  const log = options.runner !== undefined && options.log !== undefined ? resolveLogger(options.log) : runner.options.log;
  const graceMs = optionalNumber(options.graceMs, 'graceMs', 5 * 60_000, { min: 0 });
  const intervalMs = optionalNumber(options.intervalMs, 'intervalMs', 60_000);
  const batchSize = optionalNumber(options.batchSize, 'batchSize', 100, { integer: true });
  const concurrency = optionalNumber(options.concurrency, 'concurrency', 4, { integer: true });
  if (typeof store.deferPending !== 'function') {
    log.warn('jobhook: the store has no deferPending(): jobs that stay unfinished are polled first every round, and more of them than batchSize keep the others from being polled.');
  }
  const notFound = new Map<string, number>();

  /** Sends a job that is not done behind the jobs due now: every due job gets its turn. */
  async function defer(p: PendingJob): Promise<void> {
    try {
      await store.deferPending?.(p.jobId, { since: now() - graceMs });
    } catch (err) {
      log.debug(`jobhook: could not move pending job ${p.jobId} back (it is polled first again)`, errorDetails(err));
    }
  }

  /** Polls one pending job; true when it is not done (and should wait its turn again). */
  async function reconcile(p: PendingJob, report: ReconcileReport): Promise<boolean> {
    report.checked++;
    let job: JobResource;
    try {
      job = await options.client.getJob(p.jobId);
    } catch (err) {
      if (isGatewayError(err) && err.code === 'GATEWAY_NOT_FOUND') {
        const times = (notFound.get(p.jobId) ?? 0) + 1;
        if (times < NOT_FOUND_ROUNDS) {
          notFound.set(p.jobId, times);
          report.pending++;
          log.warn(`jobhook: the gateway does not know pending job ${p.jobId} (404, ${times} of ${NOT_FOUND_ROUNDS} rounds before it is forgotten).`);
          return true;
        }
        notFound.delete(p.jobId);
        report.forgotten.push(p.jobId);
        log.warn(`jobhook: the gateway does not know pending job ${p.jobId} (404 in ${NOT_FOUND_ROUNDS} rounds); it is no longer polled.`);
        await store.forgetPending(p.jobId);
        return false;
      }
      notFound.delete(p.jobId);
      report.failed++;
      runner.report('poll', err, p.jobId);
      return true;
    }
    notFound.delete(p.jobId);
    if (job.status !== 'success' && job.status !== 'fail') {
      report.pending++;
      return true;
    }
    let event: JobCompletedEvent;
    try {
      event = eventFromJob(job, p.userParameters);
    } catch (err) {
      report.failed++;
      runner.report('poll', err instanceof PayloadInvalidError ? err : new PayloadInvalidError(String(err)), p.jobId);
      return true;
    }
    const payload = event as unknown as JsonObjectValue;
    const { telemetry } = runner.options;
    const result = await telemetry.within('jobhook.reconcile', 'consumer', undefined, async (span) => {
      span?.setAttribute('jobhook.job_id', p.jobId);
      const r = await runner.run(p.jobId, (claim) => options.onEvent(event, eventContext<Tx, { source: 'poll' }>({ source: 'poll' }, p.jobId, payload, claim)));
      if (r.kind !== 'processed' && r.kind !== 'duplicate') fail(span, undefined, r.kind);
      return r;
    });
    if (result.kind === 'processed') telemetry.recovered?.add(1);
    switch (result.kind) {
      case 'processed':
        report.processed++;
        return false;
      case 'duplicate':
        // Done before (its completion removed it, unless it completed before it was recorded).
        report.duplicates++;
        await store.forgetPending(p.jobId);
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

  let round: Promise<ReconcileReport> | undefined;
  async function runRound(): Promise<ReconcileReport> {
    const report: ReconcileReport = { checked: 0, processed: 0, duplicates: 0, pending: 0, failed: 0, forgotten: [] };
    const due = await store.listPending({ before: now() - graceMs, limit: batchSize });
    let next = 0;
    const worker = async () => {
      while (next < due.length) {
        const p = due[next++]!;
        let again: boolean;
        try {
          again = await reconcile(p, report);
        } catch (err) {
          report.failed++;
          runner.report('poll', err, p.jobId);
          again = true;
        }
        if (again) await defer(p);
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, due.length) }, worker));
    if (report.checked > 0) log.info(`jobhook: reconciled ${report.checked} pending job(s)`, { ...report, forgotten: report.forgotten.length });
    return report;
  }

  let timer: ReturnType<typeof setInterval> | undefined;
  const runOnce = (): Promise<ReconcileReport> => {
    round ??= runRound().finally(() => (round = undefined));
    return round;
  };
  return {
    runOnce,
    start() {
      if (timer !== undefined) return;
      timer = setInterval(() => {
        runOnce().catch((err: unknown) => log.error('jobhook: a reconciliation round failed', errorDetails(err)));
      }, intervalMs);
      timer.unref?.();
    },
    async stop() {
      clearInterval(timer);
      timer = undefined;
      await round?.catch(() => undefined);
      // A shared runner belongs to its maker (they close it); one made here is closed here.
      if (options.runner === undefined) await runner.close();
    },
  };
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
  takeoverGraceMs: true,
  log: true,
  onError: true,
  now: true,
} as const satisfies OptionNamesOf<ReconcilerOptions>;
