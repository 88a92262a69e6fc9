/**
 * The RSA public operation in WebAssembly: native/rsa.c (Montgomery multiplication on
 * 26–28-bit limbs with 128-bit SIMD), embedded as base64. Compiled and instantiated
 * synchronously at the first operation, never at import; and this module, with its 15 kB
 * of base64, is itself loaded only where a key needs it (rsa-public.ts): a runtime that
 * opens signatures with node:crypto never loads it. The instance is kept in
 * rsa-wasm-engine.ts. Runtime-neutral: no `node:` import.
 *
 * One instance serves every key: the module keeps one key's prepared numbers (limbs,
 * Montgomery constants, R² mod n) in a fixed area; each key keeps a copy of its area
 * and puts it back before an operation when another key was used last.
 */
import { decodeBase64 } from '../../base/bytes.js';
import { RSA_WASM_BASE64 } from './rsa-wasm-module.js';
import { rsaEngineOr, type RsaEngine } from './rsa-wasm-engine.js';

export { provideRsaWasmModule, wasmRsaLoaded } from './rsa-wasm-engine.js';

/** The engine, compiled from the embedded bytes at the first call (synchronously: they are 12 KB) unless given compiled. */
function rsaEngine(): RsaEngine | undefined {
  // Undefined where WebAssembly is missing or may not be compiled from bytes (Cloudflare Workers and other hosts that forbid code generation).
  return rsaEngineOr(() =>
    typeof WebAssembly === 'object' && typeof atob === 'function'
      ? new WebAssembly.Module(decodeBase64(RSA_WASM_BASE64))
      : undefined,
  );
}

/** The module's bytes (native/rsa.c compiled), to ship as a file for such hosts. */
export function rsaWasmBytes(): Uint8Array {
  return decodeBase64(RSA_WASM_BASE64);
}

/** True when the WebAssembly RSA module can be (or has been) instantiated here; instantiates it. */
export function wasmRsaAvailable(): boolean {
  return rsaEngine() !== undefined;
}

/** One key prepared in the module. */
export class WasmRsaKey {
  readonly #engine: RsaEngine;
  /** This key's area, as rsa_prepare left it. */
  readonly #area: Uint8Array;
  /** Length in bytes of the modulus without leading zeros: every result has this length. */
  readonly modulusBytes: number;

  constructor(e: RsaEngine, area: Uint8Array, modulusBytes: number) {
    this.#engine = e;
    this.#area = area;
    this.modulusBytes = modulusBytes;
  }

  /** base^e mod n, big-endian, modulusBytes long. base: big-endian, at most modulusBytes long without its leading zeros. */
  apply(base: Uint8Array): Uint8Array {
    const e = this.#engine;
    const mem = e.mem();
    if (e.current !== this) {
      mem.set(this.#area, e.key);
      e.current = this;
    }
    if (base.length > e.maxBytes)
      throw new RangeError(
        `the base is ${base.length} bytes, longer than the modulus (${this.modulusBytes})`,
      );
    mem.set(base, e.io + e.maxBytes);
    if (e.x.rsa_modexp(base.length) !== 0)
      throw new RangeError(`the base is longer than the modulus (${this.modulusBytes} bytes)`);
    const out = e.io + 2 * e.maxBytes;
    return mem.slice(out, out + this.modulusBytes);
  }
}

/**
 * Prepares a key (big-endian modulus and exponent) in the module, instantiating it
 * at the first call. Undefined when the module cannot be used here or for this key
 * (an even modulus, a zero exponent, more than 16384 bits): the caller then uses
 * BigInt arithmetic.
 */
export function prepareWasmRsaKey(modulus: Uint8Array, exponent: Uint8Array): WasmRsaKey | undefined {
  const e = rsaEngine();
  if (e === undefined || modulus.length > e.maxBytes || exponent.length > e.maxBytes) return undefined;
  const mem = e.mem();
  mem.set(modulus, e.io);
  mem.set(exponent, e.io + e.maxBytes);
  e.current = undefined;
  const used = e.x.rsa_prepare(modulus.length, exponent.length);
  if (used < 0) return undefined;
  let start = 0;
  while (start < modulus.length && modulus[start] === 0) start++;
  const key = new WasmRsaKey(e, mem.slice(e.key, e.key + used), modulus.length - start);
  e.current = key;
  return key;
}
