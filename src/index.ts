/**
 * jobhook: verify and receive the RSA-signed `async_job_completed` webhooks of an AI
 * gateway. This entry holds the Node verifier, the framework-agnostic receiver, the
 * canonical-JSON engine, and every error, store and type shared by the other entries.
 * @packageDocumentation
 */
import type { KeyObject } from 'node:crypto';
import { createAgnosticReceiver, type ReceiverOptions, type ReceiverRequest } from './lib/adapters/agnostic.js';
import type { ReceiverControls } from './lib/adapters/controls.js';
import { canonicalizeBytes, canonicalizeText, parseJsonValue, type CanonicalizeOptions, type ParseJsonOptions } from './lib/canonical/index.js';
import type { JsonValue } from './lib/canonical/to-value.js';
import type { ReceiverAnswer } from './lib/receive/answers.js';
import { signDelivery as signDeliveryCore, type SignOptions, type SignedDelivery } from './lib/sign.js';
import type { VerifiedDelivery } from './lib/verify/core.js';
import type { HeadersInput } from './lib/verify/headers.js';
import { createNodeVerifier, type Verifier, type VerifierOptions } from './lib/verify/node-verifier.js';
import { createGatewayClientCore, type GatewayClient, type GatewayClientOptions } from './lib/gateway/client.js';
import { createReconcilerCore, type Reconciler, type ReconcilerOptions } from './lib/gateway/reconciler.js';

export { DIALECTS, type DialectName } from './lib/canonical/dialects.js';
export type { IntegerMode, JsonValue } from './lib/canonical/to-value.js';
export type { CanonicalizeOptions, ParseJsonOptions } from './lib/canonical/index.js';
export * from './lib/errors.js';
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
  STATUS_BY_CODE,
} from './lib/protocol.js';
export type { Verifier, VerifierOptions } from './lib/verify/node-verifier.js';
export type { VerifiedDelivery } from './lib/verify/core.js';
export type { VerifyOptionsBase } from './lib/verify/options.js';
export type { HeadersInput } from './lib/verify/headers.js';
export type { NodePublicKeyInput } from './lib/crypto/node.js';
export type { RsaPublicJwk } from './lib/crypto/keys.js';
export type { JobCompletedEvent, JobEventBase, JobFailedEvent, JobSucceededEvent, JsonObjectValue } from './lib/event.js';
export type { ReceiverOptions, ReceiverRequest } from './lib/adapters/agnostic.js';
export type { ReceiverControls } from './lib/adapters/controls.js';
export type { ReceiverAnswer, ReceiverErrorCode } from './lib/receive/answers.js';
export type { EventContext, EventContextBase, FailureStage, PollEventContext, ReceiverOptionsBase, WebhookEventContext } from './lib/receive/core.js';
export type { Logger, LoggerInput } from './lib/log.js';
export { MemoryIdempotencyStore, type MemoryStoreOptions } from './lib/idempotency/memory.js';
export type { ClaimOptions, ClaimResult, CompleteOptions, IdempotencyStore, ListPendingOptions, PendingJob, RenewOptions, TrackPendingOptions } from './lib/idempotency/types.js';
export type { CreateJobRequest, GatewayClient, GatewayClientOptions, JobResource } from './lib/gateway/client.js';
export type { ReconcileReport, Reconciler, ReconcilerOptions } from './lib/gateway/reconciler.js';
export type { SignOptions, SignedDelivery } from './lib/sign.js';

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
 * Imports the gateway's public key(s) once and returns a verifier whose
 * `verify(body, headers)` is synchronous (node:crypto). Pass the raw body bytes.
 * (`createVerifier` from `jobhook/web` is the same on WebCrypto, asynchronous.)
 *
 * @example
 * ```ts
 * import { createVerifier, isWebhookError } from 'jobhook';
 *
 * const verifier = createVerifier({ publicKey: process.env.GATEWAY_PUBLIC_KEY! });
 * try {
 *   const { event, jobId, dialect } = verifier.verify(rawBody, req.headers);
 *   if (event.status === 'success') console.log(jobId, event.output);
 * } catch (err) {
 *   if (isWebhookError(err)) console.warn(err.code, err.message);
 *   else throw err;
 * }
 * ```
 * @throws TypeError for a key that is not RSA, is private, or has a modulus under 2048 bits, and for bad options.
 */
export function createVerifier(options: VerifierOptions): Verifier {
  const { verify } = createNodeVerifier(options);
  return { verify };
}

/**
 * The complete receiver for any framework: give it the raw body and the headers, get
 * the answer to send. It verifies, claims the `job_id` in the idempotency store,
 * runs `onEvent` once (renewing the claim while it runs), records the completion, and
 * answers 200 (processed or duplicate), 503 + Retry-After while the same job is in
 * progress or the store is unreachable, 500 when the handler throws (the claim is
 * released so the gateway's retry processes it), 4xx for deliveries that are not the
 * gateway's or cannot be processed. Content-Encoding gzip, deflate and br are decoded.
 * (`jobhook/express` and `jobhook/web` have the same receiver for their frameworks.)
 *
 * @example
 * ```ts
 * // Fastify: keep the raw body, hand it over, send the answer.
 * import Fastify from 'fastify';
 * import { createReceiver } from 'jobhook';
 *
 * const receive = createReceiver({ publicKey: process.env.GATEWAY_PUBLIC_KEY!, onEvent: async (event) => save(event) });
 * const app = Fastify();
 * app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
 * app.post('/webhooks/gateway', async (req, reply) => {
 *   const answer = await receive({ body: req.body as Buffer, headers: req.headers });
 *   return reply.code(answer.status).headers(answer.headers).send(answer.body);
 * });
 * ```
 */
export function createReceiver(options: ReceiverOptions): ((request: ReceiverRequest) => Promise<ReceiverAnswer>) & ReceiverControls {
  return createAgnosticReceiver(options);
}

const verifiers = new WeakMap<VerifierOptions, Verifier>();

/**
 * One-shot verification. Keys are imported once per options object (kept in a
 * WeakMap), so pass the same options object on every call, or use {@link createVerifier}.
 *
 * @example
 * ```ts
 * const options = { publicKey: pem };
 * const { event } = verifyWebhook(rawBody, headers, options);
 * ```
 */
export function verifyWebhook(body: string | Uint8Array, headers: HeadersInput, options: VerifierOptions): VerifiedDelivery {
  let verifier = verifiers.get(options);
  if (verifier === undefined) {
    verifier = createVerifier(options);
    verifiers.set(options, verifier);
  }
  return verifier.verify(body, headers);
}

/**
 * Signs a body as the gateway does, for tests and local tools (never needed to receive).
 *
 * @example
 * ```ts
 * const { headers, body } = signDelivery(JSON.stringify(payload), testPrivateKeyPem);
 * await fetch('http://127.0.0.1:3000/webhooks', { method: 'POST', headers, body });
 * ```
 */
export function signDelivery(body: string | Uint8Array, privateKey: string | KeyObject, options?: SignOptions): SignedDelivery {
  return signDeliveryCore(body, privateKey, options);
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
export function createReconciler(options: ReconcilerOptions): Reconciler {
  return createReconcilerCore(options);
}
