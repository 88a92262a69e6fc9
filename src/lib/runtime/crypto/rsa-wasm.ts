/**
 * The RSA public operation in WebAssembly: native/rsa.c (Montgomery multiplication on
 * 26–28-bit limbs with 128-bit SIMD), embedded as base64. Compiled and instantiated
 * synchronously at the first operation, never at import: a runtime that opens
 * signatures with node:crypto never loads it. Runtime-neutral: no `node:` import.
 *
 * One instance serves every key: the module keeps one key's prepared numbers (limbs,
 * Montgomery constants, R² mod n) in a fixed area; each key keeps a copy of its area
 * and puts it back before an operation when another key was used last.
 */
import { decodeBase64 } from '../../base/bytes.js';
import { RSA_WASM_BASE64 } from './rsa-wasm-module.js';

interface Exports {
  memory: WebAssembly.Memory;
  rsa_key(): number;
  rsa_io(): number;
  rsa_max_bytes(): number;
  rsa_prepare(modLen: number, expLen: number): number;
  rsa_modexp(baseLen: number): number;
}

class Engine {
  readonly x: Exports;
  readonly key: number;
  readonly io: number;
  /** The largest modulus and exponent in bytes. */
  readonly maxBytes: number;
  /** The key whose area is in the module now. */
  current: WasmRsaKey | undefined;

  constructor(module: WebAssembly.Module) {
    this.x = new WebAssembly.Instance(module, {}).exports as unknown as Exports;
    if (typeof this.x.rsa_key !== 'function' || typeof this.x.rsa_io !== 'function' || typeof this.x.rsa_max_bytes !== 'function') throw new TypeError('not the RSA module');
    this.key = this.x.rsa_key();
    this.io = this.x.rsa_io();
    this.maxBytes = this.x.rsa_max_bytes();
  }

  /** The module's memory (its one page never grows, but a view is made per call to be safe). */
  mem(): Uint8Array {
    return new Uint8Array(this.x.memory.buffer);
  }
}

let engine: Engine | null | undefined;

/**
 * Compiles the embedded module once (synchronously: it is 12 KB); undefined where
 * WebAssembly is missing or may not be compiled from bytes (Cloudflare Workers and
 * other hosts that forbid code generation).
 */
function rsaEngine(): Engine | undefined {
  if (engine === undefined) {
    engine = null;
    try {
      if (typeof WebAssembly === 'object' && typeof atob === 'function') engine = new Engine(new WebAssembly.Module(decodeBase64(RSA_WASM_BASE64)));
    } catch {
      engine = null;
    }
  }
  return engine ?? undefined;
}

/**
 * Gives the module already compiled, for hosts that refuse to compile WebAssembly from
 * bytes but instantiate a module their bundler compiled (Cloudflare Workers: `import rsa
 * from './rsa.wasm'` yields a WebAssembly.Module). Must come before the first operation
 * that needs it; TypeError when the module is not native/rsa.c's.
 */
export function provideRsaWasmModule(module: WebAssembly.Module): void {
  if (engine) return;
  let e: Engine;
  try {
    e = new Engine(module);
  } catch (err) {
    throw new TypeError(`the WebAssembly module given for RSA cannot be instantiated: ${(err as Error).message}`);
  }
  if (typeof e.x.rsa_modexp !== 'function' || typeof e.x.rsa_prepare !== 'function' || !(e.x.memory instanceof WebAssembly.Memory)) {
    throw new TypeError("the WebAssembly module given for RSA is not jobhook's (native/rsa.c): it lacks rsa_prepare, rsa_modexp or its memory");
  }
  engine = e;
}

/** The module's bytes (native/rsa.c compiled), to ship as a file for such hosts. */
export function rsaWasmBytes(): Uint8Array {
  return decodeBase64(RSA_WASM_BASE64);
}

/** Whether the module has been compiled (or tried) in this process, without compiling it (tests: it is lazy). */
export function wasmRsaLoaded(): boolean {
  return engine !== undefined;
}

/** True when the WebAssembly RSA module can be (or has been) instantiated here; instantiates it. */
export function wasmRsaAvailable(): boolean {
  return rsaEngine() !== undefined;
}

/** One key prepared in the module. */
export class WasmRsaKey {
  readonly #engine: Engine;
  /** This key's area, as rsa_prepare left it. */
  readonly #area: Uint8Array;
  /** Length in bytes of the modulus without leading zeros: every result has this length. */
  readonly modulusBytes: number;

  constructor(e: Engine, area: Uint8Array, modulusBytes: number) {
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
    if (base.length > e.maxBytes) throw new RangeError(`the base is ${base.length} bytes, longer than the modulus (${this.modulusBytes})`);
    mem.set(base, e.io + e.maxBytes);
    if (e.x.rsa_modexp(base.length) !== 0) throw new RangeError(`the base is longer than the modulus (${this.modulusBytes} bytes)`);
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
