/**
 * A Redis the store knows is down (its connection failed and has not come back) is
 * answered at once, 503 STORE_UNAVAILABLE naming the server and the cause, while ioredis
 * reconnects in the background: not after operationTimeoutMs for every delivery. Once
 * Redis is back, the store serves again. A real throwaway Redis, stopped and started.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/errors.js';
import { RedisIdempotencyStore } from '../../src/redis.js';
import { createReceiver } from '../../src/index.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';
import { availability, startRedis, type FaultableServer } from '../helpers/servers.js';

const local = availability('redis');
const servers: FaultableServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.destroy()));
});

describe.skipIf(local.skip)('RedisIdempotencyStore, Redis known down', () => {
  it('answers each operation at once while it reconnects, and serves again when Redis is back', async () => {
    const server = await startRedis();
    servers.push(server);
    // A deadline far past the test's own timeout: an operation that waits for it fails the test.
    const store = new RedisIdempotencyStore({ url: server.url, operationTimeoutMs: 60_000, log: false });
    const receive = createReceiver({
      publicKey: publicPem(2048),
      store,
      log: false,
      onEvent: () => undefined,
    });
    try {
      await store.ready();
      expect((await receive(signed(jobId('redis-up')))).status).toBe(200);
      await server.stop();
      // The first operation after the stop meets the closed connection (ioredis reports it).
      await expect(store.claim(jobId('redis-first'), { leaseMs: 5000 })).rejects.toBeInstanceOf(
        StoreUnavailableError,
      );
      for (let k = 0; k < 20; k++) {
        const err = await store.claim(jobId('redis-down'), { leaseMs: 5000 }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(StoreUnavailableError);
        expect((err as Error).message).toContain(server.url.replace(/^redis:\/\//, '').replace(/\/.*$/, ''));
        const answer = await receive(signed(jobId('redis-down')));
        expect(answer.status).toBe(503);
      }
      await server.start();
      await store.ready();
      expect((await receive(signed(jobId('redis-back')))).status).toBe(200);
    } finally {
      await receive.close();
      await store.close();
    }
  }, 30_000);
});
