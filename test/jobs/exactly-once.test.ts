/**
 * Issue 37: the job protocol's second round of edges, one test per point, on real
 * Redis and PostgreSQL servers (the shared ones, each test on keys and tables of its own).
 *
 * Point 1, one retention rule: every path that completes a job (receivers, the
 * reconciler, queue workers) keeps the completion at least the replay window plus the
 * tolerated skew past max(finished_at, completion), and a receiver refuses a shared runner
 * that keeps completions shorter. The stores read the test's clock (their `now` option),
 * so a replay 25 or 30 s later is a jump of the clock, not a wait.
 */
import pg from 'pg';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createReceiver, signDelivery, type IdempotencyStore } from '../../src/index.js';
import { createReconciler } from '../../src/gateway.js';
import { PostgresIdempotencyStore } from '../../src/postgres.js';
import { RedisIdempotencyStore } from '../../src/redis.js';
import { createJobRunner } from '../../src/lib/jobs/runner.js';
import type { JobResource } from '../../src/lib/gateway/client.js';
import { payloadText } from '../helpers/deliveries.js';
import { reports } from '../helpers/jobs.js';
import { startPgProxy, type PgProxy } from '../helpers/pg-proxy.js';
import { redisBinary, startRedis, type FaultableServer } from '../helpers/servers.js';
import { privatePem, publicPem } from '../helpers/keys.js';

let serial = 0;
const newId = (what: string) => `once-${what}-${process.pid}-${Date.now()}-${serial++}`;
const rfc3339 = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

/** The system clock, moved forward by the test. */
function movableClock() {
  let offset = 0;
  const now = () => Date.now() + offset;
  return {
    now,
    monotonic: () => performance.now() + offset,
    advance: (ms: number) => void (offset += ms),
  };
}

type StoreMaker = (now: () => number) => Promise<IdempotencyStore>;

const redisUrl = inject('redisUrl');
const databaseUrl = inject('databaseUrl');
const redis = redisUrl === '' ? undefined : new Redis(redisUrl, { lazyConnect: false });
const pool = databaseUrl === '' ? undefined : new pg.Pool({ connectionString: databaseUrl, max: 8 });
pool?.on('error', () => undefined);
const tables: string[] = [];
afterAll(async () => {
  for (const t of tables) await pool?.query(`DROP TABLE IF EXISTS ${t}`).catch(() => undefined);
  await pool?.end();
  redis?.disconnect();
});

const STORES: Array<[string, StoreMaker | undefined]> = [
  [
    'Redis',
    redis &&
      (async (now) =>
        new RedisIdempotencyStore({ client: redis, keyPrefix: `${newId('r')}:`, now, log: false })),
  ],
  [
    'PostgreSQL',
    pool &&
      (async (now) => {
        const table = `jobhook_once_${process.pid}_${serial++}`;
        tables.push(table);
        const s = new PostgresIdempotencyStore({ pool, table, now, log: false });
        await s.migrate();
        return s;
      }),
  ],
];

/** A finished job as the gateway gives it, and its webhook delivery signed with the same finished_at. */
function finishedJob(jobId: string, finishedAt: number) {
  const resource: JobResource = {
    public_id: jobId,
    status: 'success',
    feature: 'ocr',
    subfeature: 'ocr',
    provider: 'acme',
    created_at: '2026-11-21T10:00:00Z',
    finished_at: rfc3339(finishedAt),
    output: { text: 'ok' },
  };
  const delivery = signDelivery(
    payloadText(jobId).replace(/"finished_at":"[^"]+"/, `"finished_at":"${rfc3339(finishedAt)}"`),
    privatePem(2048),
  );
  return { resource, delivery, client: { getJob: async () => resource } };
}

describe.each(STORES)('point 1: one retention rule (%s)', (_name, makeStore) => {
  it.skipIf(makeStore === undefined)(
    'a receiver refuses a shared runner keeping completions shorter than its window plus skew',
    async () => {
      const clock = movableClock();
      const store = await makeStore!(clock.now);
      const runner = createJobRunner({ store, retainMs: 20_000, log: false }, clock);
      expect(() =>
        createReceiver({
          publicKey: publicPem(2048),
          runner,
          maxAgeSeconds: 20,
          maxFutureSkewSeconds: 8,
          onEvent: () => undefined,
        }),
      ).toThrow(/retainMs of at least 28000/);
    },
  );

  it.skipIf(makeStore === undefined)(
    'a completion the reconciler recovered (gateway 8 s ahead) is still a duplicate to a receiver 25 s later',
    async () => {
      const clock = movableClock();
      const store = await makeStore!(clock.now);
      const runs: string[] = [];
      const jobId = newId('skew');
      // The gateway's clock 8 s ahead: finished_at is in this clock's future.
      const job = finishedJob(jobId, clock.now() + 8_000);
      await store.trackPending!(jobId, { since: clock.now() - 60_000 });
      const reconciler = createReconciler({
        client: job.client,
        runner: createJobRunner({ store, retainMs: 20_000, log: false }, clock),
        maxAgeSeconds: 20,
        maxFutureSkewSeconds: 8,
        graceMs: 0,
        now: clock.now,
        onEvent: () => void runs.push('poll'),
      });
      expect((await reconciler.runOnce()).processed).toBe(1);
      clock.advance(25_000);
      const receiver = createReceiver({
        publicKey: publicPem(2048),
        runner: createJobRunner({ store, retainMs: 28_000, log: false }, clock),
        maxAgeSeconds: 20,
        maxFutureSkewSeconds: 8,
        now: clock.now,
        onEvent: () => void runs.push('webhook'),
      });
      const reply = await receiver(job.delivery);
      expect({ status: reply.status, body: JSON.parse(reply.body) }).toMatchObject({
        status: 200,
        body: { status: 'duplicate' },
      });
      expect(runs).toEqual(['poll']);
      await Promise.all([reconciler.stop(), receiver.close()]);
    },
  );

  it.skipIf(makeStore === undefined)(
    "a reconciler made with { store, retainMs: 20 s } keeps its completion for the receivers' default window: a replay 30 s later is a duplicate",
    async () => {
      const clock = movableClock();
      const store = await makeStore!(clock.now);
      const runs: string[] = [];
      const jobId = newId('noskew');
      const job = finishedJob(jobId, clock.now() - 1_000);
      await store.trackPending!(jobId, { since: clock.now() - 60_000 });
      const reconciler = createReconciler({
        client: job.client,
        store,
        retainMs: 20_000,
        graceMs: 0,
        now: clock.now,
        log: false,
        onEvent: () => void runs.push('poll'),
      });
      expect((await reconciler.runOnce()).processed).toBe(1);
      clock.advance(30_000);
      const receiver = createReceiver({
        publicKey: publicPem(2048),
        runner: createJobRunner({ store, retainMs: 40_000, log: false }, clock),
        maxAgeSeconds: 40,
        maxFutureSkewSeconds: 0,
        now: clock.now,
        onEvent: () => void runs.push('webhook'),
      });
      const reply = await receiver(job.delivery);
      expect(JSON.parse(reply.body)).toMatchObject({ status: 'duplicate' });
      expect(runs).toEqual(['poll']);
      await Promise.all([reconciler.stop(), receiver.close()]);
    },
  );
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(databaseUrl === '')('points 3, 6, 7: how a run ends (PostgreSQL)', () => {
  const admin = new pg.Pool({ connectionString: databaseUrl, max: 4 });
  admin.on('error', () => undefined);
  const table = `jobhook_once_tx_${process.pid}`;
  const effects = `jobhook_once_fx_${process.pid}`;
  const proxies: PgProxy[] = [];
  const stores: PostgresIdempotencyStore[] = [];
  const storeAt = (url: string, transactional: boolean) => {
    const s = new PostgresIdempotencyStore({ connectionString: url, table, transactional, log: false });
    stores.push(s);
    return s;
  };
  const rows = async (id: string) =>
    (await admin.query(`SELECT job_id FROM ${effects} WHERE job_id = $1`, [id])).rowCount;
  beforeAll(async () => {
    await new PostgresIdempotencyStore({ pool: admin, table }).migrate();
    await admin.query(`CREATE TABLE IF NOT EXISTS ${effects} (job_id text PRIMARY KEY)`);
  });
  afterAll(async () => {
    await Promise.all(proxies.map((p) => p.close()));
    await Promise.race([Promise.all(stores.map((s) => s.close())), sleep(2000)]);
    await admin.query(`DROP TABLE IF EXISTS ${effects}`).catch(() => undefined);
    await admin.query(`DROP TABLE IF EXISTS ${table}`).catch(() => undefined);
    await admin.end();
  });

  it(
    'point 3: with 1.5 s round trips (lease 5 s, a 0.5 s handler) the transactional completion commits at the first attempt, 0 reports',
    { timeout: 60_000 },
    async () => {
      const proxy = await startPgProxy(databaseUrl);
      proxies.push(proxy);
      void proxy.arm({ match: /./, fault: { delayMs: 1_500 }, times: 1_000_000 });
      const seen = reports();
      const runner = createJobRunner({
        store: storeAt(proxy.url, true),
        leaseMs: 5_000,
        log: false,
        onError: seen.onError,
      });
      const id = newId('slow');
      const result = await runner.run(id, async (claim) => {
        await (claim.transaction as pg.PoolClient).query(`INSERT INTO ${effects} (job_id) VALUES ($1)`, [id]);
        await sleep(500);
      });
      expect(result).toEqual({ kind: 'processed' });
      expect(await rows(id)).toBe(1);
      expect(seen.stages()).toEqual([]);
      await runner.close();
    },
  );

  it(
    'point 4: a statement of the handler in context.transaction is not cut at operationTimeoutMs (store made from connectionString)',
    { timeout: 30_000 },
    async () => {
      const store = new PostgresIdempotencyStore({
        connectionString: databaseUrl,
        table,
        transactional: true,
        operationTimeoutMs: 1_000,
        log: false,
      });
      stores.push(store);
      const runner = createJobRunner({ store, leaseMs: 5_000, log: false });
      const id = newId('long-statement');
      const result = await runner.run(id, async (claim) => {
        const tx = claim.transaction as pg.PoolClient;
        await tx.query('SELECT pg_sleep(1.5)');
        await tx.query(`INSERT INTO ${effects} (job_id) VALUES ($1)`, [id]);
      });
      expect(result).toEqual({ kind: 'processed' });
      expect(await rows(id)).toBe(1);
      await runner.close();
    },
  );

  it('point 5: a transactional store refuses a pool of one connection at construction, naming the minimum', () => {
    const one = new pg.Pool({ connectionString: databaseUrl, max: 1 });
    expect(() => new PostgresIdempotencyStore({ pool: one, table, transactional: true })).toThrow(
      /at least 2 connections.*max 1/,
    );
    // Not transactional: one connection is enough (no transaction beside the renewals).
    expect(() => new PostgresIdempotencyStore({ pool: one, table, log: false })).not.toThrow();
    return one.end();
  });

  it(
    'point 7: a handler that stopped on its aborted signal is not recorded processed though a later renewal confirmed the lease: the retry runs the rest, reported',
    { timeout: 30_000 },
    async () => {
      const proxy = await startPgProxy(databaseUrl);
      proxies.push(proxy);
      const seen = reports();
      const runner = createJobRunner({
        store: storeAt(proxy.url, false),
        leaseMs: 1_500,
        log: false,
        onError: seen.onError,
      });
      const id = newId('abort');
      // The first renewal held 1.4 s: the lease is not confirmed before the self-fence (1.2 s).
      const held = proxy.arm({
        match: /DO UPDATE SET expires_at = EXCLUDED\.expires_at/,
        fault: { delayMs: 1_400 },
      });
      const done: number[] = [];
      const first = await runner.run(id, async (claim) => {
        for (let item = 1; item <= 10; item++) {
          if (claim.signal.aborted) break;
          done.push(item);
          await sleep(150);
        }
        await held;
        // Later renewals confirm the lease again before the handler returns.
        await sleep(1_200);
      });
      expect(done.length).toBeLessThan(10);
      expect(first.kind).toBe('claim_lost');
      const second = await runner.run(id, async () => {
        for (let item = done.length + 1; item <= 10; item++) done.push(item);
      });
      expect(second).toEqual({ kind: 'processed' });
      expect(done).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      expect(seen.stages()).toContain('superseded');
      await runner.close();
    },
  );

  it(
    'point 6: a hung handler is given up at its deadline: the transaction ends, the claim is released, the job named, the retry reported',
    { timeout: 30_000 },
    async () => {
      const app = `jobhook_hung_${process.pid}`;
      const url = new URL(databaseUrl);
      url.searchParams.set('application_name', app);
      const seen = reports();
      const errors: string[] = [];
      const runner = createJobRunner({
        store: storeAt(url.toString(), true),
        leaseMs: 1_000,
        handlerTimeoutMs: 2_000,
        log: { error: (m: string) => void errors.push(m) },
        onError: seen.onError,
      });
      const id = newId('hung');
      const first = await runner.run(id, async (claim) => {
        await (claim.transaction as pg.PoolClient).query(`INSERT INTO ${effects} (job_id) VALUES ($1)`, [id]);
        await new Promise(() => undefined); // never settles
      });
      expect(first.kind).toBe('handler_failed');
      expect(errors.join('\n')).toContain(`job ${id} did not settle within 2000 ms`);
      const open = await admin.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND state LIKE 'idle in transaction%'`,
        [app],
      );
      expect(open.rows[0].n).toBe(0);
      expect(await rows(id)).toBe(0);
      const second = await runner.run(id, async (claim) => {
        await (claim.transaction as pg.PoolClient).query(`INSERT INTO ${effects} (job_id) VALUES ($1)`, [id]);
      });
      expect(second).toEqual({ kind: 'processed' });
      expect(await rows(id)).toBe(1);
      expect(seen.stages()).toEqual(['handler', 'superseded']);
      await runner.close();
    },
  );
});

describe.skipIf(redisBinary() === undefined)(
  'point 2: a Redis that may evict completion marks (a throwaway server)',
  () => {
    let server: FaultableServer;
    let admin: Redis;
    beforeAll(async () => {
      server = await startRedis();
      admin = new Redis(server.url);
    });
    afterAll(async () => {
      admin?.disconnect();
      await server?.destroy();
    });

    it(
      'ready() refuses maxmemory with a volatile-lru policy (naming maxmemory-policy noeviction), the first operation logs it, and noeviction is accepted',
      { timeout: 30_000 },
      async () => {
        await admin.config('SET', 'maxmemory', '8mb');
        await admin.config('SET', 'maxmemory-policy', 'volatile-lru');
        const errors: string[] = [];
        const store = new RedisIdempotencyStore({
          url: server.url,
          log: { error: (m: string) => void errors.push(m) },
        });
        await expect(store.ready()).rejects.toThrow(
          /maxmemory-policy volatile-lru.*Set maxmemory-policy noeviction/,
        );
        expect(errors.join('\n')).toMatch(/maxmemory-policy volatile-lru/);
        await admin.config('SET', 'maxmemory-policy', 'noeviction');
        await expect(store.ready()).resolves.toBeUndefined();
        await admin.config('SET', 'maxmemory', '0');
        await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
        await expect(store.ready()).resolves.toBeUndefined();
        await store.close();
      },
    );
  },
);
