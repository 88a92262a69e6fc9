import { createPrivateKey, sign as rsaSign, type KeyObject } from 'node:crypto';
import type { DialectName } from '../core/canonical/dialects.js';
import { canonicalizeText } from '../core/canonical/index.js';
import { DEFAULT_ALGORITHM_HEADER, DEFAULT_SIGNATURE_HEADER } from '../base/protocol.js';
import { sha256Hex } from './crypto/node.js';
import { option, optionError } from '../base/option-error.js';
import type { OptionNamesOf } from '../base/options.js';

/** The gateway's marker header, renamed with the same vendor prefix as the others. */
export const DEFAULT_WEBHOOK_HEADER = 'X-Service-Webhook';

export interface SignOptions {
  /** Dialect the signature covers (default `orjson`, as the gateway). */
  dialect?: DialectName;
  signatureHeader?: string;
  algorithmHeader?: string;
  /** Name of the `X-Service-Webhook: true` header (default `X-Service-Webhook`). */
  webhookHeader?: string;
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
  return {
    headers: {
      'Content-Type': 'application/json',
      'User-Agent': options.userAgent ?? 'jobhook-sign',
      [options.webhookHeader ?? DEFAULT_WEBHOOK_HEADER]: 'true',
      [options.signatureHeader ?? DEFAULT_SIGNATURE_HEADER]: signature,
      [options.algorithmHeader ?? DEFAULT_ALGORITHM_HEADER]: 'SHA256',
    },
    body: typeof body === 'string' ? body : new TextDecoder().decode(body),
  };
}

/** `signDelivery` from `jobhook`. */
export const SIGN_OPTIONS = {
  dialect: true,
  signatureHeader: true,
  algorithmHeader: true,
  webhookHeader: true,
  userAgent: true,
} as const satisfies OptionNamesOf<SignOptions>;
