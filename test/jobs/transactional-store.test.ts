/**
 * The transactional PostgreSQL store's connections under faults, found by the fault
 * suite (test/faults/receiver-processes.faults.ts, "PostgreSQL transactional: store
 * paused 7 s"): a transaction's connection is checked out of the pool for as long as
 * the handler runs, so the store must give it back when it gave up on it, and must
 * hear its errors while it holds it; and a transaction holding a connection must not
 * wait for a renewal that needs another one.
 */
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { PostgresIdempotencyStore } from '../../src/postgres.js';
import { createJobRunner, type RunResult } from '../../src/lib/jobs/runner.js';
import { jobId } from '../helpers/deliveries.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(inject('databaseUrl') === '')('PostgreSQL transactional store: the connection of a transaction', () => {
  const url = inject('databaseUrl');
  const pools: pg.Pool[] = [];
  const poolOf = (max: number) => {
    const p = new pg.Pool({ connectionString: url, max });
    p.on('error', () => undefined);
    pools.push(p);
    return p;
  };
  afterAll(async () => {
    // A pool with a connection checked out forever (the bug) would never end: do not wait for it.
    await Promise.race([Promise.all(pools.map((p) => p.end().catch(() => undefined))), sleep(2000)]);
  });

  it('a begin() the store gave up on (its deadline passed while it waited for a connection) gives the connection back once it gets one', async () => {
    const pool = poolOf(1);
    const store = new PostgresIdempotencyStore({ pool, table: `jobhook_txconn_${process.pid}`, transactional: true, operationTimeoutMs: 300 });
    // Every connection of the pool is busy (as when handlers hold theirs while the server is paused).
    const busy = await pool.connect();
    await expect(store.begin(jobId('tx-late'), 'token-late-0001', { fence: 1 })).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    busy.release();
    await sleep(300);
    // The connection is idle in the pool again, not checked out in a transaction nobody will end.
    expect({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }).toEqual({ total: 1, idle: 1, waiting: 0 });
  });

  it('more deliveries at once than the pool has connections: the transactions that hold one commit (no transaction waits for a renewal queued behind the others)', async () => {
    // Two connections, three deliveries at once (a burst: a receiver does not choose how
    // many arrive). Each handler takes longer than a third of the lease, so a renewal
    // comes due while it runs; the lease itself is never at risk (0.4 s of work, 0.9 s lease).
    const pool = poolOf(2);
    const table = `jobhook_txburst_${process.pid}`;
    const effects = `jobhook_txburst_effects_${process.pid}`;
    const store = new PostgresIdempotencyStore({ pool, table, transactional: true, operationTimeoutMs: 3000 });
    await store.migrate();
    await pool.query(`CREATE TABLE IF NOT EXISTS ${effects} (job_id text)`);
    const runner = createJobRunner({ store, leaseMs: 900, takeoverGraceMs: 0, log: {} });
    const ids = [jobId('burst-1'), jobId('burst-2'), jobId('burst-3')];
    const t0 = Date.now();
    const results: RunResult[] = await Promise.all(
      ids.map((id) =>
        runner.run(id, async (claim) => {
          await (claim.transaction as pg.PoolClient).query(`INSERT INTO ${effects} VALUES ($1)`, [id]);
          await sleep(400);
        }),
      ),
    );
    const seconds = (Date.now() - t0) / 1000;
    const committed = Number((await pool.query(`SELECT count(*) AS n FROM ${effects}`)).rows[0].n);
    await pool.query(`DROP TABLE IF EXISTS ${effects}`);
    // The two that got a connection finish their work in 0.4 s, well inside their lease.
    expect({ processed: results.filter((r) => r.kind === 'processed').length >= 2, committed: committed >= 2, fast: seconds < 2.5 }, JSON.stringify({ results, committed, seconds })).toEqual({
      processed: true,
      committed: true,
      fast: true,
    });
  });

  it('a transaction whose connection the server ends is reported through the store, and the process lives on', async () => {
    const pool = poolOf(2);
    const admin = poolOf(1);
    const store = new PostgresIdempotencyStore({ pool, table: `jobhook_txconn_${process.pid}`, transactional: true });
    const tx = await store.begin(jobId('tx-ended'), 'token-ended-0001', { fence: 1 });
    const { rows } = await tx.client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    // The server ends the session while the handler works (idle_in_transaction_session_timeout,
    // an administrator, a failover): no query of the client is running at that moment.
    const ended = new Promise((r) => tx.client.once('end', r));
    await admin.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
    await Promise.race([ended, sleep(3000)]);
    await sleep(50);
    await expect(tx.commit()).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
  });
});
