/**
 * Idempotency store for Cloudflare Workers on Durable Objects (SQLite-backed storage):
 * `DurableObjectIdempotencyStore`, and the Durable Object class your Worker exports,
 * `JobhookIdempotencyObject`. Runtime-neutral: no `node:` import. docs/store-cloudflare.md.
 * @packageDocumentation
 */
export {
  DurableObjectIdempotencyStore,
  type DurableObjectNamespaceLike,
  type DurableObjectStoreOptions,
} from './lib/stores/durable-object-store.js';
export { JobhookIdempotencyObject, type DurableObjectStateLike } from './lib/stores/durable-object.js';
export type { ClaimOptions, ClaimResult, CompleteOptions, IdempotencyStore } from './lib/jobs/store.js';
