import { createPrivateKey, sign as rsaSign, type KeyObject } from 'node:crypto';
import type { DialectName } from '../core/canonical/dialects.js';
import { canonicalizeText } from '../core/canonical/index.js';
import { DEFAULT_HEADER_NAMES, HEADER_NAME_OPTIONS, type HeaderNameOptions } from '../core/verify/options.js';
import { sha256Hex } from './crypto/node.js';
import { option, optionError } from '../base/option-error.js';
import type { OptionNamesOf } from '../base/options.js';

/** How to sign; the header names (all of them) for a vendor prefix. */
export interface SignOptions extends HeaderNameOptions {
  /** Dialect the signature covers (default `orjson`, as the gateway). */
  dialect?: DialectName;
  /** The sender id in `User-Agent` (default `jobhook-sign`). */
  userAgent?: string;
}

/** A delivery as the gateway sends it: the headers and the raw body. */
export interface SignedDelivery {
  headers: Record<string, string>;
  body: string;
}

/** The RSA private key object, or an OptionError naming `privateKey`. */
export function importPrivateKey(privateKey: string | KeyObject): KeyObject {
  let key: KeyObject;
  try {
    key = typeof privateKey === 'string' ? createPrivateKey(privateKey) : privateKey;
  } catch (cause) {
    const err = optionError`${option('privateKey')} is not a private key (expected a PEM such as BEGIN PRIVATE KEY)`;
    err.cause = cause;
    throw err;
  }
  if (key.type !== 'private' || key.asymmetricKeyType !== 'rsa')
    throw optionError`${option('privateKey')} must be an RSA private key`;
  return key;
}

/**
 * Signs a body the way the gateway does (canonical JSON → SHA-256 hex → RSA
 * PKCS#1 v1.5/SHA-256 over the hex), for tests and local tooling.
 */
export function signDelivery(
  body: string | Uint8Array,
  privateKey: string | KeyObject,
  options: SignOptions = {},
): SignedDelivery {
  const key = importPrivateKey(privateKey);
  const canonical = canonicalizeText(body, { dialect: options.dialect ?? 'orjson' });
  const signature = rsaSign('sha256', Buffer.from(sha256Hex(canonical), 'latin1'), key).toString('hex');
  const name = (header: keyof HeaderNameOptions) => options[header] ?? DEFAULT_HEADER_NAMES[header];
  return {
    headers: {
      'Content-Type': 'application/json',
      'User-Agent': options.userAgent ?? 'jobhook-sign',
      [name('webhookHeader')]: 'true',
      [name('signatureHeader')]: signature,
      [name('algorithmHeader')]: 'SHA256',
    },
    body: typeof body === 'string' ? body : new TextDecoder().decode(body),
  };
}

/** `signDelivery` from `jobhook`. */
export const SIGN_OPTIONS = {
  dialect: true,
  ...HEADER_NAME_OPTIONS,
  userAgent: true,
} as const satisfies OptionNamesOf<SignOptions>;
