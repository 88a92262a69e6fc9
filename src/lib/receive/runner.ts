/**
 * Runs a job's handler at most once across deliveries, instances and reconciliation:
 * claim the job id, keep the lease alive while the handler runs, then record the
 * completion (durably) or release the claim. Knows nothing about HTTP.
 */
import { StoreUnavailableError } from '../errors.js';
import { checkGraceMs, newToken, type ClaimResult, type IdempotencyStore } from '../idempotency/types.js';
import { errorDetails, type Logger } from '../log.js';
import { DEFAULT_TAKEOVER_GRACE_MS } from '../protocol.js';
import { repairQueueFor } from './repair.js';

/** Where a failure happened, for `onError` and the log. */
export type FailureStage = 'body' | 'claim' | 'handler' | 'renew' | 'complete' | 'release' | 'poll';

/** What running a job came to. */
export type RunResult =
  | { kind: 'processed' }
  /** Completed before (or being recorded by this instance): the handler was not called. */
  | { kind: 'duplicate' }
  /** Another delivery holds the job. */
  | { kind: 'in_progress'; retryAfterMs: number | undefined }
  | { kind: 'handler_failed' }
  | { kind: 'store_unavailable' };

export interface RunnerOptions {
  store: IdempotencyStore;
  leaseMs: number;
  /** See `ClaimOptions.takeoverGraceMs`: a delivery that finds a lapsed lease waits it out here, asking again, before answering in_progress. */
  takeoverGraceMs: number;
  retainMs: number;
  log: Logger;
  onError: ((error: unknown, context: { jobId?: string; stage: FailureStage }) => void) | undefined;
  now?: () => number;
}

export interface JobRunner {
  /** Claims `jobId` and runs `handler` once it is held; `signal` aborts when the claim is lost. */
  run(jobId: string, handler: (signal: AbortSignal) => void | Promise<void>): Promise<RunResult>;
  /** Reports a failure to the log and `onError` (never throws). */
  report(stage: FailureStage, error: unknown, jobId?: string): void;
  /** Finishes the store operations still waiting (graceful shutdown). */
  close(timeoutMs?: number): Promise<void>;
  /** Store operations waiting to be retried. */
  readonly pending: number;
}

/** How often a delivery waiting out a takeover grace asks the store again. */
const STALE_POLL_MS = 250;
/** How soon a lease renewal that failed is tried again (the store may be back). */
const RENEW_RETRY_MS = 250;

/** The time left of a takeover grace, when `claim` found another holder's lease over. */
function graceLeft(claim: ClaimResult | undefined): number | undefined {
  return claim?.status === 'in_progress' && claim.stale === true ? (claim.retryAfterMs ?? 0) : undefined;
}

/** The takeover grace option (receivers and the reconciler): whole ms, 0 allowed. */
export function takeoverGrace(value: unknown): number {
  return checkGraceMs(value, DEFAULT_TAKEOVER_GRACE_MS);
}

export function createJobRunner(o: RunnerOptions): JobRunner {
  const now = o.now ?? Date.now;
  const repair = repairQueueFor({ store: o.store });
  const owner = { log: o.log, now };
  const renew = o.store.renew?.bind(o.store);

  const report = (stage: FailureStage, error: unknown, jobId?: string): void => {
    const what =
      stage === 'handler' ? 'the handler failed' : stage === 'body' ? 'the request body could not be read' : stage === 'poll' ? 'polling the gateway failed' : `the idempotency store failed to ${stage}`;
    o.log.error(`jobhook: ${what}${jobId === undefined ? '' : ` for job ${jobId}`}`, errorDetails(error));
    try {
      o.onError?.(error, { ...(jobId === undefined ? {} : { jobId }), stage });
    } catch (err) {
      o.log.error('jobhook: onError threw', errorDetails(err));
    }
  };

  interface Heartbeat {
    signal: AbortSignal;
    /** The handler is done: keep the lease until the completion is stored, quietly. */
    finishing(): void;
    /** Stops renewing; resolves once no renewal is in flight (so none lands after a release). */
    stop(): Promise<void>;
  }

  /**
   * Renews the lease every third of it while the handler runs and its completion is
   * pending; after a failed renewal, every RENEW_RETRY_MS, so that once the store answers
   * again the lease is back well within another delivery's takeover grace.
   */
  function heartbeat(jobId: string, token: string): Heartbeat {
    const controller = new AbortController();
    if (renew === undefined) return { signal: controller.signal, finishing: () => undefined, stop: async () => undefined };
    const every = Math.max(1, Math.floor(o.leaseMs / 3));
    let inFlight: Promise<void> | undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let finishing = false;
    let stopped = false;
    let failures = 0;
    const beat = async (): Promise<boolean> => {
      try {
        const held = await renew(jobId, token, { leaseMs: o.leaseMs });
        failures = 0;
        if (held || controller.signal.aborted || stopped) return true;
        // Once the handler is done a refused renewal may mean the completion landed
        // although its reply was lost; the pending completion finds out and tells.
        if (finishing) return false;
        o.log.error(`jobhook: lost the claim on job ${jobId} while its handler runs (another delivery took it over): it may run twice.`);
        controller.abort(new StoreUnavailableError(`The claim on job ${jobId} was lost.`));
        return false;
      } catch (err) {
        // The first failure in a row is reported; the rest repeat it while the store is down.
        if (failures++ === 0 && !finishing) report('renew', err, jobId);
        return true;
      }
    };
    const next = (ms: number): void => {
      if (stopped) return;
      timer = setTimeout(() => {
        inFlight = beat().then((again) => {
          inFlight = undefined;
          if (again) next(failures > 0 ? Math.min(every, RENEW_RETRY_MS) : every);
        });
      }, ms);
      timer.unref?.();
    };
    next(every);
    return {
      signal: controller.signal,
      finishing: () => void (finishing = true),
      stop: async () => {
        stopped = true;
        clearTimeout(timer);
        await inFlight;
      },
    };
  }

  async function run(jobId: string, handler: (signal: AbortSignal) => void | Promise<void>): Promise<RunResult> {
    if (repair.completing(jobId)) return { kind: 'duplicate' };
    // Reusing the token of an unconfirmed claim acquires the job if that claim was written.
    const token = repair.takeUnconfirmed(jobId) ?? newToken();
    const claimOnce = async (): Promise<ClaimResult | undefined> => {
      try {
        const result = await o.store.claim(jobId, { leaseMs: o.leaseMs, token, takeoverGraceMs: o.takeoverGraceMs });
        repair.kick();
        return result;
      } catch (err) {
        // The claim may have been written although no reply came (or may still land):
        // undo it by token once the store answers, or the job stays blocked for a lease.
        repair.release(jobId, token, now() + o.leaseMs + o.takeoverGraceMs, true, owner);
        report('claim', err, jobId);
        return undefined;
      }
    };
    let claim = await claimOnce();
    // The holder's lease ran out, but it may be alive and only cut off from the store,
    // with a completion to record now that the store answers: this delivery waits (open)
    // through the grace, asking again every STALE_POLL_MS, then takes the job over.
    const end = Date.now() + o.takeoverGraceMs + STALE_POLL_MS;
    for (let left = graceLeft(claim); left !== undefined && left <= o.takeoverGraceMs && Date.now() < end; left = graceLeft(claim)) {
      await new Promise((r) => setTimeout(r, Math.min(STALE_POLL_MS, left + 5)));
      if (repair.completing(jobId)) return { kind: 'duplicate' };
      claim = await claimOnce();
    }
    if (claim === undefined) return { kind: 'store_unavailable' };
    if (claim.status === 'completed') return { kind: 'duplicate' };
    if (claim.status === 'in_progress') return { kind: 'in_progress', retryAfterMs: claim.retryAfterMs };

    const beat = heartbeat(jobId, token);
    try {
      await handler(beat.signal);
    } catch (err) {
      await beat.stop();
      report('handler', err, jobId);
      try {
        await o.store.release(jobId, token);
      } catch (releaseError) {
        repair.release(jobId, token, now() + o.leaseMs + o.takeoverGraceMs, false, owner);
        report('release', releaseError, jobId);
      }
      return { kind: 'handler_failed' };
    }
    beat.finishing();
    try {
      const done = await o.store.complete(jobId, token, { retainMs: o.retainMs });
      await beat.stop();
      if (!done) {
        o.log.warn(`jobhook: job ${jobId} was taken over by another delivery before it completed here (a handler slower than its lease while renewals failed?): it may run twice.`);
      }
    } catch (err) {
      // Done, but not yet recorded: answer as processed (a 5xx would bring the job back),
      // keep answering duplicate for it here, keep its lease alive, and record it when
      // the store answers.
      repair.complete(jobId, token, o.retainMs, owner, () => void beat.stop());
      report('complete', err, jobId);
    }
    return { kind: 'processed' };
  }

  return {
    run,
    report,
    close: (timeoutMs = 10_000) => repair.drain(timeoutMs, o.log),
    get pending() {
      return repair.size;
    },
  };
}
