/**
 * What the `jobhook` entry exports that runs in any runtime: the canonical-JSON engine,
 * the job runner and memory store, the base error, constants and the receivers' types.
 * The Node entry adds the node:crypto verifier and receiver; the neutral build (what edge
 * bundlers pick) adds stubs that point to `jobhook/web`. Every error class is in
 * `jobhook/errors`, the gateway client and reconciler in `jobhook/gateway`, the store
 * contract in `jobhook/store`.
 */
import {
  canonicalizeBytes,
  canonicalizeText,
  parseJsonValue,
  type CanonicalizeOptions,
  type ParseJsonOptions,
} from '../core/canonical/index.js';
import type { JsonValue } from '../core/canonical/to-value.js';
import {
  createJobRunner as createJobRunnerCore,
  type JobRunner,
  type JobRunnerOptions,
} from '../jobs/runner.js';

export { DIALECTS, type DialectName } from '../core/canonical/dialects.js';
export type { JsonValue } from '../core/canonical/to-value.js';
export {
  isWebhookError,
  STATUS_BY_CODE,
  WebhookError,
  type AnyWebhookError,
  type WebhookErrorCode,
} from '../base/errors.js';
export {
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
export type { JobCompletedEvent, JobFailedEvent, JobSucceededEvent, JsonObjectValue } from '../core/event.js';
export type { AgnosticReceiver, ReceiverOptions, ReceiverRequest } from '../adapters/agnostic.js';
export type { ReceiverControls, ReceiverHealth } from '../adapters/controls.js';
export type { ReceiverAnswer } from '../receive/answers.js';
export type {
  DeliveryOutcome,
  EventContext,
  FailureStage,
  ReceiverOptionsBase,
  WebhookEventContext,
} from '../receive/types.js';
export type { EventContextBase, PollEventContext } from '../jobs/context.js';
export type { TelemetryOptions } from '../runtime/telemetry.js';
export type { Logger, LoggerInput } from '../base/log.js';
export { MemoryIdempotencyStore } from '../jobs/memory-store.js';
export type { IdempotencyStore, TransactionalStore } from '../jobs/store.js';
export type { JobRunner, JobRunnerOptions, RunResult } from '../jobs/runner.js';
export type { SignedDelivery } from '../runtime/sign.js';

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
 * The job runner that receivers and the reconciler share: the idempotency store, the
 * lease policy (lease, takeover grace, retention), the clock and the queue of store
 * repairs, resolved once. Each job's handler runs at most once at a time; a job that may
 * have run twice (a takeover of a lapsed lease, a completion that found the job taken
 * over) is reported to the log and `onError` (stage `superseded`). Receivers and the
 * reconciler make their own from their options when not given one.
 *
 * @example
 * ```ts
 * import { createJobRunner } from 'jobhook';
 * import { createReceiver } from 'jobhook/express';
 * import { createReconciler } from 'jobhook/gateway';
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
