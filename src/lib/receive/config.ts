/**
 * A receiver's options, resolved once at construction into one frozen record; everything
 * below takes the parts it needs from it, never the user's object.
 */
import type { Logger } from '../base/log.js';
import { checkNumber, optionalNumber } from '../base/options.js';
import { DEFAULT_BODY_TIMEOUT_MS } from '../base/protocol.js';
import type { PublicKeySource } from '../core/verify/key-list.js';
import {
  checkReplayWindow,
  resolveOptions,
  type ResolvedOptions,
  type VerifyOptionsBase,
} from '../core/verify/options.js';
import { logBesideRunner, runnerFor, type JobRunner, type JobRunnerOptions } from '../jobs/runner.js';
import type { Clock } from '../jobs/clock.js';
import type { Telemetry } from '../runtime/telemetry.js';
import {
  resolveWorkers,
  type ResolvedWorkers,
  type WorkerOptions,
} from '../runtime/verify/worker-options.js';
import { stallPeriod, type BodyLimits } from './body.js';
import { resolveAdmission, type AdmissionOptions } from './guard.js';
import type { AdapterName, DeliveryOutcome, ReceiverOptionsBase } from './types.js';

/** What verifying a request takes (the middleware's whole configuration, a receiver's first part). */
export interface VerificationConfig<K = unknown> {
  readonly publicKey: PublicKeySource<K>;
  /** The verifier's options (dialects, headers, limits, replay window, clock). */
  readonly verify: ResolvedOptions;
  readonly body: BodyLimits;
  /** maxInFlightBytes. */
  readonly maxInFlightBytes: number;
  readonly workers: ResolvedWorkers;
  readonly log: Logger;
}

/** A receiver's configuration: verification, the job runner, and how deliveries are answered and told. */
export interface ReceiverConfig<Req = unknown, K = unknown> extends VerificationConfig<K> {
  readonly adapter: AdapterName;
  readonly onEvent: ReceiverOptionsBase<Req>['onEvent'];
  readonly runner: JobRunner;
  /** The runner's, taken once (never read back from the runner per delivery). */
  readonly telemetry: Telemetry;
  readonly clock: Clock;
  readonly retryAfterSeconds: number | undefined;
  /** The replay window, ms. */
  readonly windowMs: number;
  /**
   * How long past max(finished_at, receipt) a completion is kept in the store: the window
   * plus the clock skew tolerated (maxFutureSkewSeconds). Receivers whose clocks differ by
   * up to that skew see one event at ages that far apart: a replay another receiver still
   * takes inside its window must still find the completion.
   */
  readonly markMs: number;
  readonly onDelivery: ((outcome: DeliveryOutcome) => void) | undefined;
  /** `close()` closes the runner's store too. */
  readonly closeStores: boolean;
}

/** The options every verifying handler takes. */
export type VerificationOptions<K> = VerifyOptionsBase &
  AdmissionOptions &
  WorkerOptions & { publicKey: PublicKeySource<K>; bodyTimeoutMs?: number };

/** Checks the options of request verification (TypeError for mistakes) and resolves them once. */
export function resolveVerification<K>(options: VerificationOptions<K>, log: Logger): VerificationConfig<K> {
  if (typeof options !== 'object' || options === null)
    throw new TypeError('options must be an object with a publicKey');
  const verify = resolveOptions(options);
  const timeoutMs = optionalNumber(options.bodyTimeoutMs, 'bodyTimeoutMs', DEFAULT_BODY_TIMEOUT_MS);
  const body = Object.freeze({
    maxBodyBytes: verify.maxBodyBytes,
    timeoutMs,
    stallMs: stallPeriod(timeoutMs),
  });
  return Object.freeze({
    publicKey: options.publicKey,
    verify,
    body,
    maxInFlightBytes: resolveAdmission(options, verify.maxBodyBytes),
    workers: resolveWorkers(options),
    log,
  });
}

/** Checks a receiver's options (TypeError for mistakes), takes or builds its job runner, and resolves everything once. */
export function resolveReceiverConfig<Req, K, Tx>(
  options: ReceiverOptionsBase<Req, Tx> & VerificationOptions<K>,
  adapter: AdapterName,
): ReceiverConfig<Req, K> {
  if (typeof options !== 'object' || options === null)
    throw new TypeError('options must be an object with publicKey and onEvent');
  if (typeof options.onEvent !== 'function')
    throw new TypeError('onEvent must be a function (event, context) => void | Promise<void>');
  const runner = runnerFor(options as JobRunnerOptions & { runner?: JobRunner });
  const verification = resolveVerification(options, logBesideRunner(options, runner));
  checkReplayWindow(verification.verify.maxAgeSeconds, runner.options.retainMs);
  if (options.runner !== undefined) checkSharedRetention(verification.verify, runner.options.retainMs);
  return Object.freeze({
    ...verification,
    adapter,
    onEvent: options.onEvent as ReceiverOptionsBase<Req>['onEvent'],
    runner,
    telemetry: runner.options.telemetry,
    clock: runner.options.clock,
    retryAfterSeconds:
      options.retryAfterSeconds === undefined
        ? undefined
        : checkNumber(options.retryAfterSeconds, 'retryAfterSeconds', { integer: true }),
    windowMs: (verification.verify.maxAgeSeconds ?? 0) * 1000,
    markMs: ((verification.verify.maxAgeSeconds ?? 0) + verification.verify.maxFutureSkewSeconds) * 1000,
    onDelivery: checkHook(options.onDelivery),
    closeStores: checkFlag(options.closeStores, 'closeStores'),
  });
}

/**
 * The runner's `retainMs` is how long the other paths sharing it (the reconciler, queue
 * workers, a direct `run()`) keep a completion past the later of `finished_at` and the
 * completion: shorter than this receiver's window plus the skew it tolerates, a replay
 * this receiver still accepts would find the job done by them forgotten and run it again.
 */
function checkSharedRetention(verify: ResolvedOptions, retainMs: number): void {
  const keepSeconds = (verify.maxAgeSeconds ?? 0) + verify.maxFutureSkewSeconds;
  if (retainMs < keepSeconds * 1000)
    throw new TypeError(
      `the job runner keeps completions ${retainMs / 1000} s (retainMs), less than this receiver's replay window plus the clock skew it tolerates (maxAgeSeconds ${String(verify.maxAgeSeconds)} + maxFutureSkewSeconds ${verify.maxFutureSkewSeconds} = ${keepSeconds} s): a job completed by the reconciler or a queue worker on this runner could be run again by a replay this receiver still accepts. Give the runner retainMs of at least ${keepSeconds * 1000}, or shorten maxAgeSeconds or maxFutureSkewSeconds`,
    );
}

function checkFlag(value: unknown, what: string): boolean {
  if (value !== undefined && typeof value !== 'boolean') throw new TypeError(`${what} must be true or false`);
  return value === true;
}

function checkHook(hook: unknown): ((outcome: DeliveryOutcome) => void) | undefined {
  if (hook !== undefined && typeof hook !== 'function')
    throw new TypeError('onDelivery must be a function (outcome) => void');
  return hook as ((outcome: DeliveryOutcome) => void) | undefined;
}
