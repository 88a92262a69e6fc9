/**
 * jobhook for runtimes with the Fetch API and WebCrypto (Next.js route handlers,
 * Hono, Bun, Deno, Cloudflare Workers). No node:* import. Errors, stores and shared
 * types come from `jobhook`.
 * @packageDocumentation
 */
import {
  createWebVerifierCore,
  WEB_VERIFIER_OPTIONS,
  type WebVerifier,
  type WebVerifierOptions,
} from './lib/runtime/verify/web-verifier.js';
import { checkOptionNames } from './lib/base/options.js';
import { provideRsaWasmModule as provideRsaModule } from './lib/runtime/crypto/rsa-wasm-engine.js';

export type { WebVerifier, WebVerifierOptions } from './lib/runtime/verify/web-verifier.js';
export type { WebReceiverOptions } from './lib/adapters/web.js';
export type { WebPublicKeyInput } from './lib/runtime/crypto/web.js';

/**
 * Same as `createVerifier` from `jobhook`, on WebCrypto: `verify` returns a promise.
 *
 * @example
 * ```ts
 * import { createVerifier } from 'jobhook/web';
 * const verifier = createVerifier({ publicKey: env.GATEWAY_PUBLIC_KEY });
 * const { event } = await verifier.verify(new Uint8Array(await request.arrayBuffer()), request.headers);
 * ```
 */
export function createVerifier(options: WebVerifierOptions): WebVerifier {
  checkOptionNames(options, WEB_VERIFIER_OPTIONS);
  const { verify, ready } = createWebVerifierCore(options);
  return { verify, ready };
}

/**
 * Gives jobhook the WebAssembly RSA module (`jobhook/rsa.wasm`) already compiled, for
 * hosts that refuse to compile WebAssembly from bytes (Cloudflare Workers: "Wasm code
 * generation disallowed by embedder"). Without it such a host opens signatures with
 * BigInt arithmetic (on workerd about 1.2× the WebAssembly operation's time; on Node's
 * V8 2.5–3×); elsewhere jobhook compiles its embedded copy itself when it needs it, and
 * this call is not needed. Call it at the top of the
 * module, before the first delivery. TypeError when the module is not jobhook's.
 *
 * @example
 * ```ts
 * import { createReceiver, provideRsaWasmModule } from 'jobhook/web';
 * import rsaWasm from 'jobhook/rsa.wasm'; // wrangler compiles .wasm imports
 * provideRsaWasmModule(rsaWasm);
 * ```
 */
export function provideRsaWasmModule(module: WebAssembly.Module): void {
  provideRsaModule(module);
}
export { createFetchReceiver as createReceiver } from './lib/adapters/web.js';
