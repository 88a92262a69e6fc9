/**
 * A signature header in base64 rather than hex: a sender (or a proxy, or a hand-written
 * test) that encoded the signature as most APIs do. The verifier refuses it as malformed;
 * `verify` and `explain` say what it looks like.
 */

/** A signature header that reads as base64, and its bytes. */
export interface Base64Signature {
  /** Characters in the header (whitespace left out). */
  characters: number;
  bytes: Uint8Array;
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const BASE64URL = /^[A-Za-z0-9_-]+={0,2}$/;

/**
 * The header's value as base64 (standard or URL-safe, padded or not), when it reads as
 * base64 rather than hex (two thirds of random base64 are letters past `f`: a quarter
 * at least, not a hex string with a few characters altered) and decodes to at least 64
 * bytes (the smallest signature a verifier takes has 256): undefined otherwise.
 */
export function base64Signature(value: string | undefined): Base64Signature | undefined {
  const compact = (value ?? '').replace(/\s+/g, '');
  const nonHex = compact.replace(/[0-9a-fA-F]/g, '').length;
  if (compact === '' || nonHex < compact.length / 4) return undefined;
  const url = !BASE64.test(compact);
  if (url && !BASE64URL.test(compact)) return undefined;
  if (compact.replace(/=+$/, '').length % 4 === 1) return undefined;
  const bytes = new Uint8Array(Buffer.from(compact, url ? 'base64url' : 'base64'));
  return bytes.length < 64 ? undefined : { characters: compact.length, bytes };
}

/** `344 characters, 256 bytes once decoded: the size of a 2048-bit RSA signature`. */
export function describeBase64(found: { characters: number; bytes: number }): string {
  const size = [256, 384, 512].includes(found.bytes)
    ? `: the size of a ${found.bytes * 8}-bit RSA signature`
    : '';
  return `${found.characters} characters, ${found.bytes} bytes once decoded${size}`;
}

/** The hint `verify` adds to a malformed signature that is base64. */
export function base64Hint(value: string | undefined): string | undefined {
  const found = base64Signature(value);
  if (found === undefined) return undefined;
  return `this looks like base64 (${describeBase64({ ...found, bytes: found.bytes.length })}); the gateway sends hex`;
}
