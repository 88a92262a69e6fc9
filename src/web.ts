/**
 * jobhook for runtimes with the Fetch API and WebCrypto (Next.js route handlers,
 * Hono, Bun, Deno, Cloudflare Workers). No node:* import. Errors, stores and shared
 * types come from `jobhook`.
 * @packageDocumentation
 */
import { createFetchReceiver, type WebReceiverOptions } from './lib/adapters/web.js';
import type { ReceiverControls } from './lib/adapters/controls.js';
import { createWebVerifierCore, type WebVerifier, type WebVerifierOptions } from './lib/verify/web-verifier.js';
import { checkOptionNames, WEB_VERIFIER_OPTIONS } from './lib/option-names.js';

export type { WebVerifier, WebVerifierOptions } from './lib/verify/web-verifier.js';
export type { WebReceiverOptions } from './lib/adapters/web.js';
export type { WebPublicKeyInput } from './lib/crypto/web.js';

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
  const { verify } = createWebVerifierCore(options);
  return { verify };
}

/**
 * The complete receiver as a Fetch API handler, `(request: Request) => Promise<Response>`,
 * with the same answers as `createReceiver` from `jobhook/express`. No `node:` import: the
 * runtime's node:crypto where a probe shows it works, else WebAssembly or BigInt RSA and
 * WebCrypto hashes.
 *
 * @example
 * ```ts
 * // app/api/webhooks/gateway/route.ts (Next.js App Router)
 * import { createReceiver } from 'jobhook/web';
 *
 * export const POST = createReceiver({
 *   publicKey: process.env.GATEWAY_PUBLIC_KEY!,
 *   onEvent: async (event) => { await save(event); },
 * });
 * ```
 */
export function createReceiver<Tx = unknown>(options: WebReceiverOptions<Tx>): ((request: Request) => Promise<Response>) & ReceiverControls {
  return createFetchReceiver(options);
}

/** @deprecated Renamed {@link createVerifier}; this alias goes at 1.0. */
export const createWebVerifier: typeof createVerifier = createVerifier;
/** @deprecated Renamed {@link createReceiver}; this alias goes at 1.0. */
export const createWebhookHandler: typeof createReceiver = createReceiver;
/** @deprecated Renamed {@link WebReceiverOptions}. */
export type WebhookHandlerOptions = WebReceiverOptions;
