import { RedisIdempotencyStore } from '../../src/redis.js';
import { LAPSED_CLAIM_KEEP_MS } from '../../src/lib/jobs/store.js';
import { availability, startRedis } from '../helpers/servers.js';
import { serverStoreSuite } from './server-store-suite.js';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';

const run = `${process.pid}-${Date.now()}`;
const local = availability('redis');

serverStoreSuite({
  name: 'Redis',
  url: inject('redisUrl'),
  skipReason: local.skip ? local.reason : undefined,
  make: async (url, options) =>
    new RedisIdempotencyStore({
      url,
      keyPrefix: `jobhook-test:${run}:`,
      pendingKey: `jobhook-test-pending:${run}`,
      log: {},
      ...options,
    }),
  throwaway: startRedis,
});

describe.skipIf(inject('redisUrl') === '')('RedisIdempotencyStore specifics', () => {
  const client = new Redis(inject('redisUrl'));
  afterAll(async () => {
    await client.quit();
  });

  it("keeps its keys under the prefix, the token, fence and lease end in the value (on Redis's clock) and LAPSED_CLAIM_KEEP_MS (24 h) beyond it as TTL, a release as long, on a client you pass (left open by close())", async () => {
    const prefix = `jobhook-own:${run}:`;
    const store = new RedisIdempotencyStore({ client, keyPrefix: prefix });
    const c = await store.claim('j1', { leaseMs: 30_000 });
    if (c.status !== 'acquired') throw new Error(c.status);
    const [seconds, micros] = await client.time();
    const redisNow = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    const [, token, fence, leaseEnd] =
      /^held:([\w-]+):(\d+):(\d+):$/.exec((await client.get(`${prefix}j1`)) ?? '') ?? [];
    expect(token).toBe(c.token);
    expect(Number(fence)).toBe(c.fence);
    expect(Number(leaseEnd) - redisNow).toBeGreaterThan(25_000);
    expect(Number(leaseEnd) - redisNow).toBeLessThanOrEqual(30_000);
    const ttl = await client.pttl(`${prefix}j1`);
    expect(ttl).toBeGreaterThan(LAPSED_CLAIM_KEEP_MS + 25_000);
    expect(ttl).toBeLessThanOrEqual(LAPSED_CLAIM_KEEP_MS + 30_000);
    const r = await store.claim('j3', { leaseMs: 30_000 });
    if (r.status !== 'acquired') throw new Error(r.status);
    expect(await store.release('j3', r.token)).toBe(true);
    const [, releasedBy, releasedFence, keepEnd, tainted] =
      /^released:([\w-]+):(\d+):(\d+):([01])$/.exec((await client.get(`${prefix}j3`)) ?? '') ?? [];
    expect([releasedBy, Number(releasedFence), tainted]).toEqual([r.token, r.fence, '0']);
    expect(Number(keepEnd) - redisNow).toBeGreaterThan(LAPSED_CLAIM_KEEP_MS - 5_000);
    expect(await client.pttl(`${prefix}j3`)).toBeGreaterThan(LAPSED_CLAIM_KEEP_MS - 5_000);
    await store.complete('j1', c.token, { retainMs: 90_000, fence: c.fence });
    const [, doneBy, doneFence, until] =
      /^done:([\w-]+):(\d+):(\d+)$/.exec((await client.get(`${prefix}j1`)) ?? '') ?? [];
    expect([doneBy, Number(doneFence)]).toEqual([c.token, c.fence]);
    expect(Number(until) - redisNow).toBeGreaterThan(85_000);
    expect(await client.pttl(`${prefix}j1`)).toBeGreaterThan(85_000);
    await store.close();
    expect(client.status).toBe('ready');
  });

  it('a claim written by an earlier version (claim:<token>, the lease as TTL) holds until its TTL and answers to its token', async () => {
    const prefix = `jobhook-legacy:${run}:`;
    const store = new RedisIdempotencyStore({ client, keyPrefix: prefix, log: {} });
    await client.set(`${prefix}old`, 'claim:legacy-token-1', 'PX', 30_000);
    const seen = await store.claim('old', { leaseMs: 10_000, takeoverGraceMs: 1_000 });
    expect(seen.status).toBe('in_progress');
    if (seen.status === 'in_progress') expect(seen.retryAfterMs).toBeGreaterThan(25_000);
    expect(await store.renew('old', 'legacy-token-1', { leaseMs: 10_000 })).toBe('renewed');
    expect(await store.complete('old', 'legacy-token-1', { retainMs: 60_000 })).toBe('completed');
    expect(await store.claim('old', { leaseMs: 10_000 })).toEqual({ status: 'completed' });
    await client.set(`${prefix}old2`, 'claim:legacy-token-2', 'PX', 30_000);
    expect(await store.release('old2', 'legacy-token-2')).toBe(true);
    // A completion written by an earlier version ('done', no token): completed for everyone.
    await client.set(`${prefix}old3`, 'done', 'PX', 30_000);
    expect(await store.claim('old3', { leaseMs: 10_000 })).toEqual({ status: 'completed' });
    expect(await store.complete('old3', 'any-token-3', { retainMs: 60_000 })).toBe('completed');
  });

  it('a fencing counter that was lost (evicted, reset) never hands a takeover a number at or below the claim it supersedes, nor a claim after a release', async () => {
    const prefix = `jobhook-fence:${run}:`;
    const pendingKey = `jobhook-fence-pending:${run}`;
    const store = new RedisIdempotencyStore({ client, keyPrefix: prefix, pendingKey, log: {} });
    for (let i = 0; i < 5; i++) await store.claim(`warm-${i}`, { leaseMs: 10_000 });
    const first = await store.claim('j', { leaseMs: 50 });
    if (first.status !== 'acquired') throw new Error(first.status);
    expect(first.fence).toBeGreaterThanOrEqual(6);
    await client.del(`${pendingKey}:fence`);
    await new Promise((r) => setTimeout(r, 80));
    const taker = await store.claim('j', { leaseMs: 10_000 });
    expect(taker).toMatchObject({ status: 'acquired', fence: first.fence + 1, tookOver: true });
    if (taker.status !== 'acquired') throw new Error(taker.status);
    await client.del(`${pendingKey}:fence`);
    expect(await store.release('j', taker.token)).toBe(true);
    expect(await store.claim('j', { leaseMs: 10_000 })).toMatchObject({
      status: 'acquired',
      fence: taker.fence + 1,
      tookOver: true,
    });
    // The counter moved past the number handed out: the next job's number is larger still.
    expect(await store.claim('next', { leaseMs: 10_000 })).toMatchObject({
      status: 'acquired',
      fence: taker.fence + 2,
    });
  });

  it('survives SCRIPT FLUSH (EVALSHA falls back to EVAL)', async () => {
    const store = new RedisIdempotencyStore({ client, keyPrefix: `jobhook-flush:${run}:` });
    const c = await store.claim('j2', { leaseMs: 30_000 });
    if (c.status !== 'acquired') throw new Error(c.status);
    await client.script('FLUSH');
    expect(await store.release('j2', c.token)).toBe(true);
  });

  it('sends nothing on a client you pass until you ask (ready() or an operation): no PING racing your quit()', async () => {
    const own = new Redis(inject('redisUrl'), { lazyConnect: true });
    const store = new RedisIdempotencyStore({ client: own, keyPrefix: `jobhook-lazy:${run}:`, log: false });
    await new Promise((r) => setTimeout(r, 100));
    expect(own.status).toBe('wait'); // never connected: nothing was sent
    await store.ready();
    expect(own.status).toBe('ready');
    await own.quit();
  });

  it('needs exactly one of client or url', () => {
    expect(() => new RedisIdempotencyStore({})).toThrow(TypeError);
    expect(() => new RedisIdempotencyStore({ client, url: 'redis://127.0.0.1' })).toThrow(/exactly one/);
  });

  it('refuses a pendingKey that a job id could name: the key itself or its ":params" hash or ":fence" counter under keyPrefix', () => {
    expect(() => new RedisIdempotencyStore({ client, keyPrefix: 'app:', pendingKey: 'app:pending' })).toThrow(
      /keyPrefix/,
    );
    // "app:pending:params" is the key of job id "params" under prefix "app:pending:".
    expect(
      () => new RedisIdempotencyStore({ client, keyPrefix: 'app:pending:', pendingKey: 'app:pending' }),
    ).toThrow(/:params/);
    expect(
      () => new RedisIdempotencyStore({ client, keyPrefix: 'app:pending:f', pendingKey: 'app:pending' }),
    ).toThrow(/:fence/);
    expect(
      () => new RedisIdempotencyStore({ client, keyPrefix: 'app:job:', pendingKey: 'app:pending' }),
    ).not.toThrow();
  });
});
