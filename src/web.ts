/**
 * jobhook for runtimes with the Fetch API and WebCrypto (Next.js route handlers,
 * Hono, Bun, Deno, Cloudflare Workers). No node:* import.
 * @packageDocumentation
 */
import { createWebVerifierCore, type WebVerifier, type WebVerifierOptions } from './lib/verify/web-verifier.js';

export type { WebVerifier, WebVerifierOptions } from './lib/verify/web-verifier.js';
export type { WebPublicKeyInput } from './lib/crypto/web.js';
export type { VerifiedDelivery } from './lib/verify/flow.js';
export type { JobCompletedEvent, JobFailedEvent, JobSucceededEvent } from './lib/event.js';
export * from './lib/errors.js';

/**
 * Same semantics as `createVerifier` from `jobhook`, on WebCrypto: `verify` returns a promise.
 *
 * @example
 * ```ts
 * import { createWebVerifier } from 'jobhook/web';
 * const verifier = createWebVerifier({ publicKey: env.GATEWAY_PUBLIC_KEY });
 * const { event } = await verifier.verify(new Uint8Array(await request.arrayBuffer()), request.headers);
 * ```
 */
export function createWebVerifier(options: WebVerifierOptions): WebVerifier {
  return createWebVerifierCore(options);
}
