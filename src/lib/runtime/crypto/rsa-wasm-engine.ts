/**
 * The one instance of the WebAssembly RSA module (native/rsa.c) in this process, and
 * `provideRsaWasmModule`, which gives it already compiled. Apart from rsa-wasm.ts, which
 * embeds the module's bytes (15 kB of base64) and is loaded only where a key needs it:
 * jobhook/web names provideRsaWasmModule, and must not load those bytes for it.
 */

/** What native/rsa.c exports. */
export interface RsaExports {
  memory: WebAssembly.Memory;
  rsa_key(): number;
  rsa_io(): number;
  rsa_max_bytes(): number;
  rsa_prepare(modLen: number, expLen: number): number;
  rsa_modexp(baseLen: number): number;
}

/** The instance, its areas, and which key's numbers are in it. */
export class RsaEngine {
  readonly x: RsaExports;
  readonly key: number;
  readonly io: number;
  /** The largest modulus and exponent in bytes. */
  readonly maxBytes: number;
  /** The key whose area is in the module now (rsa-wasm.ts's WasmRsaKey). */
  current: object | undefined;

  constructor(module: WebAssembly.Module) {
    this.x = new WebAssembly.Instance(module, {}).exports as unknown as RsaExports;
    if (
      typeof this.x.rsa_key !== 'function' ||
      typeof this.x.rsa_io !== 'function' ||
      typeof this.x.rsa_max_bytes !== 'function'
    )
      throw new TypeError('not the RSA module');
    this.key = this.x.rsa_key();
    this.io = this.x.rsa_io();
    this.maxBytes = this.x.rsa_max_bytes();
  }

  /** The module's memory (its one page never grows, but a view is made per call to be safe). */
  mem(): Uint8Array {
    return new Uint8Array(this.x.memory.buffer);
  }
}

let engine: RsaEngine | null | undefined;

/**
 * The engine: the one given by provideRsaWasmModule, else `compile()`'s, made at the
 * first call; undefined where it cannot be made (then never tried again).
 */
export function rsaEngineOr(compile: () => WebAssembly.Module | undefined): RsaEngine | undefined {
  if (engine === undefined) {
    engine = null;
    try {
      const module = compile();
      if (module !== undefined) engine = new RsaEngine(module);
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
  let e: RsaEngine;
  try {
    e = new RsaEngine(module);
  } catch (err) {
    throw new TypeError(
      `the WebAssembly module given for RSA cannot be instantiated: ${(err as Error).message}`,
    );
  }
  if (
    typeof e.x.rsa_modexp !== 'function' ||
    typeof e.x.rsa_prepare !== 'function' ||
    !(e.x.memory instanceof WebAssembly.Memory)
  ) {
    throw new TypeError(
      "the WebAssembly module given for RSA is not jobhook's (native/rsa.c): it lacks rsa_prepare, rsa_modexp or its memory",
    );
  }
  engine = e;
}

/** Whether the module has been compiled (or tried) in this process, without compiling it (tests: it is lazy). */
export function wasmRsaLoaded(): boolean {
  return engine !== undefined;
}
