/**
 * The raw RSA public operation `s^e mod n`, synchronous and runtime-neutral: in
 * WebAssembly (rsa-wasm.ts) where it can be compiled, else with BigInt. For runtimes
 * whose node:crypto cannot do it (Deno has no RSA_NO_PADDING) and WebCrypto-only ones
 * (WebCrypto has no raw RSA operation). Loaded when a key needs it (rsa-deferred.ts and
 * web.ts import it dynamically), with the WebAssembly module it embeds: where node:crypto
 * does the operation (Node, Bun), importing jobhook compiles neither.
 */
import { baseFor, bigIntOperation, rsaNumbers } from './rsa-bigint.js';
import { prepareWasmRsaKey, type WasmRsaKey } from './rsa-wasm.js';

export { modPowBigInt } from './rsa-bigint.js';

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
export function createRsaPublicOperation(
  modulus: Uint8Array,
  exponent: Uint8Array,
  options: { engine?: RsaPublicEngine } = {},
): RsaPublicOperation {
  const numbers = rsaNumbers(modulus, exponent);
  const { modulusBytes } = numbers;
  let wasm: WasmRsaKey | undefined;
  let big: ((b: Uint8Array) => Uint8Array) | undefined;
  let engine: RsaPublicEngine | undefined;
  const choose = (): RsaPublicEngine => {
    if (options.engine !== 'bigint') wasm = prepareWasmRsaKey(numbers.n, numbers.e);
    if (wasm === undefined) big = bigIntOperation(numbers);
    return wasm === undefined ? 'bigint' : 'wasm';
  };
  return {
    modulusBytes,
    get engine() {
      return engine;
    },
    apply(base) {
      const b = baseFor(base, modulusBytes);
      engine ??= choose();
      if (wasm !== undefined) return wasm.apply(b);
      return big!(b);
    },
  };
}
