import { createPrivateKey, sign as rsaSign, type KeyObject } from 'node:crypto';
import type { DialectName } from './canonical/dialects.js';
import { canonicalizeText } from './canonical/index.js';
import { DEFAULT_ALGORITHM_HEADER, DEFAULT_SIGNATURE_HEADER } from './protocol.js';
import { sha256Hex } from './crypto/node.js';

export interface SignOptions {
  /** Dialect the signature covers (default `orjson`, as the gateway). */
  dialect?: DialectName;
  signatureHeader?: string;
  algorithmHeader?: string;
}

/** A delivery as the gateway sends it: the headers and the raw body. */
export interface SignedDelivery {
  headers: Record<string, string>;
  body: string;
}

/**
 * Signs a body the way the gateway does (canonical JSON → SHA-256 hex → RSA
 * PKCS#1 v1.5/SHA-256 over the hex), for tests and local tooling.
 */
export function signDelivery(body: string | Uint8Array, privateKey: string | KeyObject, options: SignOptions = {}): SignedDelivery {
  const key = typeof privateKey === 'string' ? createPrivateKey(privateKey) : privateKey;
  if (key.type !== 'private' || key.asymmetricKeyType !== 'rsa') throw new TypeError('privateKey must be an RSA private key');
  const canonical = canonicalizeText(body, { dialect: options.dialect ?? 'orjson' });
  const signature = rsaSign('sha256', Buffer.from(sha256Hex(canonical), 'latin1'), key).toString('hex');
  return {
    headers: {
      'Content-Type': 'application/json',
      'User-Agent': 'jobhook-sign',
      'X-Service-Webhook': 'true',
      [options.signatureHeader ?? DEFAULT_SIGNATURE_HEADER]: signature,
      [options.algorithmHeader ?? DEFAULT_ALGORITHM_HEADER]: 'SHA256',
    },
    body: typeof body === 'string' ? body : new TextDecoder().decode(body),
  };
}
