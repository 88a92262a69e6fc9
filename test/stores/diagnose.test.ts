/**
 * Stores say what is wrong (issue 28, item 3), on real servers: a PostgreSQL store whose
 * tables were never created fails with STORE_NOT_MIGRATED naming migrate() and the
 * table, its readiness check says so, and the probe started at construction logs it
 * once before any delivery; `migrate: true` creates the tables at first use, once. A
 * store that cannot reach its server (nothing listening, a password refused) names the
 * address and the cause, never the password, in its errors and its log.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createReceiver, type ReceiverAnswer } from '../../src/index.js';
import { PostgresIdempotencyStore } from '../../src/postgres.js';
import { RedisIdempotencyStore } from '../../src/redis.js';
import { recorder } from '../adapters/receiver-table.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';
import { availability, freePort, startRedis, type FaultableServer } from '../helpers/servers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const publicKey = publicPem(2048);
const url = inject('databaseUrl');
let serial = 0;
/** A table name no test has used: its tables are missing. */
const fresh = (what: string) => `jobhook_${what}_${process.pid}_${Date.now()}_${serial++}`;
const codeOf = (a: ReceiverAnswer) => (JSON.parse(a.body) as { error?: { code: string } }).error?.code;

/** Waits (up to `ms`) until `lines` holds a line. */
async function firstLine(lines: string[], ms = 3000): Promise<string> {
  for (let waited = 0; lines.length === 0 && waited < ms; waited += 20) await sleep(20);
  return lines[0] ?? '';
}

/** A URL with credentials at a loopback port where nothing listens. */
async function nothingListening(scheme: 'redis' | 'postgres'): Promise<{ url: string; address: string }> {
  const port = await freePort();
  return {
    url: `${scheme}://jobhook:hunter2@127.0.0.1:${port}${scheme === 'postgres' ? '/test' : ''}`,
    address: `127.0.0.1:${port}`,
  };
}

describe.skipIf(url === '')('PostgreSQL: a store whose tables are missing', () => {
  const admin = new pg.Pool({ connectionString: url });
  admin.on('error', () => undefined);
  afterAll(async () => {
    await admin.end();
  });

  it('operations fail with STORE_NOT_MIGRATED naming migrate() and the table; ready() says so too, and resolves once migrate() ran', async () => {
    const table = fresh('unmigrated');
    const store = new PostgresIdempotencyStore({ connectionString: url, table, log: false });
    const failure = await store.claim(jobId(), { leaseMs: 1000 }).catch((e: unknown) => e);
    expect(failure).toMatchObject({ code: 'STORE_NOT_MIGRATED', status: 503 });
    expect((failure as Error).message).toContain('migrate()');
    expect((failure as Error).message).toContain(table);
    await expect(store.ready()).rejects.toMatchObject({
      code: 'STORE_NOT_MIGRATED',
      message: expect.stringMatching(new RegExp(`public\\.${table} does not exist.*store\\.migrate\\(\\)`)),
    });
    await store.migrate();
    await expect(store.ready()).resolves.toBeUndefined();
    expect(await store.claim(jobId(), { leaseMs: 1000 })).toMatchObject({ status: 'acquired' });
    await store.close();
  });

  it('a schema that does not exist: ready() names it and how to create it', async () => {
    const schema = fresh('noschema');
    const store = new PostgresIdempotencyStore({ connectionString: url, schema, log: false });
    await expect(store.ready()).rejects.toMatchObject({
      code: 'STORE_NOT_MIGRATED',
      message: expect.stringContaining(`CREATE SCHEMA "${schema}"`),
    });
    await expect(store.claim(jobId(), { leaseMs: 1000 })).rejects.toMatchObject({
      code: 'STORE_NOT_MIGRATED',
    });
    await store.close();
  });

  it('a table made by an earlier version (columns missing): STORE_NOT_MIGRATED (42703) and ready() names the columns', async () => {
    const table = fresh('oldcols');
    await admin.query(
      `CREATE TABLE ${table} (job_id text PRIMARY KEY, token text, state text NOT NULL, expires_at timestamptz NOT NULL)`,
    );
    const store = new PostgresIdempotencyStore({ connectionString: url, table, log: false });
    await expect(store.claim(jobId(), { leaseMs: 1000 })).rejects.toMatchObject({
      code: 'STORE_NOT_MIGRATED',
      message: expect.stringContaining('42703'),
    });
    await expect(store.ready()).rejects.toMatchObject({
      code: 'STORE_NOT_MIGRATED',
      message: expect.stringMatching(/lacks the columns stale_at, fence, took_over.*migrate\(\)/),
    });
    await store.close();
  });

  it('the probe started at construction logs it once, before any delivery; deliveries get 503 and the runner logs one line for them all; health() reports the code', async () => {
    const table = fresh('probe');
    const storeLog = recorder();
    const store = new PostgresIdempotencyStore({ connectionString: url, table, log: storeLog.log });
    const line = await firstLine(storeLog.lines.error);
    expect(line).toMatch(
      new RegExp(
        `not ready: PostgreSQL at 127\\.0\\.0\\.1:\\d+/\\w+: the store's table public\\.${table} does not exist.*store\\.migrate\\(\\).*migrate: true`,
      ),
    );
    const runnerLog = recorder();
    const receive = createReceiver({ publicKey, store, log: runnerLog.log, onEvent: () => undefined });
    for (let k = 0; k < 8; k++) {
      const answer = await receive(signed(jobId('unmigrated')));
      expect([answer.status, codeOf(answer)]).toEqual([503, 'STORE_UNAVAILABLE']);
    }
    expect(runnerLog.lines.error).toHaveLength(1);
    expect(runnerLog.lines.error[0]).toMatch(
      /failed to claim for job .*STORE_NOT_MIGRATED|failed to claim for job .*migrate\(\)/,
    );
    expect(storeLog.lines.error).toHaveLength(1);
    // Nothing was written by claims the store refused for missing tables: nothing to undo.
    expect(receive.pending).toBe(0);
    const health = await receive.health(3000);
    expect(health.store).toMatchObject({
      ok: false,
      code: 'STORE_NOT_MIGRATED',
      error: expect.stringContaining('migrate()'),
    });
    await receive.close();
    await store.close();
  });

  it("the probe stays quiet when migrate() is called right after construction (the README's order)", async () => {
    const { lines, log } = recorder();
    const store = new PostgresIdempotencyStore({ connectionString: url, table: fresh('quiet'), log });
    await store.migrate();
    await sleep(300);
    expect([...lines.warn, ...lines.error]).toEqual([]);
    await store.close();
  });

  it('migrate: true creates the tables at first use, once for many concurrent first operations, and across two stores at once', async () => {
    const table = fresh('auto');
    const { lines, log } = recorder();
    const stores = [0, 1].map(
      () => new PostgresIdempotencyStore({ connectionString: url, table, migrate: true, log }),
    );
    const migrations = [0, 0];
    stores.forEach((s, k) => {
      const migrate = s.migrate.bind(s);
      s.migrate = () => ((migrations[k] = (migrations[k] ?? 0) + 1), migrate());
    });
    const claims = await Promise.all(
      stores.flatMap((s, k) =>
        Array.from({ length: 5 }, (_, n) => s.claim(jobId(`auto-${k}-${n}`), { leaseMs: 1000 })),
      ),
    );
    expect(claims.every((c) => c.status === 'acquired')).toBe(true);
    await sleep(100);
    // The construction's probe is a first use too: at most one migration per store.
    expect(migrations.every((n) => n === 1)).toBe(true);
    await Promise.all(stores.map((s) => s.ready()));
    expect([...lines.warn, ...lines.error]).toEqual([]);
    const { rows } = await admin.query(
      'SELECT count(*)::int AS n FROM pg_tables WHERE tablename IN ($1, $2)',
      [table, `${table}_pending`],
    );
    expect(rows[0].n).toBe(2);
    await Promise.all(stores.map((s) => s.close()));
  });
});

describe.skipIf(url === '')('PostgreSQL: a server that cannot be reached', () => {
  it('nothing listening: errors and the probe name the address and ECONNREFUSED, never the password; logged once', async () => {
    const { url: down, address } = await nothingListening('postgres');
    const { lines, log } = recorder();
    const store = new PostgresIdempotencyStore({ connectionString: down, operationTimeoutMs: 2000, log });
    const line = await firstLine(lines.error);
    const failure = (await store.claim(jobId(), { leaseMs: 1000 }).catch((e: unknown) => e)) as Error & {
      code: string;
    };
    await expect(store.ready()).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    for (const text of [line, failure.message]) {
      expect(text).toContain(`PostgreSQL at ${address}/test`);
      expect(text).toMatch(/connection refused.*ECONNREFUSED/);
      expect(text).not.toContain('hunter2');
    }
    expect(failure.code).toBe('STORE_UNAVAILABLE');
    expect(lines.error).toHaveLength(1);
    await store.close();
  });
});

describe.skipIf(availability('redis').skip)(
  'Redis: a server that cannot be reached or refuses the password',
  () => {
    let locked: FaultableServer;
    beforeAll(async () => {
      locked = await startRedis({ password: 's3cret-pass' });
    });
    afterAll(async () => {
      await locked.destroy();
    });

    it("nothing listening: errors and the probe name the address and ECONNREFUSED (not ioredis's retry limit), never the password; logged once", async () => {
      const { url: down, address } = await nothingListening('redis');
      const { lines, log } = recorder();
      const store = new RedisIdempotencyStore({ url: down, operationTimeoutMs: 1000, log });
      const line = await firstLine(lines.error);
      const failures = await Promise.all(
        Array.from({ length: 3 }, () =>
          store.claim(jobId(), { leaseMs: 1000 }).then(
            () => new Error('claimed'),
            (e: unknown) => e as Error,
          ),
        ),
      );
      for (const text of [line, ...failures.map((f) => f.message)]) {
        expect(text).toContain(`Redis at ${address}`);
        expect(text).toMatch(/connection refused.*ECONNREFUSED/);
        expect(text).not.toContain('hunter2');
      }
      await expect(store.ready()).rejects.toMatchObject({
        code: 'STORE_UNAVAILABLE',
        message: expect.stringContaining('ECONNREFUSED'),
      });
      expect(lines.error).toHaveLength(1);
      await store.close();
    });

    it('no password given: NOAUTH, named with the address; a wrong one: WRONGPASS, the password never shown; the right one: ready', async () => {
      const port = new URL(locked.url).port;
      const cases = [
        [locked.url, /requires a password.*NOAUTH/],
        [`redis://:wrong-pass@127.0.0.1:${port}`, /refused the password.*WRONGPASS/],
      ] as const;
      for (const [target, cause] of cases) {
        const { lines, log } = recorder();
        const store = new RedisIdempotencyStore({ url: target, operationTimeoutMs: 1000, log });
        const line = await firstLine(lines.error);
        const failure = (await store.ready().catch((e: unknown) => e)) as Error & { code: string };
        for (const text of [line, failure.message]) {
          expect(text).toContain(`Redis at 127.0.0.1:${port}`);
          expect(text).toMatch(cause);
          expect(text).not.toContain('wrong-pass');
        }
        expect(failure.code).toBe('STORE_UNAVAILABLE');
        await store.close();
      }
      const { lines, log } = recorder();
      const good = new RedisIdempotencyStore({ url: `redis://:s3cret-pass@127.0.0.1:${port}`, log });
      await expect(good.ready()).resolves.toBeUndefined();
      await sleep(100);
      expect(lines.error).toEqual([]);
      await good.close();
    });
  },
);
