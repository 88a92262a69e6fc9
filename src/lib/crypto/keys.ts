import { classifyDer, DerError, inspectSpki, integerBits, spkiFromCertificate, spkiFromPkcs1 } from './der.js';

/** The smallest RSA modulus jobhook accepts. */
export const MIN_MODULUS_BITS = 2048;

/** An RSA public JWK (other members are allowed and ignored). */
export interface RsaPublicJwk {
  kty: 'RSA';
  n: string;
  e: string;
  alg?: string;
  [member: string]: unknown;
}

/** A key normalised for either crypto backend. */
export type NormalizedKey =
  | { kind: 'spki'; spki: Uint8Array; modulusBits: number }
  | { kind: 'jwk'; jwk: RsaPublicJwk; modulusBits: number };

const PEM = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/;

function base64ToBytes(b64: string): Uint8Array {
  const clean = b64.replace(/[\s]/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean)) throw new TypeError('publicKey PEM has invalid base64');
  const bin = atob(clean);
  const out = new Uint8Array(bin.length);
  for (let k = 0; k < bin.length; k++) out[k] = bin.charCodeAt(k);
  return out;
}

function checkSize(bits: number): void {
  if (bits < MIN_MODULUS_BITS) {
    throw new TypeError(`publicKey is a ${bits}-bit RSA key; jobhook requires at least ${MIN_MODULUS_BITS} bits`);
  }
}

function fromDer(der: Uint8Array, label: string): NormalizedKey {
  let spki: Uint8Array;
  try {
    const kind = classifyDer(der);
    spki = kind === 'spki' ? der : kind === 'pkcs1' ? spkiFromPkcs1(der) : spkiFromCertificate(der);
    const { modulusBits } = inspectSpki(spki);
    checkSize(modulusBits);
    return { kind: 'spki', spki, modulusBits };
  } catch (err) {
    if (err instanceof DerError) throw new TypeError(`publicKey (${label}): ${err.message}`);
    throw err;
  }
}

/** True for objects that look like a JWK. */
export function isJwk(value: unknown): value is { kty: unknown } {
  return typeof value === 'object' && value !== null && 'kty' in value;
}

function fromJwk(jwk: { kty: unknown; [k: string]: unknown }): NormalizedKey {
  if (jwk.kty !== 'RSA') throw new TypeError(`publicKey JWK has kty ${JSON.stringify(jwk.kty)}; the gateway signs with RSA`);
  if (typeof jwk.n !== 'string' || typeof jwk.e !== 'string') throw new TypeError('publicKey JWK needs the RSA members n and e');
  if ('d' in jwk) throw new TypeError('publicKey JWK is a private key: pass the public key only (kty, n, e)');
  if (jwk.alg !== undefined && jwk.alg !== 'RS256') {
    throw new TypeError(`publicKey JWK is for ${String(jwk.alg)}; the gateway signs with RS256 (RSA PKCS#1 v1.5, SHA-256)`);
  }
  const padded = jwk.n.replace(/-/g, '+').replace(/_/g, '/');
  const modulusBits = integerBits(base64ToBytes(padded + '='.repeat((4 - (padded.length % 4)) % 4)));
  checkSize(modulusBits);
  return { kind: 'jwk', jwk: { kty: 'RSA', n: jwk.n, e: jwk.e }, modulusBits };
}

/**
 * Normalises PEM (SPKI, PKCS#1 `RSA PUBLIC KEY`, `CERTIFICATE`), DER bytes or a
 * JWK. Throws TypeError with the reason for anything that is not an RSA public
 * key of at least 2048 bits.
 */
export function normalizeKey(input: unknown): NormalizedKey {
  if (typeof input === 'string') {
    const m = PEM.exec(input);
    if (m === null) {
      const trimmed = input.trim();
      if (trimmed.startsWith('{')) return fromJwk(JSON.parse(trimmed) as { kty: unknown });
      throw new TypeError('publicKey string is not PEM (expected -----BEGIN PUBLIC KEY-----, RSA PUBLIC KEY or CERTIFICATE)');
    }
    const label = m[1]!;
    if (label.includes('PRIVATE')) throw new TypeError(`publicKey is a private key (${label}): pass the gateway's public key`);
    if (label !== 'PUBLIC KEY' && label !== 'RSA PUBLIC KEY' && label !== 'CERTIFICATE') {
      throw new TypeError(`publicKey PEM "${label}" is not supported (expected PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE)`);
    }
    return fromDer(base64ToBytes(m[2]!), `PEM ${label}`);
  }
  if (input instanceof Uint8Array) return fromDer(input, 'DER');
  if (input instanceof ArrayBuffer) return fromDer(new Uint8Array(input), 'DER');
  if (isJwk(input)) return fromJwk(input as { kty: unknown });
  throw new TypeError('publicKey must be a PEM string, DER bytes, a JWK or a key object');
}
