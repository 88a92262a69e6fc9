/**
 * The WebAssembly canonical engine, loaded when first wanted rather than by
 * `import('jobhook')`: its module (~28 kB of base64) and its glue were a sixth of what a
 * cold import compiled. Until it is loaded the JavaScript engine answers, with the same
 * bytes, flags and errors (test/core/canonical/differential.test.ts); a verifier starts the
 * load when it is made, so the first delivery finds it loaded, and the verification
 * workers wait for it before their first body.
 */
import type { WasmEngine } from './engine.js';

let engine: WasmEngine | null | undefined;
let loading: Promise<WasmEngine | undefined> | undefined;

/** The engine when it is loaded (starting the load the first time), else undefined: use the JS engine. */
export function wasmEngine(): WasmEngine | undefined {
  if (engine === undefined) void loadWasmEngine();
  return engine ?? undefined;
}

/** Loads the engine once; resolves to it, or to undefined where WebAssembly cannot run it (then the JS engine is used). */
export function loadWasmEngine(): Promise<WasmEngine | undefined> {
  loading ??= import('./engine.js').then(
    (m) => (engine = m.wasmEngine() ?? null) ?? undefined,
    () => {
      engine = null;
      return undefined;
    },
  );
  return loading;
}
