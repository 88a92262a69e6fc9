/**
 * Redis idempotency store (optional peer dependency: ioredis).
 * @packageDocumentation
 */
export { RedisIdempotencyStore, type RedisStoreOptions } from './lib/idempotency/redis.js';
export type { ClaimOptions, ClaimResult, CompleteOptions, IdempotencyStore } from './lib/idempotency/types.js';

/**
 * @example
 * ```ts
 * import { RedisIdempotencyStore } from 'jobhook/redis';
 * import { webhookReceiver } from 'jobhook/express';
 *
 * const store = new RedisIdempotencyStore({ url: process.env.REDIS_URL! }); // or { client: existingIoredisClient }
 * app.post('/webhooks/gateway', webhookReceiver({ publicKey, store, onEvent }));
 * ```
 */
export type RedisStoreExample = never;
