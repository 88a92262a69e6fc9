/**
 * The raw RSA public operation `s^e mod n`, synchronous and runtime-neutral: in
 * WebAssembly (rsa-wasm.ts) where it can be compiled, else with BigInt. For runtimes
 * whose node:crypto cannot do it (Deno has no RSA_NO_PADDING) and WebCrypto-only ones
 * (WebCrypto has no raw RSA operation).
 */
import { prepareWasmRsaKey, type WasmRsaKey } from './rsa-wasm.js';

/** Which arithmetic an operation uses. */
export type RsaPublicEngine = 'wasm' | 'bigint';

/** `s^e mod n` for one key. */
export interface RsaPublicOperation {
  /** Length in bytes of the modulus (without leading zeros): every result has this length. */
  readonly modulusBytes: number;
  /**
   * `base^e mod n`, big-endian, `modulusBytes` long. `base` is big-endian and at most
   * `modulusBytes` long (leading zeros aside); any value, also 0 or ≥ n. RangeError for
   * a longer base.
   */
  apply(base: Uint8Array): Uint8Array;
  /** The arithmetic in use: chosen at the first `apply` (WebAssembly is instantiated then, not before). */
  readonly engine: RsaPublicEngine | undefined;
}

const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));

function bytesToBigInt(bytes: Uint8Array): bigint {
  let hex = '';
  for (let k = 0; k < bytes.length; k++) hex += HEX[bytes[k]!];
  return hex === '' ? 0n : BigInt('0x' + hex);
}

function hexValue(c: number): number {
  return c <= 57 ? c - 48 : c - 87; // '0'-'9', 'a'-'f' (toString(16) is lowercase)
}

function bigIntToBytes(value: bigint, length: number): Uint8Array {
  const hex = value.toString(16);
  const out = new Uint8Array(length);
  for (let i = hex.length, k = length - 1; i > 0 && k >= 0; k--) {
    const lo = hexValue(hex.charCodeAt(--i));
    out[k] = i > 0 ? (hexValue(hex.charCodeAt(--i)) << 4) | lo : lo;
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

function strip(bytes: Uint8Array): Uint8Array {
  let start = 0;
  while (start < bytes.length && bytes[start] === 0) start++;
  return bytes.subarray(start);
}

/**
 * The RSA public operation for the key (`modulus`, `exponent`: big-endian bytes).
 * Synchronous. Nothing is computed or loaded until the first `apply`, which
 * instantiates the WebAssembly module (once per process) and prepares the key in it;
 * where WebAssembly cannot be compiled from bytes (Cloudflare Workers) or for a key
 * it does not take (even modulus, over 16384 bits), BigInt does the work.
 * `engine: 'bigint'` forces BigInt (tests, benchmarks).
 *
 * @example
 * ```ts
 * const rsa = createRsaPublicOperation(key.modulus, key.exponent);
 * const block = rsa.apply(signatureBytes); // s^e mod n, modulusBytes long
 * ```
 */
export function createRsaPublicOperation(modulus: Uint8Array, exponent: Uint8Array, options: { engine?: RsaPublicEngine } = {}): RsaPublicOperation {
  const n = strip(modulus).slice();
  const e = strip(exponent).slice();
  if (n.length === 0) throw new RangeError('the modulus is zero');
  const modulusBytes = n.length;
  let wasm: WasmRsaKey | undefined;
  let big: { n: bigint; e: bigint } | undefined;
  let engine: RsaPublicEngine | undefined;
  const choose = (): RsaPublicEngine => {
    if (options.engine !== 'bigint') wasm = prepareWasmRsaKey(n, e);
    if (wasm === undefined) big = { n: bytesToBigInt(n), e: bytesToBigInt(e) };
    return wasm === undefined ? 'bigint' : 'wasm';
  };
  return {
    modulusBytes,
    get engine() {
      return engine;
    },
    apply(base) {
      const b = strip(base);
      if (b.length > modulusBytes) throw new RangeError(`the base is ${b.length} bytes, longer than the ${modulusBytes}-byte modulus`);
      engine ??= choose();
      if (wasm !== undefined) return wasm.apply(b);
      return bigIntToBytes(modPowBigInt(bytesToBigInt(b), big!.e, big!.n), modulusBytes);
    },
  };
}
