import type { KeyObject } from 'node:crypto';
import { signDelivery, type SignedDelivery, type SignOptions } from '../../lib/runtime/sign.js';
import { option, optionError } from '../../lib/base/option-error.js';
import { checkOptionNames, type OptionNamesOf } from '../../lib/base/options.js';

/** A payload to sign: the raw body (string or bytes), or an object written with `JSON.stringify`. */
export type PayloadInput = string | Uint8Array | { readonly [key: string]: unknown };

export type SignPayloadOptions = Pick<
  SignOptions,
  'dialect' | 'signatureHeader' | 'algorithmHeader' | 'webhookHeader'
>;

/** Signs a payload as the gateway does; see `signPayload` in `jobhook/testing`. */
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
  return signDelivery(body, privateKey, {
    dialect: options.dialect,
    signatureHeader: options.signatureHeader,
    algorithmHeader: options.algorithmHeader,
    webhookHeader: options.webhookHeader,
  });
}

/** `signPayload` from `jobhook/testing`. */
export const SIGN_PAYLOAD_OPTIONS = {
  dialect: true,
  signatureHeader: true,
  algorithmHeader: true,
  webhookHeader: true,
} as const satisfies OptionNamesOf<SignPayloadOptions>;
