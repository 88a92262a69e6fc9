/**
 * jobhook for runtimes with the Fetch API and WebCrypto (Next.js route handlers,
 * Hono, Bun, Deno, Cloudflare Workers). No node:* import.
 * @packageDocumentation
 */
import { createWebVerifierCore, type WebVerifier, type WebVerifierOptions } from './lib/verify/web-verifier.js';
import { createHandler, type WebhookHandlerOptions } from './lib/adapters/web.js';

export type { WebVerifier, WebVerifierOptions } from './lib/verify/web-verifier.js';
export type { WebPublicKeyInput } from './lib/crypto/web.js';
export type { VerifiedDelivery } from './lib/verify/core.js';
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

export type { WebhookHandlerOptions } from './lib/adapters/web.js';
export type { EventContext, ReceiverFlowOptions } from './lib/receive/flow.js';
export type { HttpAnswer, ReceiverErrorCode } from './lib/receive/answers.js';
export { MemoryIdempotencyStore, type MemoryStoreOptions } from './lib/idempotency/memory.js';
export type { ClaimOptions, ClaimResult, CompleteOptions, IdempotencyStore } from './lib/idempotency/types.js';

/**
 * The complete receiver as a Fetch API handler, `(request: Request) => Promise<Response>`,
 * with the same answers as `webhookReceiver` from `jobhook/express`. Uses WebCrypto only.
 *
 * @example
 * ```ts
 * // app/api/webhooks/gateway/route.ts (Next.js App Router)
 * import { createWebhookHandler } from 'jobhook/web';
 *
 * export const POST = createWebhookHandler({
 *   publicKey: process.env.GATEWAY_PUBLIC_KEY!,
 *   onEvent: async (event) => { await save(event); },
 * });
 * ```
 */
export function createWebhookHandler(options: WebhookHandlerOptions): (request: Request) => Promise<Response> {
  return createHandler(options);
}
