import crypto, { KeyObject } from 'node:crypto';
import { checkModulusBits, normalizeKey, type RsaPublicJwk } from '../../core/crypto/keys.js';
import { expectedPrefix, hashFromBlock } from '../../core/crypto/pkcs1.js';
import { rsaOperation, type RsaOperation } from './rsa-probe.js';

/** Public key forms the Node verifier imports. */
export type NodePublicKeyInput = string | Uint8Array | ArrayBuffer | RsaPublicJwk | KeyObject;

/** A key imported once: the KeyObject and what opening a signature needs. */
export interface ImportedNodeKey {
  key: KeyObject;
  modulusBytes: number;
  /**
   * The RSA public operation on `signature` (one modular exponentiation), checked
   * against the PKCS#1 v1.5 / SHA-256 layout: the 32-byte hash the signer signed,
   * or undefined when the signature was not made with this key.
   */
  open(signature: Uint8Array): Uint8Array | undefined;
}

function timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && crypto.timingSafeEqual(a, b);
}

/** The modulus as exactly `length` big-endian bytes. */
function modulusOf(key: KeyObject, length: number): Uint8Array {
  const n = Buffer.from((key.export({ format: 'jwk' }) as { n: string }).n, 'base64url');
  const out = new Uint8Array(length);
  out.set(n.subarray(Math.max(0, n.length - length)), Math.max(0, length - n.length));
  return out;
}

function opener(key: KeyObject, modulusBytes: number, operation: RsaOperation): ImportedNodeKey {
  const prefix = expectedPrefix(modulusBytes);
  const modulus = modulusOf(key, modulusBytes);
  const raw = operation.prepare(key, modulusBytes);
  return {
    key,
    modulusBytes,
    open(signature) {
      // A number not below the modulus is no signature; OpenSSL would throw (an error costs as much as the RSA operation).
      if (Buffer.compare(signature, modulus) >= 0) return undefined;
      let block: Uint8Array;
      try {
        block = raw(signature);
      } catch {
        return undefined;
      }
      return hashFromBlock(block, prefix, timingSafeEqual);
    },
  };
}

/**
 * Imports a key once into a KeyObject; TypeError for non-RSA keys, private keys and moduli
 * under 2048 bits, and (naming `jobhook/web`) where this runtime has no RSA public operation
 * that works: the first import probes for one (rsa-probe.ts).
 */
export function importNodeKey(input: NodePublicKeyInput): ImportedNodeKey {
  return importNodeKeyWith(input, rsaOperation());
}

/** importNodeKey with a given RSA operation (tests: the fallback on Node). */
export function importNodeKeyWith(input: NodePublicKeyInput, operation: RsaOperation): ImportedNodeKey {
  if (input instanceof KeyObject) {
    if (input.type !== 'public')
      throw new TypeError(`publicKey is a ${input.type} KeyObject; expected the gateway's public key`);
    if (input.asymmetricKeyType !== 'rsa') {
      throw new TypeError(
        `publicKey is an ${String(input.asymmetricKeyType)} key; expected RSA (the gateway signs with RSA PKCS#1 v1.5)`,
      );
    }
    const bits = input.asymmetricKeyDetails?.modulusLength ?? 0;
    checkModulusBits(bits);
    return opener(input, Math.ceil(bits / 8), operation);
  }
  const normalized = normalizeKey(input);
  const key =
    normalized.kind === 'spki'
      ? crypto.createPublicKey({ key: Buffer.from(normalized.spki), format: 'der', type: 'spki' })
      : crypto.createPublicKey({ key: normalized.jwk as unknown as crypto.JsonWebKey, format: 'jwk' });
  return opener(key, Math.ceil(normalized.modulusBits / 8), operation);
}

const oneShot = (
  crypto as {
    hash?: (algorithm: string, data: string | Uint8Array, encoding: 'hex' | 'buffer') => string | Buffer;
  }
).hash;

/** Lowercase hex SHA-256 of a UTF-8 text or bytes. */
export function sha256Hex(data: string | Uint8Array): string {
  if (oneShot !== undefined) return oneShot('sha256', data, 'hex') as string;
  return crypto.createHash('sha256').update(data).digest('hex');
}

/** SHA-256 of the ASCII bytes of a hex digest: the `H` a PKCS#1 block carries for it. */
export function sha256OfHex(digestHex: string): Uint8Array {
  if (oneShot !== undefined) return oneShot('sha256', digestHex, 'buffer') as Buffer;
  return crypto.createHash('sha256').update(digestHex, 'latin1').digest();
}
