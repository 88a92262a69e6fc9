import type { JobRunner, RunnerHealth } from '../jobs/runner.js';
import type { AdmissionState } from '../receive/guard.js';
import type { Verification } from '../receive/verification.js';

/** What `receiver.health()` finds, for a readiness probe. */
export interface ReceiverHealth extends RunnerHealth {
  /** Large verifications on worker threads now, and waiting for one (Node receivers; 0 elsewhere). */
  workers: { busy: number; queued: number };
  /**
   * The bodies being received and verified: bytes held of maxInFlightBytes, requests,
   * under how many signatures, the most one signature holds, the deliveries refused
   * RECEIVER_BUSY so far (the budget full; one signature's share full: a captured
   * signature replayed), and `busy`: one was refused within the last 10 s. `ok` does not
   * follow it: a receiver refusing replays still takes genuine deliveries.
   */
  admission: AdmissionState;
}

/** What every receiver offers besides handling requests. */
export interface ReceiverControls {
  /**
   * Finishes the store operations still waiting (a completion or a release the store
   * did not take while it was down), for a graceful shutdown: `await receiver.close()`
   * after the server stopped accepting requests. Their wait ends after `timeoutMs`
   * (default 10 s) at the latest. Made with `closeStores: true`, it then closes the store
   * (its connections, once), so the process can exit.
   */
  close(timeoutMs?: number): Promise<void>;
  /** Store operations waiting to be retried in the background. */
  readonly pending: number;
  /**
   * For a readiness probe: whether the store answers (its `ping()`, within `timeoutMs`,
   * default 1 s), the repair queue, the verification workers. `ok` is the store's answer.
   *
   * @example
   * ```ts
   * // The status only: the store's error (its address) is for the log, not for whoever asks.
   * app.get('/readyz', async (_req, res) => void res.sendStatus((await receiver.health()).ok ? 200 : 503));
   * ```
   */
  health(timeoutMs?: number): Promise<ReceiverHealth>;
}

/** `fn` with the controls of a receiver (its job runner and its verification workers) attached. */
export function withControls<F extends object>(
  fn: F,
  receiver: {
    readonly config: {
      readonly runner: Pick<JobRunner, 'close' | 'pending' | 'health' | 'options'>;
      readonly closeStores: boolean;
    };
    readonly verification: Pick<Verification, 'close' | 'workers' | 'guard'>;
    /** The setup alarms: their counts since the last summary line are written at close. */
    readonly diagnosis: { readonly alerts: { close(): void } };
  },
): F & ReceiverControls {
  const { runner, closeStores } = receiver.config;
  let storeClosed: Promise<void> | undefined;
  const close = async (timeoutMs?: number) => {
    await runner.close(timeoutMs);
    await receiver.verification.close();
    receiver.diagnosis.alerts.close();
    if (closeStores) await (storeClosed ??= Promise.resolve(runner.options.store.close?.()));
  };
  const health = async (timeoutMs?: number): Promise<ReceiverHealth> => ({
    ...(await runner.health(timeoutMs)),
    workers: receiver.verification.workers(),
    admission: receiver.verification.guard.state(),
  });
  return Object.defineProperties(fn, {
    close: { value: close, enumerable: true },
    pending: { get: () => runner.pending, enumerable: true },
    health: { value: health, enumerable: true },
  }) as F & ReceiverControls;
}
