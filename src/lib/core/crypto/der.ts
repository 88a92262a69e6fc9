/**
 * The little DER needed to normalise RSA public keys to SPKI: read a TLV,
 * pull the SPKI out of a certificate, wrap a PKCS#1 key, measure the modulus.
 * Runtime-neutral (no Buffer), used by the Node and WebCrypto paths alike.
 */

interface Tlv {
  tag: number;
  /** Offset of the first content byte. */
  start: number;
  /** Offset after the last content byte. */
  end: number;
}

export class DerError extends Error {}

function readTlv(b: Uint8Array, pos: number, limit = b.length): Tlv {
  if (pos + 2 > limit) throw new DerError('truncated DER');
  const tag = b[pos]!;
  let len = b[pos + 1]!;
  let start = pos + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4 || start + n > limit) throw new DerError('unsupported DER length');
    len = 0;
    for (let k = 0; k < n; k++) len = len * 256 + b[start + k]!;
    start += n;
  }
  const end = start + len;
  if (end > limit) throw new DerError('truncated DER');
  return { tag, start, end };
}

function children(b: Uint8Array, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  for (let pos = parent.start; pos < parent.end;) {
    const t = readTlv(b, pos, parent.end);
    out.push(t);
    pos = t.end;
  }
  return out;
}

const RSA_ENCRYPTION_OID = Uint8Array.from([0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01]);
const OIDS: Array<[string, number[]]> = [
  ['RSASSA-PSS', [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a]],
  ['EC', [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01]],
  ['Ed25519', [0x2b, 0x65, 0x70]],
  ['Ed448', [0x2b, 0x65, 0x71]],
  ['DSA', [0x2a, 0x86, 0x48, 0xce, 0x38, 0x04, 0x01]],
];

function sameBytes(a: Uint8Array, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let k = 0; k < a.length; k++) if (a[k] !== b[k]) return false;
  return true;
}

export type DerKind = 'spki' | 'pkcs1' | 'certificate';

/** Tells SPKI, PKCS#1 RSAPublicKey and X.509 certificate apart by structure. */
export function classifyDer(b: Uint8Array): DerKind {
  const outer = readTlv(b, 0);
  if (outer.tag !== 0x30 || outer.end !== b.length) throw new DerError('not a DER SEQUENCE');
  const first = readTlv(b, outer.start, outer.end);
  if (first.tag === 0x02) return 'pkcs1';
  if (first.tag !== 0x30) throw new DerError('unrecognised DER structure');
  const inner = readTlv(b, first.start, first.end);
  return inner.tag === 0x06 ? 'spki' : 'certificate';
}

/** SubjectPublicKeyInfo of an X.509 certificate (tbsCertificate's 7th field, after an optional version). */
export function spkiFromCertificate(b: Uint8Array): Uint8Array {
  const cert = readTlv(b, 0);
  const tbs = readTlv(b, cert.start, cert.end);
  const fields = children(b, tbs);
  const offset = fields[0]?.tag === 0xa0 ? 1 : 0;
  const spki = fields[offset + 5];
  if (spki === undefined || spki.tag !== 0x30) throw new DerError('certificate without a public key');
  const headerStart = findHeaderStart(b, spki);
  return b.slice(headerStart, spki.end);
}

// Recover where a TLV's header started from its content start (length bytes are minimal in DER).
function findHeaderStart(b: Uint8Array, t: Tlv): number {
  for (let h = 2; h <= 6; h++) {
    const pos = t.start - h;
    if (pos < 0) break;
    try {
      const r = readTlv(b, pos);
      if (r.start === t.start && r.end === t.end && r.tag === t.tag) return pos;
    } catch {
      // try a longer header
    }
  }
  throw new DerError('malformed DER');
}

function encodeLength(n: number): number[] {
  if (n < 0x80) return [n];
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v % 256);
  return [0x80 | bytes.length, ...bytes];
}

function tlv(tag: number, content: Uint8Array): Uint8Array {
  const head = [tag, ...encodeLength(content.length)];
  const out = new Uint8Array(head.length + content.length);
  out.set(head, 0);
  out.set(content, head.length);
  return out;
}

/** Wraps a PKCS#1 RSAPublicKey into an rsaEncryption SubjectPublicKeyInfo. */
export function spkiFromPkcs1(pkcs1: Uint8Array): Uint8Array {
  const algId = tlv(
    0x30,
    Uint8Array.from([0x06, RSA_ENCRYPTION_OID.length, ...RSA_ENCRYPTION_OID, 0x05, 0x00]),
  );
  const bits = new Uint8Array(pkcs1.length + 1);
  bits.set(pkcs1, 1);
  const bitString = tlv(0x03, bits);
  const body = new Uint8Array(algId.length + bitString.length);
  body.set(algId, 0);
  body.set(bitString, algId.length);
  return tlv(0x30, body);
}

export interface RsaSpkiInfo {
  /** Modulus size in bits. */
  modulusBits: number;
  /** Modulus, big-endian (as DER holds it: maybe a leading zero byte). */
  modulus: Uint8Array;
  /** Public exponent, big-endian. */
  exponent: Uint8Array;
}

/**
 * Checks that an SPKI holds an RSA (rsaEncryption) key and measures its modulus.
 * Throws DerError with the algorithm's name for other key types.
 */
export function inspectSpki(spki: Uint8Array): RsaSpkiInfo {
  const outer = readTlv(spki, 0);
  const [algId, bitString] = children(spki, outer);
  if (algId === undefined || bitString === undefined || bitString.tag !== 0x03)
    throw new DerError('malformed SubjectPublicKeyInfo');
  const oid = readTlv(spki, algId.start, algId.end);
  const oidBytes = spki.subarray(oid.start, oid.end);
  if (!sameBytes(oidBytes, RSA_ENCRYPTION_OID)) {
    const known = OIDS.find(([, o]) => sameBytes(oidBytes, o));
    throw new DerError(
      `the key is ${known ? `an ${known[0]}` : 'not an RSA'} key; the gateway signs with RSA PKCS#1 v1.5`,
    );
  }
  const rsaKey = spki.subarray(bitString.start + 1, bitString.end);
  const seq = readTlv(rsaKey, 0);
  const n = readTlv(rsaKey, seq.start, seq.end);
  if (n.tag !== 0x02 || n.end >= seq.end) throw new DerError('malformed RSA public key');
  const e = readTlv(rsaKey, n.end, seq.end);
  if (e.tag !== 0x02) throw new DerError('malformed RSA public key');
  const modulus = rsaKey.subarray(n.start, n.end);
  return { modulusBits: integerBits(modulus), modulus, exponent: rsaKey.subarray(e.start, e.end) };
}

/** Bit length of a big-endian unsigned integer. */
export function integerBits(bytes: Uint8Array): number {
  let k = 0;
  while (k < bytes.length && bytes[k] === 0) k++;
  if (k === bytes.length) return 0;
  return (bytes.length - k - 1) * 8 + (32 - Math.clz32(bytes[k]!));
}
