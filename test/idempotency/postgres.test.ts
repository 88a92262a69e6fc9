import { PostgresIdempotencyStore } from '../../src/postgres.js';
import { availability, startPostgres } from '../helpers/servers.js';
import { serverStoreSuite } from './server-store-suite.js';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';

const table = `jobhook_test_${process.pid}_${Date.now()}`;
const local = availability('postgres');

serverStoreSuite({
  name: 'PostgreSQL',
  url: inject('databaseUrl'),
  skipReason: local.skip ? local.reason : undefined,
  make: async (url, options) => {
    const store = new PostgresIdempotencyStore({ connectionString: url, table, ...options });
    await store.migrate();
    return store;
  },
  throwaway: startPostgres,
});

describe.skipIf(inject('databaseUrl') === '')('PostgresIdempotencyStore specifics', () => {
  const url = inject('databaseUrl');
  const pool = new pg.Pool({ connectionString: url });
  pool.on('error', () => undefined);
  afterAll(async () => {
    await pool.end();
  });

  it('migrate() is safe to run concurrently and again', async () => {
    const name = `jobhook_migrate_${process.pid}_${Date.now()}`;
    const stores = Array.from({ length: 6 }, () => new PostgresIdempotencyStore({ connectionString: url, table: name }));
    await Promise.all(stores.map((st) => st.migrate()));
    await stores[0]!.migrate();
    const { rows } = await pool.query('SELECT count(*)::int AS n FROM pg_indexes WHERE tablename = $1', [name]);
    expect(rows[0].n).toBe(2); // primary key and expires_at
    await Promise.all(stores.map((st) => st.close()));
  });

  it('migrate() brings a table made by an earlier version (no stale_at, fence or took_over column, a state check without \'released\') up to date, keeping its rows; run again, it changes nothing', async () => {
    const name = `jobhook_old_${process.pid}_${Date.now()}`;
    await pool.query(
      `CREATE TABLE ${name} (job_id text PRIMARY KEY, token text, state text NOT NULL CHECK (state IN ('claimed', 'completed')), expires_at timestamptz NOT NULL)`,
    );
    await pool.query(`INSERT INTO ${name} VALUES ('old-done', NULL, 'completed', now() + interval '1 hour'), ('old-expired', 'old-token-1', 'claimed', now() - interval '1 second')`);
    const store = new PostgresIdempotencyStore({ pool, table: name });
    await store.migrate();
    expect(await store.claim('old-done', { leaseMs: 10_000 })).toEqual({ status: 'completed' });
    expect(await store.claim('old-expired', { leaseMs: 10_000, takeoverGraceMs: 5_000 })).toMatchObject({ status: 'in_progress', stale: true });
    expect(await store.complete('old-expired', 'old-token-1', { retainMs: 60_000 })).toBe('completed');
    // A completion of that version kept no token: completed for every token.
    expect(await store.complete('old-done', 'any-token-1', { retainMs: 60_000 })).toBe('completed');
    const fresh = await store.claim('new', { leaseMs: 10_000 });
    expect(fresh).toMatchObject({ status: 'acquired', fence: expect.any(Number) });
    if (fresh.status !== 'acquired') throw new Error(fresh.status);
    // The old check allowed only 'claimed' and 'completed': a release is kept as 'released' now.
    expect(await store.release('new', fresh.token)).toBe(true);
    expect(await store.renew('new', fresh.token, { leaseMs: 10_000, fence: fresh.fence })).toBe('superseded');
    const checks = async () =>
      (await pool.query(`SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'c'`, [name])).rows;
    const upgraded = await checks();
    expect(upgraded).toHaveLength(1);
    expect(upgraded[0].def).toContain("'released'");
    await store.migrate();
    expect(await checks()).toEqual(upgraded);
    await expect(pool.query(`INSERT INTO ${name} (job_id, token, state, expires_at) VALUES ('bad', 'bad-token-1', 'other', now())`)).rejects.toThrow(/check constraint/);
  });

  it('migrate() refuses a database whose encoding cannot store every job id (LATIN1), naming it; a UTF8 one takes any', async () => {
    const name = `jobhook_latin1_${process.pid}`;
    await pool.query(`DROP DATABASE IF EXISTS ${name}`);
    await pool.query(`CREATE DATABASE ${name} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`);
    const other = new URL(url);
    other.pathname = `/${name}`;
    const store = new PostgresIdempotencyStore({ connectionString: other.href });
    try {
      await expect(store.migrate()).rejects.toThrow(/needs a UTF8 database: this one is LATIN1/);
      // Without migrate() (a table made by hand): a job id it cannot hold is a TypeError that says why, not an outage.
      await new pg.Client({ connectionString: other.href }).connect().then(async (c) => {
        await c.query(`CREATE TABLE jobhook_jobs (job_id text PRIMARY KEY, token text, state text NOT NULL, expires_at timestamptz NOT NULL, stale_at timestamptz, fence bigint NOT NULL DEFAULT 0, took_over boolean NOT NULL DEFAULT false)`);
        await c.query('CREATE SEQUENCE jobhook_jobs_fence_seq');
        await c.end();
      });
      await expect(store.claim('emoji-😀', { leaseMs: 1000 })).rejects.toThrow(/cannot be stored in this database/);
    } finally {
      await store.close();
      await pool.query(`DROP DATABASE ${name}`);
    }
    const utf8 = new PostgresIdempotencyStore({ pool, table: `jobhook_utf8_${process.pid}` });
    await utf8.migrate();
    expect((await utf8.claim('emoji-😀-ü-\u{10FFFF}', { leaseMs: 1000 })).status).toBe('acquired');
  });

  it('works on a Pool you pass (left open by close()), in another schema', async () => {
    await pool.query('CREATE SCHEMA IF NOT EXISTS jobhook_other');
    const store = new PostgresIdempotencyStore({ pool, schema: 'jobhook_other', table: `jobs_${process.pid}` });
    await store.migrate();
    const c = await store.claim('in-schema', { leaseMs: 10_000 });
    expect(c.status).toBe('acquired');
    await store.close();
    const { rows } = await pool.query(`SELECT state FROM jobhook_other.jobs_${process.pid} WHERE job_id = 'in-schema'`);
    expect(rows).toEqual([{ state: 'claimed' }]);
  });

  it('purgeExpired() removes completed marks past their retention, releases past their keep, and claims LAPSED_CLAIM_KEEP_MS (24 h) past their lease (or grace mark), nothing else', async () => {
    const name = `jobhook_purge_${process.pid}`;
    const store = new PostgresIdempotencyStore({ pool, table: name });
    await store.migrate();
    const short = await store.claim('short', { leaseMs: 50 });
    const done = await store.claim('done', { leaseMs: 10_000 });
    if (done.status !== 'acquired' || short.status !== 'acquired') throw new Error('claims');
    await store.complete('done', done.token, { retainMs: 50 });
    await store.claim('live', { leaseMs: 60_000 });
    const kept = await store.claim('kept-release', { leaseMs: 10_000 });
    if (kept.status !== 'acquired') throw new Error(kept.status);
    await store.release('kept-release', kept.token);
    await pool.query(
      `INSERT INTO ${name} (job_id, token, state, expires_at, stale_at) VALUES
         ('lapsed', 'lapsed-token-1', 'claimed', now() - interval '24 hours 1 second', NULL),
         ('lapsed-hour', 'lapsed-token-2', 'claimed', now() - interval '1 hour', NULL),
         ('marked', 'marked-token-1', 'claimed', now() - interval '25 hours', now() - interval '23 hours'),
         ('old-release', 'released-token-1', 'released', now() - interval '1 second', NULL)`,
    );
    await new Promise((r) => setTimeout(r, 150));
    expect(await store.purgeExpired()).toBe(3);
    const { rows } = await pool.query(`SELECT job_id FROM ${name} ORDER BY job_id`);
    // 'short' lapsed 100 ms ago: a claim arriving now still gets its takeover grace;
    // 'lapsed-hour': a claim arriving now takes it over and reports it.
    expect(rows).toEqual([{ job_id: 'kept-release' }, { job_id: 'lapsed-hour' }, { job_id: 'live' }, { job_id: 'marked' }, { job_id: 'short' }]);
  });

  it('a fencing sequence that was reset never hands a takeover a number at or below the claim it supersedes, nor a claim after a release', async () => {
    const name = `jobhook_fence_${process.pid}`;
    const store = new PostgresIdempotencyStore({ pool, table: name });
    await store.migrate();
    for (let i = 0; i < 5; i++) await store.claim(`warm-${i}`, { leaseMs: 10_000 });
    const first = await store.claim('j', { leaseMs: 50 });
    if (first.status !== 'acquired') throw new Error(first.status);
    expect(first.fence).toBeGreaterThanOrEqual(6);
    await pool.query(`ALTER SEQUENCE ${name}_fence_seq RESTART`);
    await new Promise((r) => setTimeout(r, 80));
    const taker = await store.claim('j', { leaseMs: 10_000 });
    expect(taker).toMatchObject({ status: 'acquired', fence: first.fence + 1, tookOver: true });
    if (taker.status !== 'acquired') throw new Error(taker.status);
    await pool.query(`ALTER SEQUENCE ${name}_fence_seq RESTART`);
    expect(await store.release('j', taker.token)).toBe(true);
    expect(await store.claim('j', { leaseMs: 10_000 })).toMatchObject({ status: 'acquired', fence: taker.fence + 1, tookOver: true });
    await pool.query(`DROP TABLE ${name}`);
    await pool.query(`DROP TABLE IF EXISTS ${name}_pending`);
    await pool.query(`DROP SEQUENCE IF EXISTS ${name}_fence_seq`);
  });

  it('refuses identifiers that are not plain SQL names', () => {
    expect(() => new PostgresIdempotencyStore({ pool, table: 'jobs; DROP TABLE x' })).toThrow(TypeError);
    expect(() => new PostgresIdempotencyStore({ pool, connectionString: url })).toThrow(/exactly one/);
  });
});
