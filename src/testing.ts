/**
 * jobhook test tooling: TEST-ONLY keys and signed payloads, to test a webhook
 * receiver without the real gateway. Node only.
 * @packageDocumentation
 */
import type { KeyObject } from 'node:crypto';
import type { SignedDelivery } from './lib/sign.js';
import { generateTestKeys as generateTestKeysCore, type TestKeyOptions, type TestKeyPair } from './lib/testing/keys.js';
import { signPayload as signPayloadCore, type PayloadInput, type SignPayloadOptions } from './lib/testing/sign-payload.js';

export type { TestKeyOptions, TestKeyPair } from './lib/testing/keys.js';
export type { PayloadInput, SignPayloadOptions } from './lib/testing/sign-payload.js';
export type { SignedDelivery } from './lib/sign.js';
export { OptionError, type OptionMention } from './lib/testing/option-error.js';

/**
 * Generates a **TEST-ONLY** RSA key pair as PEM strings (`privateKey` PKCS#8,
 * `publicKey` SPKI), 2048 bits by default (`bits`: 2048, 3072 or 4096). For tests of
 * a receiver only: the keys are made on the spot and never protected.
 *
 * @example
 * ```ts
 * import { generateTestKeys, signPayload } from 'jobhook/testing';
 * import { createVerifier } from 'jobhook';
 *
 * const keys = generateTestKeys();
 * const verifier = createVerifier({ publicKey: keys.publicKey });
 * const { body, headers } = signPayload('{"event":"async_job_completed","job_id":"j-1","status":"success","output":{"confidence":1.0}}', keys.privateKey);
 * verifier.verify(body, headers);
 * ```
 * @throws OptionError (a TypeError) for an unsupported `bits`.
 */
export function generateTestKeys(options?: TestKeyOptions): TestKeyPair {
  return generateTestKeysCore(options);
}

/**
 * Signs a payload as the gateway does and returns `{ body, headers }`, ready for
 * `fetch(url, { method: 'POST', body, headers })` or supertest's `.set(headers).send(body)`.
 * `dialect` (default `orjson`) picks the canonical form the signature covers;
 * `signatureHeader`, `algorithmHeader` and `webhookHeader` rename the headers.
 *
 * The payload is the raw body (a string or bytes, sent as it is), or an object,
 * written with `JSON.stringify`. JavaScript numbers have no `1.0`: `JSON.stringify`
 * writes `{ confidence: 1.0 }` as `{"confidence":1}`. To test what the gateway
 * really sends (floats such as `1.0` and `0.0`), pass the body as a string.
 *
 * @example
 * ```ts
 * import { generateTestKeys, signPayload } from 'jobhook/testing';
 * import request from 'supertest';
 *
 * const { privateKey, publicKey } = generateTestKeys(); // give publicKey to the receiver under test
 * const { body, headers } = signPayload(
 *   '{"event":"async_job_completed","job_id":"job-1","status":"success","output":{"confidence":1.0}}',
 *   privateKey,
 * );
 * await request(app).post('/webhooks/gateway').set(headers).send(body).expect(200);
 * ```
 * @throws OptionError (a TypeError) when `privateKey` is not an RSA private key.
 * @throws BodyMalformedError when the payload is not strict JSON.
 */
export function signPayload(payload: PayloadInput, privateKey: string | KeyObject, options?: SignPayloadOptions): SignedDelivery {
  return signPayloadCore(payload, privateKey, options);
}
