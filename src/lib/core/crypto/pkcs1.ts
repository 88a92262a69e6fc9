/**
 * Opening an RSASSA-PKCS1-v1_5 / SHA-256 signature: after the public operation
 * (`s^e mod n`) a genuine signature is the block
 * `00 01 FF…FF 00 || DigestInfo(SHA-256) || H`. Everything but `H` is fixed by the
 * modulus size, so it is compared with a block built once per key, in constant time,
 * and `H` (the SHA-256 of the signed message) comes out. No ASN.1 is parsed, so no
 * lenient parse can let a forged block through. Runtime-neutral.
 */

/** DER of DigestInfo { AlgorithmIdentifier { sha256, NULL }, OCTET STRING (32 bytes) }, without the hash. */
const SHA256_DIGEST_INFO = [
  0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04,
  0x20,
];

/** Length of H, the SHA-256 at the end of the block. */
export const HASH_BYTES = 32;

/** The fixed part of the encoded block for a modulus of `modulusBytes` bytes: all but the last 32 bytes. */
export function expectedPrefix(modulusBytes: number): Uint8Array {
  const prefix = new Uint8Array(modulusBytes - HASH_BYTES);
  const pad = prefix.length - SHA256_DIGEST_INFO.length - 3;
  if (pad < 8)
    throw new TypeError(`a ${modulusBytes * 8}-bit modulus is too small for PKCS#1 v1.5 with SHA-256`);
  prefix[0] = 0x00;
  prefix[1] = 0x01;
  prefix.fill(0xff, 2, 2 + pad);
  prefix[2 + pad] = 0x00;
  prefix.set(SHA256_DIGEST_INFO, 3 + pad);
  return prefix;
}

/** Constant-time equality of two byte strings of the same length (false for different lengths). */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let k = 0; k < a.length; k++) diff |= a[k]! ^ b[k]!;
  return diff === 0;
}

/**
 * `H` from an opened block when everything before it is the expected encoding, else
 * undefined. `equal` compares in constant time (node's timingSafeEqual where available).
 */
export function hashFromBlock(
  block: Uint8Array,
  prefix: Uint8Array,
  equal: (a: Uint8Array, b: Uint8Array) => boolean = constantTimeEqual,
): Uint8Array | undefined {
  if (block.length !== prefix.length + HASH_BYTES) return undefined;
  return equal(block.subarray(0, prefix.length), prefix) ? block.slice(prefix.length) : undefined;
}
