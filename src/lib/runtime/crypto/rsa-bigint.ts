/**
 * The RSA public operation `s^e mod n` in BigInt arithmetic, and the checks every RSA
 * public operation makes on its numbers. Small, and loaded with the entries: the
 * WebAssembly operation (rsa-public.ts, rsa-wasm.ts) is loaded only where a key needs it.
 */

/** A key's numbers: big-endian, without leading zeros (copies: the caller's bytes may change). */
export interface RsaNumbers {
  readonly n: Uint8Array;
  readonly e: Uint8Array;
  /** Length in bytes of the modulus (without leading zeros): every result has this length. */
  readonly modulusBytes: number;
}

/** `bytes` without its leading zeros (a view). */
export function stripZeros(bytes: Uint8Array): Uint8Array {
  let start = 0;
  while (start < bytes.length && bytes[start] === 0) start++;
  return bytes.subarray(start);
}

/** The numbers of a key (big-endian modulus and exponent); RangeError for a zero modulus. */
export function rsaNumbers(modulus: Uint8Array, exponent: Uint8Array): RsaNumbers {
  const n = stripZeros(modulus).slice();
  const e = stripZeros(exponent).slice();
  if (n.length === 0) throw new RangeError('the modulus is zero');
  return { n, e, modulusBytes: n.length };
}

/** The base of an operation without its leading zeros; RangeError when it is longer than the modulus. */
export function baseFor(base: Uint8Array, modulusBytes: number): Uint8Array {
  const b = stripZeros(base);
  if (b.length > modulusBytes)
    throw new RangeError(`the base is ${b.length} bytes, longer than the ${modulusBytes}-byte modulus`);
  return b;
}

let hex: string[] | undefined;

export function bytesToBigInt(bytes: Uint8Array): bigint {
  const digits = (hex ??= Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0')));
  let text = '';
  for (let k = 0; k < bytes.length; k++) text += digits[bytes[k]!];
  return text === '' ? 0n : BigInt('0x' + text);
}

function hexValue(c: number): number {
  return c <= 57 ? c - 48 : c - 87; // '0'-'9', 'a'-'f' (toString(16) is lowercase)
}

export function bigIntToBytes(value: bigint, length: number): Uint8Array {
  const text = value.toString(16);
  const out = new Uint8Array(length);
  for (let i = text.length, k = length - 1; i > 0 && k >= 0; k--) {
    const lo = hexValue(text.charCodeAt(--i));
    out[k] = i > 0 ? (hexValue(text.charCodeAt(--i)) << 4) | lo : lo;
  }
  return out;
}

/**
 * `base^exponent mod modulus` by left-to-right square-and-multiply on BigInt (e = 65537:
 * 16 squarings and one multiplication; right-to-left needs two more, measured 9 % slower;
 * Barrett reduction instead of `%` measured no faster). The operation is public (no
 * secret involved), so it need not run in constant time.
 */
export function modPowBigInt(base: bigint, exponent: bigint, modulus: bigint): bigint {
  if (exponent <= 0n) return 1n % modulus;
  const bits = exponent.toString(2);
  const x = base % modulus;
  let result = x;
  for (let i = 1; i < bits.length; i++) {
    result = (result * result) % modulus;
    if (bits.charCodeAt(i) === 49) result = (result * x) % modulus;
  }
  return result;
}

/** `b^e mod n` on BigInt for one key, `b` a base checked by baseFor; `modulusBytes` long. */
export function bigIntOperation(numbers: RsaNumbers): (b: Uint8Array) => Uint8Array {
  const n = bytesToBigInt(numbers.n);
  const e = bytesToBigInt(numbers.e);
  return (b) => bigIntToBytes(modPowBigInt(bytesToBigInt(b), e, n), numbers.modulusBytes);
}
