/**
 * jobhook: verify and receive the RSA-signed `async_job_completed` webhooks of an AI
 * gateway. This entry holds the Node verifier, the framework-agnostic receiver, the
 * canonical-JSON engine, and every error, store and type shared by the other entries.
 * @packageDocumentation
 */
import type { KeyObject } from 'node:crypto';
import {
  SIGN_OPTIONS,
  signDelivery as signDeliveryCore,
  type SignOptions,
  type SignedDelivery,
} from './lib/runtime/sign.js';
import type { VerifiedDelivery } from './lib/core/verify/core.js';
import type { HeadersInput } from './lib/core/verify/headers.js';
import {
  createSyncVerifier,
  VERIFIER_OPTIONS,
  type Verifier,
  type VerifierOptions,
} from './lib/runtime/verify/node-verifier.js';
import { checkOptionNames } from './lib/base/options.js';

export * from './lib/entries/neutral-api.js';

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
 * await verifier.ready(); // optional: the fast canonical engine, before a loop of verifications
 * try {
 *   const { event, jobId, dialect } = verifier.verify(rawBody, req.headers);
 *   if (event.status === 'success') console.log(jobId, event.output);
 * } catch (err) {
 *   if (isWebhookError(err)) console.warn(err.code, err.message);
 *   else throw err;
 * }
 * ```
 * @throws TypeError for a key that is not RSA, is private, or has a modulus under 2048 bits, for an
 * async key function (`verify` is synchronous: use a receiver or `jobhook/web`), and for bad options.
 */
export function createVerifier(options: VerifierOptions): Verifier {
  checkOptionNames(options, VERIFIER_OPTIONS);
  return createSyncVerifier(options);
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
export function verifyWebhook(
  body: string | Uint8Array,
  headers: HeadersInput,
  options: VerifierOptions,
): VerifiedDelivery {
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
export function signDelivery(
  body: string | Uint8Array,
  privateKey: string | KeyObject,
  options?: SignOptions,
): SignedDelivery {
  checkOptionNames(options, SIGN_OPTIONS);
  return signDeliveryCore(body, privateKey, options);
}
export { createAgnosticReceiver as createReceiver } from './lib/adapters/agnostic.js';
