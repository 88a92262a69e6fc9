import { createHash, createPublicKey, KeyObject, verify as rsaVerify } from 'node:crypto';
import { MIN_MODULUS_BITS, normalizeKey, type RsaPublicJwk } from './keys.js';

/** Public key forms the Node verifier imports. */
export type NodePublicKeyInput = string | Uint8Array | ArrayBuffer | RsaPublicJwk | KeyObject;

export interface ImportedNodeKey {
  key: KeyObject;
  modulusBytes: number;
}

/** Imports a key once into a KeyObject; TypeError for non-RSA keys, private keys and moduli under 2048 bits. */
export function importNodeKey(input: NodePublicKeyInput): ImportedNodeKey {
  if (input instanceof KeyObject) {
    if (input.type !== 'public') throw new TypeError(`publicKey is a ${input.type} KeyObject: pass the gateway's public key`);
    if (input.asymmetricKeyType !== 'rsa') {
      throw new TypeError(`publicKey is an ${String(input.asymmetricKeyType)} key; the gateway signs with RSA PKCS#1 v1.5`);
    }
    const bits = input.asymmetricKeyDetails?.modulusLength ?? 0;
    if (bits < MIN_MODULUS_BITS) throw new TypeError(`publicKey is a ${bits}-bit RSA key; jobhook requires at least ${MIN_MODULUS_BITS} bits`);
    return { key: input, modulusBytes: Math.ceil(bits / 8) };
  }
  const normalized = normalizeKey(input);
  const key =
    normalized.kind === 'spki'
      ? createPublicKey({ key: Buffer.from(normalized.spki), format: 'der', type: 'spki' })
      : createPublicKey({ key: normalized.jwk as unknown as import('node:crypto').JsonWebKey, format: 'jwk' });
  return { key, modulusBytes: Math.ceil(normalized.modulusBits / 8) };
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** RSASSA-PKCS1-v1_5 / SHA-256 over `message` (OpenSSL; strict DigestInfo encoding). */
export function verifyRsaSha256(key: KeyObject, message: Uint8Array, signature: Uint8Array): boolean {
  return rsaVerify('sha256', message, key, signature);
}
