/**
 * PostgreSQL idempotency store (optional peer dependency: pg).
 * @packageDocumentation
 */
export { PostgresIdempotencyStore, type PostgresStoreOptions } from './lib/idempotency/postgres.js';
export type { ClaimOptions, ClaimResult, CompleteOptions, IdempotencyStore } from './lib/idempotency/types.js';
