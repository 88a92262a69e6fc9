import { MIN_MODULUS_BITS, normalizeKey, type RsaPublicJwk } from './keys.js';

/** Public key forms the WebCrypto verifier imports. */
export type WebPublicKeyInput = string | Uint8Array | ArrayBuffer | RsaPublicJwk | CryptoKey;

export interface ImportedWebKey {
  key: CryptoKey;
  modulusBytes: number;
}

const ALGORITHM = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' } as const;

function subtle(): SubtleCrypto {
  const s = globalThis.crypto?.subtle;
  if (s === undefined) throw new TypeError('WebCrypto (globalThis.crypto.subtle) is not available in this runtime');
  return s;
}

function isCryptoKey(value: unknown): value is CryptoKey {
  return typeof CryptoKey !== 'undefined' && value instanceof CryptoKey;
}

/**
 * Checks the key synchronously (TypeError at construction) and returns a promise
 * of the imported CryptoKey.
 */
export function prepareWebKey(input: WebPublicKeyInput): { modulusBytes: number; imported: Promise<CryptoKey> } {
  if (isCryptoKey(input)) {
    const alg = input.algorithm as RsaHashedKeyAlgorithm;
    if (alg.name !== ALGORITHM.name || alg.hash?.name !== 'SHA-256') {
      throw new TypeError(`publicKey CryptoKey is for ${alg.name}${alg.hash ? `/${alg.hash.name}` : ''}; import it as RSASSA-PKCS1-v1_5 with SHA-256`);
    }
    if (input.type !== 'public' || !input.usages.includes('verify')) throw new TypeError('publicKey CryptoKey must be a public key usable for verify');
    if (alg.modulusLength < MIN_MODULUS_BITS) throw new TypeError(`publicKey is a ${alg.modulusLength}-bit RSA key; jobhook requires at least ${MIN_MODULUS_BITS} bits`);
    return { modulusBytes: Math.ceil(alg.modulusLength / 8), imported: Promise.resolve(input) };
  }
  const n = normalizeKey(input);
  const s = subtle();
  const imported =
    n.kind === 'spki'
      ? s.importKey('spki', n.spki as BufferSource, ALGORITHM, false, ['verify'])
      : s.importKey('jwk', { ...n.jwk, alg: 'RS256', ext: true } as JsonWebKey, ALGORITHM, false, ['verify']);
  // Keep an early rejection from being reported as unhandled; it is rethrown at first use.
  imported.catch(() => undefined);
  return { modulusBytes: Math.ceil(n.modulusBits / 8), imported };
}

const encoder = new TextEncoder();
const HEX_DIGITS = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));

export async function sha256HexWeb(text: string): Promise<string> {
  const digest = new Uint8Array(await subtle().digest('SHA-256', encoder.encode(text)));
  let hex = '';
  for (const b of digest) hex += HEX_DIGITS[b];
  return hex;
}

export function verifyRsaSha256Web(key: CryptoKey, message: Uint8Array, signature: Uint8Array): Promise<boolean> {
  return subtle().verify(ALGORITHM.name, key, signature as BufferSource, message as BufferSource);
}

export function asciiBytes(text: string): Uint8Array {
  return encoder.encode(text);
}
