/**
 * Everything of the `jobhook` entry that runs in any runtime: the canonical-JSON
 * engine, errors, the memory store, the gateway client and reconciler, constants and
 * types. The Node entry adds the node:crypto verifier and receiver; the neutral build
 * (what edge bundlers pick) adds stubs that point to `jobhook/web`.
 */
import { canonicalizeBytes, canonicalizeText, parseJsonValue, type CanonicalizeOptions, type ParseJsonOptions } from '../core/canonical/index.js';
import type { JsonValue } from '../core/canonical/to-value.js';
import { createGatewayClientCore, type GatewayClient, type GatewayClientOptions } from '../gateway/client.js';
import { createReconcilerCore, type Reconciler, type ReconcilerOptions } from '../gateway/reconciler.js';
import { createJobRunner as createJobRunnerCore, type JobRunner, type JobRunnerOptions } from '../jobs/runner.js';

export { DIALECTS, type DialectName } from '../core/canonical/dialects.js';
export type { IntegerMode, JsonValue } from '../core/canonical/to-value.js';
export type { CanonicalizeOptions, ParseJsonOptions } from '../core/canonical/index.js';
export * from '../base/errors.js';
export {
  JOBS_PATH,
  DEFAULT_ALGORITHM_HEADER,
  DEFAULT_BODY_TIMEOUT_MS,
  DEFAULT_CANONICAL_EXPANSION,
  DEFAULT_LEASE_MS,
  DEFAULT_MAX_AGE_SECONDS,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_RETAIN_MS,
  DEFAULT_SIGNATURE_HEADER,
  MAX_JOB_ID_LENGTH,
} from '../base/protocol.js';
export type { Verifier, VerifierOptions } from '../runtime/verify/node-verifier.js';
export type { VerifiedDelivery } from '../core/verify/core.js';
export type { VerifyOptionsBase } from '../core/verify/options.js';
export type { HeadersInput } from '../core/verify/headers.js';
export type { NodePublicKeyInput } from '../runtime/crypto/node.js';
export type { RsaPublicJwk } from '../core/crypto/keys.js';
export type { JobCompletedEvent, JobEventBase, JobFailedEvent, JobSucceededEvent, JsonObjectValue } from '../core/event.js';
export type { ReceiverOptions, ReceiverRequest } from '../adapters/agnostic.js';
export type { ReceiverControls, ReceiverHealth } from '../adapters/controls.js';
export type { ReceiverAnswer, ReceiverErrorCode } from '../receive/answers.js';
export type { AdapterName, DeliveryOutcome, DeliveryOutcomeKind, EventContext, FailureStage, ReceiverOptionsBase, WebhookEventContext } from '../receive/types.js';
export type { EventContextBase, PollEventContext } from '../jobs/context.js';
export type { Attributes, MeterLike, MeterProviderLike, SpanLike, TelemetryOptions, TracerLike, TracerProviderLike } from '../runtime/telemetry.js';
export type { Logger, LoggerInput } from '../base/log.js';
export { MemoryIdempotencyStore, type MemoryStoreOptions } from '../jobs/memory-store.js';
export type {
  ClaimOptions,
  ClaimResult,
  CompleteOptions,
  CompleteReply,
  DeferPendingOptions,
  IdempotencyStore,
  ListPendingOptions,
  PendingJob,
  RenewOptions,
  RenewReply,
  StoreTransaction,
  TrackPendingOptions,
  TransactionalStore,
  TransactionOf,
} from '../jobs/store.js';
export type { ClaimContext, ErrorListener, JobRunner, JobRunnerOptions, ResolvedRunnerOptions, RunnerHealth, RunOptions, RunResult } from '../jobs/runner.js';
export type { CreateJobRequest, GatewayClient, GatewayClientOptions, JobResource } from '../gateway/client.js';
export type { ReconcileReport, Reconciler, ReconcilerOptions } from '../gateway/reconciler.js';
export type { SignOptions, SignedDelivery } from '../runtime/sign.js';


/**
 * Rebuilds the canonical text the gateway signed from a raw body: sorted keys,
 * 2-space indent, floats and escapes exactly as the dialect's serializer writes them.
 *
 * @example
 * ```ts
 * import { canonicalize } from 'jobhook';
 * canonicalize('{"b":1.0,"a":[1e16]}');
 * // '{\n  "a": [\n    1e+16\n  ],\n  "b": 1.0\n}'
 * canonicalize(rawBytes, { dialect: 'python' });
 * ```
 * @throws BodyMalformedError when the body is not strict JSON (the error has the byte offset).
 * @throws CanonicalUnrepresentableError when the dialect cannot write the payload.
 */
export function canonicalize(body: string | Uint8Array, options?: CanonicalizeOptions): string {
  return canonicalizeText(body, options);
}

/**
 * Same as {@link canonicalize}, as UTF-8 bytes (what is hashed).
 *
 * @example
 * ```ts
 * const bytes = canonicalizeToBytes(rawBody, { dialect: 'orjson' });
 * ```
 */
export function canonicalizeToBytes(body: string | Uint8Array, options?: CanonicalizeOptions): Uint8Array {
  return canonicalizeBytes(body, options);
}

/**
 * Strict RFC 8259 parse to plain JS values, rejecting what `JSON.parse` lets
 * through (duplicate keys, invalid UTF-8, excessive nesting), with an exact
 * option for large integers.
 *
 * @example
 * ```ts
 * parseJson('{"n": 18446744073709551615}', { integers: 'bigint' });
 * // { n: 18446744073709551615n }
 * ```
 */
export function parseJson(body: string | Uint8Array, options?: ParseJsonOptions): JsonValue {
  return parseJsonValue(body, options);
}

/**
 * A client of the gateway's async-job API. With a `store`, every job it creates is
 * recorded as pending, so {@link createReconciler} can recover its completion if the
 * webhook never arrives. Errors are `GatewayError`s with a `code` and the HTTP `status`.
 *
 * @example
 * ```ts
 * import { createGatewayClient } from 'jobhook';
 *
 * const gateway = createGatewayClient({ baseUrl: 'https://api.gateway.example', token: process.env.GATEWAY_TOKEN!, store });
 * const job = await gateway.createJob({
 *   model: 'ocr/ocr_async/amazon',
 *   input: { file_url: 'https://example.com/invoice.pdf' },
 *   webhook_receiver: 'https://app.example.com/webhooks/gateway',
 *   user_webhook_parameters: { order: 'A-17' },
 * });
 * const later = await gateway.getJob(job.public_id); // status: processing | success | fail
 * ```
 */
export function createGatewayClient(options: GatewayClientOptions): GatewayClient {
  return createGatewayClientCore(options);
}

/**
 * Recovers completions the webhook path missed: polls the jobs recorded as pending for
 * longer than `graceMs` and runs each finished one through the same claim, in the same
 * store, as the receivers, so each job's handler runs once whichever path wins.
 * `runOnce()` does one round; `start()` runs one every `intervalMs`.
 *
 * @example
 * ```ts
 * import { createReconciler } from 'jobhook';
 *
 * const reconciler = createReconciler({ client: gateway, store, onEvent: handle }); // handle: (event, context) => …
 * reconciler.start();
 * process.on('SIGTERM', () => void reconciler.stop());
 * ```
 */
export function createReconciler<Tx = unknown>(options: ReconcilerOptions<Tx>): Reconciler {
  return createReconcilerCore(options);
}

/**
 * The job runner that receivers and the reconciler share: the idempotency store, the
 * lease policy (lease, takeover grace, retention), the clock and the queue of store
 * repairs, resolved once. Each job's handler runs at most once at a time; a job that may
 * have run twice (a takeover of a lapsed lease, a completion that found the job taken
 * over) is reported to the log and `onError` (stage `superseded`). Receivers and the
 * reconciler make their own from their options when not given one.
 *
 * @example
 * ```ts
 * import { createJobRunner, createReconciler } from 'jobhook';
 * import { createReceiver } from 'jobhook/express';
 * import { PostgresIdempotencyStore } from 'jobhook/postgres';
 *
 * const store = new PostgresIdempotencyStore({ connectionString: process.env.DATABASE_URL!, transactional: true });
 * await store.migrate();
 * const runner = createJobRunner({ store, onError: (err, { stage }) => metrics.count(stage) });
 * app.post('/webhooks/gateway', createReceiver({ publicKey, runner, onEvent: handle }));
 * createReconciler({ client: gateway, runner, onEvent: handle }).start();
 * process.on('SIGTERM', () => void runner.close());
 * ```
 */
export function createJobRunner(options?: JobRunnerOptions): JobRunner {
  return createJobRunnerCore(options);
}
