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
  // The options' names are checked above: they are signDelivery's, bar its userAgent.
  return signDelivery(body, privateKeyOption(privateKey), options);
}

/** `signPayload` from `jobhook/testing`. */
export const SIGN_PAYLOAD_OPTIONS = {
  dialect: true,
  ...HEADER_NAME_OPTIONS,
} as const satisfies OptionNamesOf<SignPayloadOptions>;
