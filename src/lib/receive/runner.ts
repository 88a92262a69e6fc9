/**
 * Runs a job's handler at most once across deliveries, instances and reconciliation:
 * claim the job id, keep the lease alive while the handler runs, then record the
 * completion (durably) or release the claim. Knows nothing about HTTP.
 */
import { StoreUnavailableError } from '../errors.js';
import { newToken, type IdempotencyStore } from '../idempotency/types.js';
import { errorDetails, type Logger } from '../log.js';
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

  /** Renews the lease every third of it while the handler runs and its completion is pending. */
  function heartbeat(jobId: string, token: string): Heartbeat {
    const controller = new AbortController();
    if (renew === undefined) return { signal: controller.signal, finishing: () => undefined, stop: async () => undefined };
    let inFlight: Promise<void> | undefined;
    let finishing = false;
    let stopped = false;
    let failures = 0;
    const beat = async (): Promise<void> => {
      try {
        const held = await renew(jobId, token, { leaseMs: o.leaseMs });
        failures = 0;
        if (held || controller.signal.aborted || stopped) return;
        // Once the handler is done a refused renewal may mean the completion landed
        // although its reply was lost; the pending completion finds out and tells.
        if (finishing) return void clearInterval(timer);
        o.log.error(`jobhook: lost the claim on job ${jobId} while its handler runs (another delivery took it over): it may run twice.`);
        controller.abort(new StoreUnavailableError(`The claim on job ${jobId} was lost.`));
      } catch (err) {
        // The first failure in a row is reported; the rest repeat it while the store is down.
        if (failures++ === 0 && !finishing) report('renew', err, jobId);
      }
    };
    const timer = setInterval(() => {
      if (inFlight !== undefined || stopped) return;
      inFlight = beat().finally(() => (inFlight = undefined));
    }, Math.max(1, Math.floor(o.leaseMs / 3)));
    timer.unref?.();
    return {
      signal: controller.signal,
      finishing: () => void (finishing = true),
      stop: async () => {
        stopped = true;
        clearInterval(timer);
        await inFlight;
      },
    };
  }

  async function run(jobId: string, handler: (signal: AbortSignal) => void | Promise<void>): Promise<RunResult> {
    if (repair.completing(jobId)) return { kind: 'duplicate' };
    // Reusing the token of an unconfirmed claim acquires the job if that claim was written.
    const token = repair.takeUnconfirmed(jobId) ?? newToken();
    let claim;
    try {
      claim = await o.store.claim(jobId, { leaseMs: o.leaseMs, token });
    } catch (err) {
      // The claim may have been written although no reply came (or may still land):
      // undo it by token once the store answers, or the job stays blocked for a lease.
      repair.release(jobId, token, now() + o.leaseMs, true, owner);
      report('claim', err, jobId);
      return { kind: 'store_unavailable' };
    }
    repair.kick();
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
        repair.release(jobId, token, now() + o.leaseMs, false, owner);
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
