import { PostgresIdempotencyStore } from '../../src/postgres.js';
import { LAPSED_CLAIM_KEEP_MS } from '../../src/lib/jobs/store.js';
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
    const stores = Array.from(
      { length: 6 },
      () => new PostgresIdempotencyStore({ connectionString: url, table: name }),
    );
    await Promise.all(stores.map((st) => st.migrate()));
    await stores[0]!.migrate();
    const { rows } = await pool.query('SELECT count(*)::int AS n FROM pg_indexes WHERE tablename = $1', [
      name,
    ]);
    expect(rows[0].n).toBe(2); // primary key and expires_at
    await Promise.all(stores.map((st) => st.close()));
  });

  it("migrate() brings a table made by an earlier version (no stale_at, fence or took_over column, a state check without 'released') up to date, keeping its rows; run again, it changes nothing", async () => {
    const name = `jobhook_old_${process.pid}_${Date.now()}`;
    await pool.query(
      `CREATE TABLE ${name} (job_id text PRIMARY KEY, token text, state text NOT NULL CHECK (state IN ('claimed', 'completed')), expires_at timestamptz NOT NULL)`,
    );
    await pool.query(
      `INSERT INTO ${name} VALUES ('old-done', NULL, 'completed', now() + interval '1 hour'), ('old-expired', 'old-token-1', 'claimed', now() - interval '1 second')`,
    );
    const store = new PostgresIdempotencyStore({ pool, table: name });
    await store.migrate();
    expect(await store.claim('old-done', { leaseMs: 10_000 })).toEqual({ status: 'completed' });
    expect(await store.claim('old-expired', { leaseMs: 10_000, takeoverGraceMs: 5_000 })).toMatchObject({
      status: 'in_progress',
      stale: true,
    });
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
      (
        await pool.query(
          `SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'c'`,
          [name],
        )
      ).rows;
    const upgraded = await checks();
    expect(upgraded).toHaveLength(1);
    expect(upgraded[0].def).toContain("'released'");
    await store.migrate();
    expect(await checks()).toEqual(upgraded);
    await expect(
      pool.query(
        `INSERT INTO ${name} (job_id, token, state, expires_at) VALUES ('bad', 'bad-token-1', 'other', now())`,
      ),
    ).rejects.toThrow(/check constraint/);
  });

  it('migrate() refuses a database whose encoding cannot store every job id (LATIN1), naming it; a UTF8 one takes any', async () => {
    const name = `jobhook_latin1_${process.pid}`;
    await pool.query(`DROP DATABASE IF EXISTS ${name}`);
    await pool.query(
      `CREATE DATABASE ${name} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`,
    );
    const other = new URL(url);
    other.pathname = `/${name}`;
    const store = new PostgresIdempotencyStore({ connectionString: other.href });
    try {
      await expect(store.migrate()).rejects.toThrow(/needs a UTF8 database: this one is LATIN1/);
      // Without migrate() (a table made by hand): a job id it cannot hold is a TypeError that says why, not an outage.
      await new pg.Client({ connectionString: other.href }).connect().then(async (c) => {
        await c.query(
          `CREATE TABLE jobhook_jobs (job_id text PRIMARY KEY, token text, state text NOT NULL, expires_at timestamptz NOT NULL, stale_at timestamptz, fence bigint NOT NULL DEFAULT 0, took_over boolean NOT NULL DEFAULT false)`,
        );
        await c.query('CREATE SEQUENCE jobhook_jobs_fence_seq');
        await c.end();
      });
      await expect(store.claim('emoji-😀', { leaseMs: 1000 })).rejects.toThrow(
        /cannot be stored in this database/,
      );
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
    const store = new PostgresIdempotencyStore({
      pool,
      schema: 'jobhook_other',
      table: `jobs_${process.pid}`,
    });
    await store.migrate();
    const c = await store.claim('in-schema', { leaseMs: 10_000 });
    expect(c.status).toBe('acquired');
    await store.close();
    const { rows } = await pool.query(
      `SELECT state FROM jobhook_other.jobs_${process.pid} WHERE job_id = 'in-schema'`,
    );
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
    expect(rows).toEqual([
      { job_id: 'kept-release' },
      { job_id: 'lapsed-hour' },
      { job_id: 'live' },
      { job_id: 'marked' },
      { job_id: 'short' },
    ]);
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
    expect(await store.claim('j', { leaseMs: 10_000 })).toMatchObject({
      status: 'acquired',
      fence: taker.fence + 1,
      tookOver: true,
    });
    await pool.query(`DROP TABLE ${name}`);
    await pool.query(`DROP TABLE IF EXISTS ${name}_pending`);
    await pool.query(`DROP SEQUENCE IF EXISTS ${name}_fence_seq`);
  });

  /** A real pool that keeps the text and parameters of every query the store sends through it. */
  function recordingPool(): { pool: pg.Pool; sent: Array<{ sql: string; params: unknown[] }> } {
    const rec = new pg.Pool({ connectionString: url });
    rec.on('error', () => undefined);
    const sent: Array<{ sql: string; params: unknown[] }> = [];
    const query = rec.query.bind(rec) as (sql: string, params?: unknown[]) => Promise<pg.QueryResult>;
    (rec as unknown as { query: typeof query }).query = (sql: string, params?: unknown[]) => {
      sent.push({ sql, params: params ?? [] });
      return query(sql, params);
    };
    return { pool: rec, sent };
  }
  const purges = <Q extends { sql: string }>(sent: Q[]): Q[] =>
    sent.filter((q) => /\bDELETE FROM\b/.test(q.sql));

  it('purgeExpired({ batchSize }) deletes exactly the rows past retention, on the store clock, in batches until a short one', async () => {
    const name = `jobhook_purge_batches_${process.pid}`;
    const KEEP = LAPSED_CLAIM_KEEP_MS;
    const at = Date.parse('2030-01-01T00:00:00.000Z');
    const { pool: rec, sent } = recordingPool();
    const store = new PostgresIdempotencyStore({ pool: rec, table: name, now: () => at });
    try {
      await store.migrate();
      await pool.query(`DELETE FROM ${name}`);
      // Offsets in ms from the store's "now"; stale_at NULL unless given.
      const rows: Array<
        [
          prefix: string,
          count: number,
          state: string,
          expiresMs: number,
          staleMs: number | null,
          goes: boolean,
        ]
      > = [
        ['done-old', 23, 'completed', -3_600_000, null, true],
        ['done-now', 1, 'completed', 0, null, true], // retention ends exactly now
        ['done-live', 5, 'completed', 1, null, false],
        ['lapsed-long', 7, 'claimed', -KEEP - 1_000, null, true],
        ['lapsed-at-keep', 1, 'claimed', -KEEP, null, true], // kept exactly LAPSED_CLAIM_KEEP_MS
        ['lapsed-recent', 4, 'claimed', -KEEP + 1, null, false],
        ['marked-recent', 3, 'claimed', -KEEP - 60_000, -KEEP / 2, false], // its grace mark is recent
        ['marked-old', 2, 'claimed', -KEEP - 120_000, -KEEP - 1_000, true],
        ['released-old', 2, 'released', -1, null, true], // its keep is over
        ['released-live', 2, 'released', 1, null, false],
        ['live', 6, 'claimed', 10_000, null, false],
      ];
      for (const [prefix, count, state, expiresMs, staleMs] of rows) {
        await pool.query(
          `INSERT INTO ${name} (job_id, token, state, expires_at, stale_at)
             SELECT $1 || '-' || g, 'token-' || g, $2, $3::timestamptz + g * interval '0 ms', $4::timestamptz FROM generate_series(1, $5) g`,
          [prefix, state, new Date(at + expiresMs), staleMs === null ? null : new Date(at + staleMs), count],
        );
      }
      const goes = rows.filter((r) => r[5]).reduce((n, r) => n + r[1], 0);
      expect(goes).toBe(36);
      expect(await store.purgeExpired({ batchSize: 5 })).toBe(goes);
      // 36 rows in batches of 5: seven full ones, then a short one of 1.
      expect(purges(sent)).toHaveLength(8);
      const left = await pool.query<{ job_id: string }>(`SELECT job_id FROM ${name}`);
      const kept = rows
        .filter((r) => !r[5])
        .flatMap(([prefix, count]) => Array.from({ length: count }, (_, k) => `${prefix}-${k + 1}`));
      expect(left.rows.map((r) => r.job_id).sort()).toEqual(kept.sort());
      // Nothing more to delete: one statement, 0.
      expect(await store.purgeExpired({ batchSize: 5 })).toBe(0);
      expect(purges(sent)).toHaveLength(9);
      // A full last batch is followed by one that finds nothing.
      await pool.query(`UPDATE ${name} SET expires_at = $1 WHERE job_id LIKE 'done-live-%'`, [
        new Date(at - 1),
      ]);
      expect(await store.purgeExpired({ batchSize: 5 })).toBe(5);
      expect(purges(sent)).toHaveLength(11);
      expect(await store.purgeExpired()).toBe(0); // default batch size
      await expect(store.purgeExpired({ batchSize: 0 })).rejects.toThrow(
        /batchSize must be an integer from 1 to 100000/,
      );
      await expect(store.purgeExpired({ batchSize: 2.5 })).rejects.toThrow(TypeError);
      await expect(store.purgeExpired({ batchsize: 5 } as never)).rejects.toThrow(
        /unknown option batchsize; did you mean batchSize\?/,
      );
    } finally {
      await rec.end();
    }
  });

  it('purgeExpired() walks the expires_at index (EXPLAIN) on a table of 10^5 rows, in every batch', async () => {
    const name = `jobhook_purge_plan_${process.pid}`;
    const { pool: rec, sent } = recordingPool();
    const store = new PostgresIdempotencyStore({ pool: rec, table: name });
    try {
      await store.migrate();
      await pool.query(`DELETE FROM ${name}`);
      // 100,000 live rows (completed marks and claims), 2,500 completed marks past their retention.
      await pool.query(
        `INSERT INTO ${name} (job_id, token, state, expires_at)
           SELECT 'live-' || g, 'token-' || g, CASE WHEN g % 3 = 0 THEN 'claimed' ELSE 'completed' END, now() + interval '1 hour' + g * interval '1 ms'
             FROM generate_series(1, 100000) g`,
      );
      await pool.query(
        `INSERT INTO ${name} (job_id, token, state, expires_at) SELECT 'old-' || g, 'token-' || g, 'completed', now() - interval '1 hour' + g * interval '1 ms' FROM generate_series(1, 2500) g`,
      );
      await pool.query(`ANALYZE ${name}`);
      expect(await store.purgeExpired({ batchSize: 1000 })).toBe(2500);
      const statements = purges(sent);
      expect(statements).toHaveLength(3);
      expect((await pool.query(`SELECT count(*)::int AS n FROM ${name}`)).rows[0].n).toBe(100_000);
      // Nothing to delete now: the same statement, as a purge sends it.
      expect(await store.purgeExpired({ batchSize: 1000 })).toBe(0);
      // The plans of the four statements sent, with the backlog back in place (so the
      // planner sees rows to delete in every batch's range): only the expires_at index
      // picks rows, only their ctids (a TID scan) reach them for the DELETE; nothing
      // reads the table or the whole range (a hash join on job_id did, 80 ms a batch).
      await pool.query(
        `INSERT INTO ${name} (job_id, token, state, expires_at) SELECT 'old-' || g, 'token-' || g, 'completed', now() - interval '1 hour' + g * interval '1 ms' FROM generate_series(1, 2500) g`,
      );
      expect(purges(sent)).toHaveLength(4);
      for (const { sql, params } of purges(sent)) {
        const { rows } = await pool.query(`EXPLAIN (FORMAT JSON) ${sql}`, params);
        const nodes: Array<Record<string, unknown>> = [];
        const walk = (node: Record<string, unknown>): void => {
          nodes.push(node);
          for (const child of (node.Plans as Array<Record<string, unknown>> | undefined) ?? []) walk(child);
        };
        walk(rows[0]['QUERY PLAN'][0].Plan);
        const scans = nodes
          .filter((n) => n['Relation Name'] === name && n['Node Type'] !== 'ModifyTable')
          .map((n) => `${n['Node Type']} ${n['Index Name'] ?? ''}`.trim());
        expect(scans.sort()).toEqual([`Index Scan ${name}_expires_at`, 'Tid Scan']);
        expect(nodes.map((n) => n['Node Type'])).not.toContain('Hash Join');
      }
    } finally {
      await rec.end();
      await pool.query(`DROP TABLE IF EXISTS ${name}`);
    }
  });

  it('migrate() on an existing table does not wait for open write transactions (no CREATE INDEX lock when the indexes exist)', async () => {
    const name = `jobhook_migrate_busy_${process.pid}`;
    const first = new PostgresIdempotencyStore({ pool, table: name });
    await first.migrate();
    const busy = await pool.connect();
    const again = new PostgresIdempotencyStore({
      connectionString: url,
      table: name,
      operationTimeoutMs: 3000,
    });
    try {
      await busy.query('BEGIN');
      await busy.query(
        `INSERT INTO ${name} (job_id, token, state, expires_at) VALUES ('held', 'held-token-1', 'claimed', now() + interval '1 minute')`,
      );
      await busy.query(`INSERT INTO ${name}_pending (job_id, since_ms) VALUES ('held', 0)`);
      await expect(again.migrate()).resolves.toBeUndefined();
    } finally {
      await busy.query('ROLLBACK');
      busy.release();
      await again.close();
    }
    const { rows } = await pool.query(
      'SELECT count(*)::int AS n FROM pg_indexes WHERE tablename IN ($1, $2)',
      [name, `${name}_pending`],
    );
    expect(rows[0].n).toBe(4); // two primary keys, expires_at, since_ms
  });

  it("issue 27 item 7: a renewal that waited for the row its own transactional completion locked answers completed (the model's reply), not superseded", async () => {
    const name = `jobhook_renewrace_${process.pid}`;
    const store = new PostgresIdempotencyStore({ pool, table: name, transactional: true });
    await store.migrate();
    const c = await store.claim('race', { leaseMs: 10_000 });
    if (c.status !== 'acquired') throw new Error(c.status);
    const tx = await store.begin('race', c.token, { fence: c.fence });
    expect(await tx.complete({ retainMs: 60_000 })).toBe('completed');
    const renewal = store.renew('race', c.token, { leaseMs: 10_000, fence: c.fence });
    await new Promise((r) => setTimeout(r, 200)); // the renewal waits for the row lock
    await tx.commit();
    expect(await renewal).toBe('completed');
    await pool.query(`DROP TABLE ${name}`);
    await pool.query(`DROP TABLE IF EXISTS ${name}_pending`);
  });

  it('issue 27 item 7: a fencing number is spent only when a claim takes the job, not on claims that find it held, in its grace or completed', async () => {
    const name = `jobhook_fencespend_${process.pid}`;
    const store = new PostgresIdempotencyStore({ pool, table: name });
    await store.migrate();
    const last = async () =>
      Number((await pool.query(`SELECT last_value FROM ${name}_fence_seq`)).rows[0].last_value);
    const first = await store.claim('j', { leaseMs: 10_000 });
    if (first.status !== 'acquired') throw new Error(first.status);
    const start = await last();
    for (let i = 0; i < 5; i++)
      expect(await store.claim('j', { leaseMs: 10_000 })).toMatchObject({ status: 'in_progress' });
    const lapsing = await store.claim('k', { leaseMs: 30 });
    if (lapsing.status !== 'acquired') throw new Error(lapsing.status);
    const afterK = await last();
    expect(afterK).toBe(start + 1);
    await new Promise((r) => setTimeout(r, 60));
    // Polls through a takeover grace (a delivery waiting for the lapsed holder).
    for (let i = 0; i < 5; i++)
      expect(await store.claim('k', { leaseMs: 10_000, takeoverGraceMs: 5_000 })).toMatchObject({
        status: 'in_progress',
        stale: true,
      });
    expect(await store.complete('j', first.token, { retainMs: 60_000, fence: first.fence })).toBe(
      'completed',
    );
    for (let i = 0; i < 3; i++)
      expect(await store.claim('j', { leaseMs: 10_000 })).toEqual({ status: 'completed' });
    // Its own token claiming again keeps its number.
    expect(await store.claim('k', { leaseMs: 10_000, token: lapsing.token })).toMatchObject({
      status: 'acquired',
      fence: lapsing.fence,
    });
    expect(await last()).toBe(afterK);
    // A takeover spends one.
    const released = await store.release('k', lapsing.token);
    expect(released).toBe(true);
    const next = await store.claim('k', { leaseMs: 10_000 });
    expect(next).toMatchObject({ status: 'acquired', fence: afterK + 1 });
    expect(await last()).toBe(afterK + 1);
    await pool.query(`DROP TABLE ${name}`);
    await pool.query(`DROP TABLE IF EXISTS ${name}_pending`);
    await pool.query(`DROP SEQUENCE IF EXISTS ${name}_fence_seq`);
  });

  it('refuses identifiers that are not plain SQL names', () => {
    expect(() => new PostgresIdempotencyStore({ pool, table: 'jobs; DROP TABLE x' })).toThrow(TypeError);
    expect(() => new PostgresIdempotencyStore({ pool, connectionString: url })).toThrow(/exactly one/);
  });
});
