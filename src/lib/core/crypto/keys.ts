import {
  classifyDer,
  DerError,
  inspectSpki,
  integerBits,
  spkiFromCertificate,
  spkiFromPkcs1,
} from './der.js';

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

/** A key normalised for either crypto backend, with its numbers for opening signatures. */
export type NormalizedKey = ({ kind: 'spki'; spki: Uint8Array } | { kind: 'jwk'; jwk: RsaPublicJwk }) & {
  modulusBits: number;
  /** Modulus, big-endian. */
  modulus: Uint8Array;
  /** Public exponent, big-endian. */
  exponent: Uint8Array;
};

const PEM = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/;
const PEM_LABELS = ['PUBLIC KEY', 'RSA PUBLIC KEY', 'CERTIFICATE'];
const EXPECTED = `expected a PEM (-----BEGIN ${PEM_LABELS.join('-----, ')}-----), DER bytes, a JWK or a key object`;

function base64ToBytes(b64: string, what: string): Uint8Array {
  const clean = b64.replace(/\s/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean)) {
    const bad = clean.match(/[^A-Za-z0-9+/=]/)?.[0];
    throw new TypeError(
      `${what} has invalid base64${bad === undefined ? '' : ` (found ${JSON.stringify(bad)})`}`,
    );
  }
  const bin = atob(clean);
  const out = new Uint8Array(bin.length);
  for (let k = 0; k < bin.length; k++) out[k] = bin.charCodeAt(k);
  return out;
}

function base64UrlToBytes(b64url: string, what: string): Uint8Array {
  const b64 = b64url.replace(/-/g, '+').replace(/_/g, '/');
  return base64ToBytes(b64 + '='.repeat((4 - (b64.length % 4)) % 4), what);
}

/** TypeError unless `bits` is a modulus size jobhook accepts. The one place that says so. */
export function checkModulusBits(bits: number): void {
  if (!(bits >= MIN_MODULUS_BITS)) {
    throw new TypeError(
      `publicKey is a ${bits}-bit RSA key; jobhook requires at least ${MIN_MODULUS_BITS} bits (a smaller key can be forged)`,
    );
  }
}

function fromDer(der: Uint8Array, label: string): NormalizedKey {
  try {
    const kind = classifyDer(der);
    const spki = kind === 'spki' ? der : kind === 'pkcs1' ? spkiFromPkcs1(der) : spkiFromCertificate(der);
    const { modulusBits, modulus, exponent } = inspectSpki(spki);
    checkModulusBits(modulusBits);
    return { kind: 'spki', spki, modulusBits, modulus, exponent };
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
  if (jwk.kty !== 'RSA')
    throw new TypeError(
      `publicKey JWK has kty ${JSON.stringify(jwk.kty)}; expected "RSA" (the gateway signs with RSA)`,
    );
  if (typeof jwk.n !== 'string' || typeof jwk.e !== 'string')
    throw new TypeError('publicKey JWK lacks the RSA members n and e (strings)');
  if ('d' in jwk)
    throw new TypeError('publicKey JWK is a private key (it has d): pass the public key only (kty, n, e)');
  if (jwk.alg !== undefined && jwk.alg !== 'RS256') {
    throw new TypeError(
      `publicKey JWK is for ${String(jwk.alg)}; expected RS256 (RSA PKCS#1 v1.5 with SHA-256, what the gateway signs with)`,
    );
  }
  const modulus = base64UrlToBytes(jwk.n, 'publicKey JWK n');
  const exponent = base64UrlToBytes(jwk.e, 'publicKey JWK e');
  const modulusBits = integerBits(modulus);
  checkModulusBits(modulusBits);
  return { kind: 'jwk', jwk: { kty: 'RSA', n: jwk.n, e: jwk.e }, modulusBits, modulus, exponent };
}

/**
 * Undoes what configuration systems do to a PEM: surrounding quotes, and newlines
 * written as the two characters `\n` (a PEM pasted into an environment variable).
 */
function unwrapPem(text: string): string {
  let t = text.trim();
  if (t.length >= 2 && (t[0] === '"' || t[0] === "'") && t[t.length - 1] === t[0]) t = t.slice(1, -1).trim();
  if (t.includes('\\n')) t = t.replace(/\\r\\n|\\n/g, '\n');
  return t;
}

function describeText(text: string): string {
  const t = text.trim();
  if (t === '') return 'an empty string';
  const label = /-----BEGIN ([^-]+)-----/.exec(t)?.[1];
  if (label !== undefined) return `a PEM "${label}" without its matching END line`;
  return `a string starting ${JSON.stringify(t.slice(0, 16))}`;
}

/**
 * Normalises PEM (SPKI, PKCS#1 `RSA PUBLIC KEY`, `CERTIFICATE`), DER bytes or a JWK.
 * Throws TypeError saying what was found and what is expected for anything that is
 * not an RSA public key of at least 2048 bits.
 */
export function normalizeKey(input: unknown): NormalizedKey {
  if (typeof input === 'string') {
    const text = unwrapPem(input);
    const m = PEM.exec(text);
    if (m === null) {
      if (text.startsWith('{')) {
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {
          throw new TypeError(`publicKey looks like a JWK but is not valid JSON; ${EXPECTED}`);
        }
        if (isJwk(parsed)) return fromJwk(parsed as { kty: unknown });
        throw new TypeError(`publicKey is a JSON object without kty; ${EXPECTED}`);
      }
      throw new TypeError(`publicKey is ${describeText(text)}; ${EXPECTED}`);
    }
    const label = m[1]!;
    if (label.includes('PRIVATE'))
      throw new TypeError(`publicKey is a private key (PEM "${label}"): pass the gateway's public key`);
    if (!PEM_LABELS.includes(label))
      throw new TypeError(
        `publicKey is a PEM "${label}"; expected ${PEM_LABELS.map((l) => `"${l}"`).join(', ')}`,
      );
    return fromDer(base64ToBytes(m[2]!, `publicKey PEM "${label}"`), `PEM ${label}`);
  }
  if (input instanceof Uint8Array) return fromDer(input, 'DER');
  if (input instanceof ArrayBuffer) return fromDer(new Uint8Array(input), 'DER');
  if (isJwk(input)) return fromJwk(input as { kty: unknown });
  const found =
    input === null
      ? 'null'
      : Array.isArray(input)
        ? 'an array'
        : typeof input === 'object'
          ? 'an object without kty'
          : `a ${typeof input}`;
  throw new TypeError(`publicKey is ${found}; ${EXPECTED}`);
}
