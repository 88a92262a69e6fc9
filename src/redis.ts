/**
 * Redis idempotency store (optional peer dependency: ioredis).
 * @packageDocumentation
 */
export { RedisIdempotencyStore, type RedisStoreOptions } from './lib/idempotency/redis.js';
export type { ClaimOptions, ClaimResult, CompleteOptions, IdempotencyStore } from './lib/idempotency/types.js';
