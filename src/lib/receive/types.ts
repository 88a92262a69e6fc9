/**
 * What the receivers take and tell: their options, the handler's context for a webhook
 * delivery, and the outcome of each delivery.
 */
import type { JobCompletedEvent } from '../core/event.js';
import type { DialectName } from '../core/canonical/dialects.js';
import type { OptionNamesOf } from '../base/options.js';
import type { EventContextBase, PollEventContext } from '../jobs/context.js';
import type { IdempotencyStore, TransactionalStore } from '../jobs/store.js';
import {
  JOB_RUNNER_OPTIONS,
  type FailureStage,
  type JobRunner,
  type JobRunnerOptions,
} from '../jobs/runner.js';
import { ADMISSION_OPTIONS, type AdmissionOptions } from './guard.js';

/** A handler call for a verified webhook delivery. */
export interface WebhookEventContext<Req = unknown, Tx = unknown> extends EventContextBase<Tx> {
  source: 'webhook';
  /** The dialect whose canonical bytes the signature covers. */
  dialect: DialectName;
  /** Index of the key that verified. */
  keyIndex: number;
  /** Lowercase hex SHA-256 of the canonical bytes. */
  canonicalSha256: string;
  /** The framework's request object (Express `req`, Fetch `Request`, your `{ body, headers }`). */
  request: Req;
}

/** Either kind of handler call: share one handler between receivers and the reconciler. */
export type EventContext<Req = unknown, Tx = unknown> = WebhookEventContext<Req, Tx> | PollEventContext<Tx>;

/** Where a failure happened, as `onError` hears it. */
export type { FailureStage };

/** Options of every receiver, besides the verifier's. */
export interface ReceiverOptionsBase<Req, Tx = unknown> extends JobRunnerOptions, AdmissionOptions {
  /**
   * Called once per job id, after the signature is verified and the job claimed. Throw to
   * have the gateway retry. With a transactional store, write through `context.transaction`.
   */
  onEvent: (event: JobCompletedEvent, context: WebhookEventContext<Req, Tx>) => void | Promise<void>;
  /** Idempotency store shared by the receiver's instances (default: a `MemoryIdempotencyStore` of this receiver). */
  store?: TransactionalStore<Tx> | IdempotencyStore;
  /**
   * A job runner shared with other receivers and the reconciler (`createJobRunner`): its
   * store, lease, grace, retention, clock and repair queue serve them all. Give either
   * `runner` or those options (`store`, `leaseMs`, `takeoverGraceMs`, `retainMs`, `onError`).
   */
  runner?: JobRunner;
  /** `Retry-After` (seconds) on 503 while the same job is in progress (default: time left on the lease, 1–30 s). */
  retryAfterSeconds?: number;
  /** A body still arriving after this long is answered 408 (default 30 s, the sender's own attempt timeout). */
  bodyTimeoutMs?: number;
  /**
   * Hears every delivery's outcome once, as it is answered (for metrics without
   * OpenTelemetry): `{ status, outcome, code?, jobId?, dialect?, durationMs, bodyBytes }`.
   * A hook that throws is ignored, as a throwing logger is.
   */
  onDelivery?: (outcome: DeliveryOutcome) => void;
  /**
   * `receiver.close()` also closes the idempotency store (its `close()`: a Redis client, a
   * PostgreSQL pool the store made), once the operations still waiting are done, so the
   * process can exit on SIGTERM. Default false: a store you share with other receivers or
   * the reconciler stays open. With a shared `runner`, its store is the one closed.
   */
  closeStores?: boolean;
}

/** How a delivery ended: what `onDelivery` hears and `jobhook.deliveries` counts (its `outcome` attribute). */
export type DeliveryOutcomeKind = 'processed' | 'duplicate' | 'refused' | 'failed' | 'busy' | 'unavailable';

/** One delivery's outcome. */
export interface DeliveryOutcome {
  /** The HTTP status answered. */
  status: number;
  /** processed, duplicate (200); refused (4xx: not the gateway's, or never processable); failed (500); busy (503: in progress elsewhere, or the receiver's workers are full); unavailable (503: the store). */
  outcome: DeliveryOutcomeKind;
  /** The error code answered, for every outcome but processed and duplicate. */
  code?: string;
  /** Once verified. */
  jobId?: string;
  dialect?: DialectName;
  /** From the start of the request to the answer. */
  durationMs: number;
  /** Body bytes this receiver read (0 when it was refused on its headers). */
  bodyBytes: number;
}

/** The receivers' names in telemetry (`adapter` attribute). */
export type AdapterName = 'express' | 'middleware' | 'fetch' | 'agnostic';

/** The names of {@link ReceiverOptionsBase}. */
export const RECEIVER_OPTIONS = {
  ...JOB_RUNNER_OPTIONS,
  ...ADMISSION_OPTIONS,
  onEvent: true,
  runner: true,
  retryAfterSeconds: true,
  bodyTimeoutMs: true,
  onDelivery: true,
  closeStores: true,
} as const satisfies OptionNamesOf<ReceiverOptionsBase<unknown>>;
