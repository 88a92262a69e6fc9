/**
 * Redis idempotency store (optional peer dependency: ioredis).
 * @packageDocumentation
 */
export { RedisIdempotencyStore, type RedisStoreOptions } from './lib/stores/redis.js';
export type { ClaimOptions, ClaimResult, CompleteOptions, IdempotencyStore } from './lib/jobs/store.js';
