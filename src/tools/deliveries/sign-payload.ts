import type { KeyObject } from 'node:crypto';
import { signDelivery, type SignedDelivery } from '../../index.js';
import { privateKeyOption } from './keys.js';
import {
  HEADER_NAME_OPTIONS,
  option,
  optionError,
  checkOptionNames,
  type OptionNamesOf,
  type SignOptions,
} from '../../lib/entries/tools-door.js';

/** A payload to sign: the raw body (string or bytes), or an object written with `JSON.stringify`. */
export type PayloadInput = string | Uint8Array | { readonly [key: string]: unknown };

/** How `signPayload` signs: the dialect and the header names (`signatureHeader`, …), as `signDelivery`. */
export type SignPayloadOptions = Omit<SignOptions, 'userAgent'>;

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
export function signPayload(
  payload: PayloadInput,
  privateKey: string | KeyObject,
  options: SignPayloadOptions = {},
): SignedDelivery {
  checkOptionNames(options, SIGN_PAYLOAD_OPTIONS);
  let body: string | Uint8Array;
  if (typeof payload === 'string' || payload instanceof Uint8Array) body = payload;
  else if (typeof payload === 'object' && payload !== null && !Array.isArray(payload))
    body = JSON.stringify(payload);
  else throw optionError`${option('payload')} must be a string, bytes or an object`;
  // The options' names are checked above: they are signDelivery's, bar its userAgent.
  return signDelivery(body, privateKeyOption(privateKey), options);
}

/** `signPayload` from `jobhook/testing`. */
export const SIGN_PAYLOAD_OPTIONS = {
  dialect: true,
  ...HEADER_NAME_OPTIONS,
} as const satisfies OptionNamesOf<SignPayloadOptions>;
