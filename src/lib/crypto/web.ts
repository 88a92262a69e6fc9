import { checkModulusBits, normalizeKey, type RsaPublicJwk } from './keys.js';
import { expectedPrefix, hashFromBlock } from './pkcs1.js';

/** Public key forms the WebCrypto verifier imports. */
export type WebPublicKeyInput = string | Uint8Array | ArrayBuffer | RsaPublicJwk | CryptoKey;

/** A key prepared once: what opening a signature needs. */
export interface ImportedWebKey {
  modulusBytes: number;
  /** As the Node key's `open`: the 32-byte hash the signer signed, or undefined. */
  open(signature: Uint8Array): Promise<Uint8Array | undefined>;
}

function subtle(): SubtleCrypto {
  const s = globalThis.crypto?.subtle;
  if (s === undefined) throw new TypeError('WebCrypto (globalThis.crypto.subtle) is not available in this runtime');
  return s;
}

function isCryptoKey(value: unknown): value is CryptoKey {
  return typeof CryptoKey !== 'undefined' && value instanceof CryptoKey;
}

const HEX_DIGITS = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));

export function bytesToHex(bytes: Uint8Array): string {
  let hex = '';
  for (let k = 0; k < bytes.length; k++) hex += HEX_DIGITS[bytes[k]!];
  return hex;
}

function bytesToBigInt(bytes: Uint8Array): bigint {
  return bytes.length === 0 ? 0n : BigInt('0x' + bytesToHex(bytes));
}

function bigIntToBytes(value: bigint, length: number): Uint8Array {
  const hex = value.toString(16).padStart(length * 2, '0');
  const out = new Uint8Array(length);
  for (let k = 0; k < length; k++) out[k] = parseInt(hex.slice(2 * k, 2 * k + 2), 16);
  return out;
}

/**
 * `base^exponent mod modulus`. WebCrypto has no raw RSA operation, and this public
 * one involves no secret, so plain square-and-multiply on BigInt is safe (measured:
 * about 160 µs for 2048 bits with e = 65537, against ~35 µs for OpenSSL).
 */
export function modPow(base: bigint, exponent: bigint, modulus: bigint): bigint {
  let result = 1n;
  let b = base % modulus;
  for (let e = exponent; e > 0n; e >>= 1n) {
    if (e & 1n) result = (result * b) % modulus;
    b = (b * b) % modulus;
  }
  return result;
}

function opener(modulusBytes: number, numbers: Promise<{ n: bigint; e: bigint }>): ImportedWebKey {
  const prefix = expectedPrefix(modulusBytes);
  return {
    modulusBytes,
    async open(signature) {
      const { n, e } = await numbers;
      const s = bytesToBigInt(signature);
      if (s >= n) return undefined;
      return hashFromBlock(bigIntToBytes(modPow(s, e, n), modulusBytes), prefix);
    },
  };
}

function base64UrlToBigInt(value: string): bigint {
  const b64 = value.replace(/-/g, '+').replace(/_/g, '/');
  const bin = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
  let hex = '';
  for (let k = 0; k < bin.length; k++) hex += HEX_DIGITS[bin.charCodeAt(k)];
  return hex === '' ? 0n : BigInt('0x' + hex);
}

/** Checks the key synchronously (TypeError at construction) and returns its opener. */
export function prepareWebKey(input: WebPublicKeyInput): ImportedWebKey {
  if (isCryptoKey(input)) {
    const alg = input.algorithm as RsaHashedKeyAlgorithm;
    if (!alg.name.startsWith('RSA')) throw new TypeError(`publicKey CryptoKey is for ${alg.name}; expected an RSA key (RSASSA-PKCS1-v1_5 with SHA-256)`);
    if (input.type !== 'public') throw new TypeError(`publicKey CryptoKey is a ${input.type} key; expected the gateway's public key`);
    if (!input.extractable) {
      throw new TypeError(
        'publicKey CryptoKey is not extractable: jobhook opens the signature itself (one modular exponentiation, so a forged request costs no parsing); import it with extractable: true, or pass the PEM or JWK',
      );
    }
    checkModulusBits(alg.modulusLength);
    const numbers = subtle()
      .exportKey('jwk', input)
      .then((jwk) => ({ n: base64UrlToBigInt(jwk.n!), e: base64UrlToBigInt(jwk.e!) }));
    // Keep an early rejection from being reported as unhandled; it is rethrown at first use.
    numbers.catch(() => undefined);
    return opener(Math.ceil(alg.modulusLength / 8), numbers);
  }
  const key = normalizeKey(input);
  return opener(Math.ceil(key.modulusBits / 8), Promise.resolve({ n: bytesToBigInt(key.modulus), e: bytesToBigInt(key.exponent) }));
}

const encoder = new TextEncoder();

/** Lowercase hex SHA-256 of bytes (WebCrypto). */
export async function sha256HexWeb(data: Uint8Array): Promise<string> {
  return bytesToHex(new Uint8Array(await subtle().digest('SHA-256', data as BufferSource)));
}

/** SHA-256 of the ASCII bytes of a hex digest: the `H` a PKCS#1 block carries for it. */
export async function sha256OfHexWeb(digestHex: string): Promise<Uint8Array> {
  return new Uint8Array(await subtle().digest('SHA-256', encoder.encode(digestHex)));
}
