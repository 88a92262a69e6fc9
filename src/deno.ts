/**
 * Idempotency store on Deno KV (`Deno.openKv()`): `DenoKvIdempotencyStore`.
 * Runtime-neutral: no `node:` import. docs/store-deno.md.
 * @packageDocumentation
 */
export { DenoKvIdempotencyStore, type DenoKvLike, type DenoKvStoreOptions } from './lib/stores/deno-kv.js';
export type { ClaimOptions, ClaimResult, CompleteOptions, IdempotencyStore } from './lib/jobs/store.js';
