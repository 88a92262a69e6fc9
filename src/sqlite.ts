/**
 * SQLite idempotency store on the runtime's own SQLite (node:sqlite on Node 22.13+ and
 * Deno, bun:sqlite on Bun): durable on one machine, shared by its processes, no server.
 * @packageDocumentation
 */
export {
  SqliteIdempotencyStore,
  type SqlitePurgeOptions,
  type SqliteStoreOptions,
  type SqliteTransactionClient,
  type SqliteValue,
} from './lib/stores/sqlite.js';
export type { ClaimOptions, ClaimResult, CompleteOptions, IdempotencyStore } from './lib/jobs/store.js';
