/**
 * Issue 10 on real servers: a claim whose reply was lost is undone as soon as the store
 * answers again; a handler slower than its lease keeps its job; a completion the store
 * did not take is recorded later, and the job is a duplicate here meanwhile; the Redis
 * store warns when a restart would forget completed jobs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createReceiver, MemoryIdempotencyStore, type ReceiverAnswer } from '../../src/index.js';
import { RedisIdempotencyStore } from '../../src/redis.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';
import { availability, startRedis, type FaultableServer } from '../helpers/servers.js';
import { recorder } from '../adapters/receiver-table.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const publicKey = publicPem(2048);
const code = (a: ReceiverAnswer) =>
  `${a.status} ${(JSON.parse(a.body) as { status?: string; error?: { code: string } }).status ?? (JSON.parse(a.body) as { error: { code: string } }).error.code}`;

describe('a handler slower than its lease (memory store)', () => {
  it('keeps its job: the lease is renewed while it runs, so a duplicate arriving later gets 503, and it runs once', async () => {
    const store = new MemoryIdempotencyStore();
    let runs = 0;
    const receive = createReceiver({
      publicKey,
      store,
      leaseMs: 300,
      log: {},
      onEvent: async () => {
        runs++;
        await sleep(1200);
      },
    });
    const d = signed(jobId('slow'));
    const first = receive({ body: d.body, headers: d.headers });
    // Four leases later, the first delivery is still working on it.
    await sleep(900);
    expect(code(await receive({ body: d.body, headers: d.headers }))).toBe('503 IN_PROGRESS');
    expect(code(await first)).toBe('200 processed');
    expect(code(await receive({ body: d.body, headers: d.headers }))).toBe('200 duplicate');
    expect(runs).toBe(1);
  });

  it('without renewals (a store lacking renew()) it says so at construction', () => {
    const { lines, log } = recorder();
    const plain = new MemoryIdempotencyStore();
    const store = {
      claim: plain.claim.bind(plain),
      complete: plain.complete.bind(plain),
      release: plain.release.bind(plain),
    };
    createReceiver({ publicKey, store, log, onEvent: () => undefined });
    expect(lines.warn.join('\n')).toMatch(/no renew\(\).*may run twice/);
  });
});

describe.skipIf(availability('redis').skip)('a Redis that stops answering for a while', () => {
  let server: FaultableServer;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    await server.resume().catch(() => undefined);
    await server.destroy();
  });

  it('a claim whose reply was lost is released by its token as soon as Redis answers: the retry is processed, not blocked for the lease', async () => {
    const store = new RedisIdempotencyStore({ url: server.url, operationTimeoutMs: 300, log: {} });
    const { lines, log } = recorder();
    let runs = 0;
    // A long lease: were the lost claim left to expire, the retry below would get 503 for 60 s.
    const receive = createReceiver({ publicKey, store, leaseMs: 60_000, log, onEvent: () => void runs++ });
    const d = signed(jobId('lost-claim'));
    await store.claim('warm-up-connection', { leaseMs: 1000 });
    await server.pause();
    // The claim is sent, Redis holds it unanswered; the receiver gives up: 503.
    expect(code(await receive({ body: d.body, headers: d.headers }))).toBe('503 STORE_UNAVAILABLE');
    expect(receive.pending).toBe(1);
    await server.resume();
    // Redis now runs the queued claim (written!), then the release by token.
    for (let k = 0; k < 50 && receive.pending > 0; k++) await sleep(50);
    expect(receive.pending).toBe(0);
    expect(code(await receive({ body: d.body, headers: d.headers }))).toBe('200 processed');
    expect(runs).toBe(1);
    expect(lines.error.join('\n')).toContain('failed to claim');
    await store.close();
  });

  it('another instance sees the job free again once the unconfirmed claim is undone', async () => {
    const a = new RedisIdempotencyStore({ url: server.url, operationTimeoutMs: 300, log: {} });
    const b = new RedisIdempotencyStore({ url: server.url, operationTimeoutMs: 300, log: {} });
    const first = createReceiver({ publicKey, store: a, leaseMs: 60_000, log: {}, onEvent: () => undefined });
    let runs = 0;
    const second = createReceiver({
      publicKey,
      store: b,
      leaseMs: 60_000,
      log: {},
      onEvent: () => void runs++,
    });
    const d = signed(jobId('lost-claim-2'));
    await a.claim('warm-up-a', { leaseMs: 1000 });
    await b.claim('warm-up-b', { leaseMs: 1000 });
    await server.pause();
    expect(code(await first({ body: d.body, headers: d.headers }))).toBe('503 STORE_UNAVAILABLE');
    await server.resume();
    for (let k = 0; k < 50 && first.pending > 0; k++) await sleep(50);
    expect(code(await second({ body: d.body, headers: d.headers }))).toBe('200 processed');
    expect(runs).toBe(1);
    await a.close();
    await b.close();
  });

  it('a completion Redis does not take is answered 200, a duplicate here meanwhile, and recorded once Redis answers', async () => {
    const store = new RedisIdempotencyStore({ url: server.url, operationTimeoutMs: 300, log: {} });
    const heard: string[] = [];
    let runs = 0;
    const receive = createReceiver({
      publicKey,
      store,
      log: {},
      onError: (_e, c) => void heard.push(c.stage),
      onEvent: async () => {
        runs++;
        // The store goes away right as the handler finishes.
        await server.pause();
      },
    });
    const id = jobId('lost-complete');
    const d = signed(id);
    expect(code(await receive({ body: d.body, headers: d.headers }))).toBe('200 processed');
    expect(heard).toEqual(['complete']);
    expect(receive.pending).toBe(1);
    // Redis still paused: this instance knows the job is done.
    expect(code(await receive({ body: d.body, headers: d.headers }))).toBe('200 duplicate');
    await server.resume();
    for (let k = 0; k < 50 && receive.pending > 0; k++) await sleep(50);
    expect(receive.pending).toBe(0);
    const other = new RedisIdempotencyStore({ url: server.url, log: {} });
    expect(await other.claim(id, { leaseMs: 1000 })).toEqual({ status: 'completed' });
    expect(runs).toBe(1);
    await other.close();
    await store.close();
  });
});

describe.skipIf(availability('redis').skip)('Redis persistence check', () => {
  it('warns once when the server keeps no append-only file; stays quiet when it does', async () => {
    const volatile = await startRedis();
    const durable = await startRedis({ appendOnly: true });
    try {
      for (const [server, expected] of [
        [volatile, 1],
        [durable, 0],
      ] as const) {
        const { lines, log } = recorder();
        const store = new RedisIdempotencyStore({ url: server.url, log });
        for (let k = 0; k < 3; k++) await store.claim(`p-${k}`, { leaseMs: 1000 });
        await sleep(100);
        expect(lines.warn.filter((l) => l.includes('appendonly no'))).toHaveLength(expected);
        await store.close();
      }
    } finally {
      await volatile.destroy();
      await durable.destroy();
    }
  });
});
