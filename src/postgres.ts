/**
 * PostgreSQL idempotency store (optional peer dependency: pg).
 * @packageDocumentation
 */
export { PostgresIdempotencyStore, type PostgresStoreOptions } from './lib/stores/postgres.js';
export type { ClaimOptions, ClaimResult, CompleteOptions, IdempotencyStore } from './lib/jobs/store.js';
