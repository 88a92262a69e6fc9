/**
 * PostgreSQL idempotency store (optional peer dependency: pg).
 * @packageDocumentation
 */
export { PostgresIdempotencyStore, type PostgresStoreOptions } from './lib/idempotency/postgres.js';
export type { ClaimOptions, ClaimResult, CompleteOptions, IdempotencyStore } from './lib/idempotency/types.js';

/**
 * @example
 * ```ts
 * import { PostgresIdempotencyStore } from 'jobhook/postgres';
 *
 * const store = new PostgresIdempotencyStore({ connectionString: process.env.DATABASE_URL! }); // or { pool }
 * await store.migrate(); // once at startup; safe to run concurrently
 * setInterval(() => store.purgeExpired().catch(console.error), 3_600_000).unref();
 * ```
 */
export type PostgresStoreExample = never;
