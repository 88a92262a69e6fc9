/**
 * The transactional PostgreSQL store's connections under faults, found by the fault
 * suite (test/faults/receiver-processes.faults.ts, "PostgreSQL transactional: store
 * paused 7 s"): a transaction's connection is checked out of the pool for as long as
 * the handler runs, so the store must give it back when it gave up on it, and must
 * hear its errors while it holds it; and a transaction holding a connection must not
 * wait for a renewal that needs another one.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PostgresIdempotencyStore } from '../../src/postgres.js';
import { createJobRunner, type ClaimContext, type RunResult } from '../../src/lib/jobs/runner.js';
import { jobId } from '../helpers/deliveries.js';
import { reports } from '../helpers/jobs.js';
import { startPgProxy, type PgProxy } from '../helpers/pg-proxy.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(inject('databaseUrl') === '')(
  'PostgreSQL transactional store: the connection of a transaction',
  () => {
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
      // Two connections: the least a transactional store accepts (issue 37 point 5).
      const pool = poolOf(2);
      const store = new PostgresIdempotencyStore({
        pool,
        table: `jobhook_txconn_${process.pid}`,
        transactional: true,
        operationTimeoutMs: 300,
      });
      // Every connection of the pool is busy (as when handlers hold theirs while the server is paused).
      const busy = [await pool.connect(), await pool.connect()];
      await expect(store.begin(jobId('tx-late'), 'token-late-0001', { fence: 1 })).rejects.toMatchObject({
        code: 'STORE_UNAVAILABLE',
      });
      for (const b of busy) b.release();
      await sleep(300);
      // The connections are idle in the pool again, none checked out in a transaction nobody will end.
      expect({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }).toEqual({
        total: 2,
        idle: 2,
        waiting: 0,
      });
    });

    it('more deliveries at once than the pool has connections: the transactions that hold one commit (no transaction waits for a renewal queued behind the others)', async () => {
      // Two connections, three deliveries at once (a burst: a receiver does not choose how
      // many arrive). Each handler takes longer than a third of the lease, so a renewal
      // comes due while it runs; the lease itself is never at risk (0.4 s of work, 0.9 s lease).
      const pool = poolOf(2);
      const table = `jobhook_txburst_${process.pid}`;
      const effects = `jobhook_txburst_effects_${process.pid}`;
      const store = new PostgresIdempotencyStore({
        pool,
        table,
        transactional: true,
        operationTimeoutMs: 3000,
      });
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
      expect(
        {
          processed: results.filter((r) => r.kind === 'processed').length >= 2,
          committed: committed >= 2,
          fast: seconds < 2.5,
        },
        JSON.stringify({ results, committed, seconds }),
      ).toEqual({
        processed: true,
        committed: true,
        fast: true,
      });
    });

    it('a transaction whose connection the server ends is reported through the store, and the process lives on', async () => {
      const pool = poolOf(2);
      const admin = poolOf(1);
      const store = new PostgresIdempotencyStore({
        pool,
        table: `jobhook_txconn_${process.pid}`,
        transactional: true,
      });
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
  },
);

/**
 * Issue 27: the transactional path at its edges, on the real server through a proxy that
 * reads the wire protocol (test/helpers/pg-proxy.ts) to cut, silence or delay the
 * statement chosen.
 */
describe.skipIf(inject('databaseUrl') === '')('PostgreSQL transactional mode at the edges (issue 27)', () => {
  const url = inject('databaseUrl');
  const admin = new pg.Pool({ connectionString: url, max: 4 });
  admin.on('error', () => undefined);
  const table = `jobhook_tx27_${process.pid}`;
  const effects = `jobhook_tx27_effects_${process.pid}`;
  const proxies: PgProxy[] = [];
  const stores: PostgresIdempotencyStore[] = [];
  const proxied = async () => {
    const p = await startPgProxy(url);
    proxies.push(p);
    return p;
  };
  const storeAt = async (at: string, options: { operationTimeoutMs?: number } = {}) => {
    const s = new PostgresIdempotencyStore({
      connectionString: at,
      table,
      transactional: true,
      operationTimeoutMs: 1500,
      ...options,
    });
    stores.push(s);
    return s;
  };
  const rows = async (id: string) =>
    (await admin.query<{ fence: string }>(`SELECT fence FROM ${effects} WHERE job_id = $1`, [id])).rows.map(
      (r) => Number(r.fence),
    );
  const state = async (id: string) =>
    (await admin.query<{ state: string }>(`SELECT state FROM ${table} WHERE job_id = $1`, [id])).rows[0]
      ?.state;
  beforeAll(async () => {
    await new PostgresIdempotencyStore({ pool: admin, table }).migrate();
    await admin.query(`CREATE TABLE IF NOT EXISTS ${effects} (job_id text PRIMARY KEY, fence bigint)`);
  });
  afterAll(async () => {
    await Promise.all(proxies.map((p) => p.close()));
    await Promise.race([Promise.all(stores.map((s) => s.close())), sleep(2000)]);
    await admin.query(`DROP TABLE IF EXISTS ${effects}`).catch(() => undefined);
    await admin.end();
  });
  /** A handler writing its row through the transaction and doing something outside it (an e-mail). */
  const handlerWith = (outside: number[], id: string) => async (claim: ClaimContext) => {
    outside.push(claim.fencingToken);
    await (claim.transaction as pg.PoolClient).query(
      `INSERT INTO ${effects} (job_id, fence) VALUES ($1, $2) ON CONFLICT (job_id) DO NOTHING`,
      [id, claim.fencingToken],
    );
  };
  const superseded = (heard: ReturnType<typeof reports>) =>
    heard.seen.filter((s) => s.stage === 'superseded').length;

  for (const fault of ['reset', 'unanswered'] as const) {
    it(`item 1: the transaction's connection ${fault === 'reset' ? 'reset as the completion statement is sent' : 'silent once the completion statement ran (no answer)'}: the retry runs the handler again and is reported (stage superseded); the row written through the transaction exists once`, async () => {
      const proxy = await proxied();
      const store = await storeAt(proxy.url, { operationTimeoutMs: 800 });
      const heard = reports();
      const runner = createJobRunner({
        store,
        leaseMs: 3000,
        takeoverGraceMs: 0,
        log: {},
        onError: heard.onError,
      });
      const id = jobId(`tx27-complete-${fault}`);
      const outside: number[] = [];
      const hit = proxy.arm({
        match: /SET state = 'completed'/,
        fault: fault === 'reset' ? 'reset' : 'blackhole',
        when: fault === 'reset' ? 'before' : 'after',
      });
      const first = await runner.run(id, handlerWith(outside, id));
      await hit;
      expect({ first, stages: heard.stages() }).toEqual({
        first: { kind: 'store_unavailable' },
        stages: ['complete'],
      });
      const second = await runner.run(id, handlerWith(outside, id));
      expect({
        second,
        outside: outside.length,
        rows: (await rows(id)).length,
        superseded: superseded(heard),
      }).toEqual({
        second: { kind: 'processed' },
        outside: 2,
        rows: 1,
        superseded: 1,
      });
    });
  }

  it('item 1: a handler that threw (onEvent did not finish) is retried without a report of a double', async () => {
    const store = await storeAt(url);
    const heard = reports();
    const runner = createJobRunner({
      store,
      leaseMs: 3000,
      takeoverGraceMs: 0,
      log: {},
      onError: heard.onError,
    });
    const id = jobId('tx27-threw');
    const outside: number[] = [];
    expect(
      await runner.run(id, async (claim) => {
        await handlerWith(outside, id)(claim);
        throw new Error('after the write');
      }),
    ).toEqual({ kind: 'handler_failed' });
    expect(await runner.run(id, handlerWith(outside, id))).toEqual({ kind: 'processed' });
    expect({ stages: heard.stages(), rows: (await rows(id)).length }).toEqual({
      stages: ['handler'],
      rows: 1,
    });
  });

  it('item 3: a holder whose connections go silent after its INSERT (the server keeps its session): its session ends within the lease plus a margin, and another receiver takes the job over once, writing its row', async () => {
    const proxy = await proxied();
    const leaseMs = 1000;
    const cutOff = await storeAt(proxy.url, { operationTimeoutMs: 1000 });
    const other = await storeAt(url, { operationTimeoutMs: 4000 });
    const heardA = reports();
    const heardB = reports();
    const a = createJobRunner({
      store: cutOff,
      leaseMs,
      takeoverGraceMs: 0,
      log: {},
      onError: heardA.onError,
    });
    const b = createJobRunner({
      store: other,
      leaseMs,
      takeoverGraceMs: 0,
      log: {},
      onError: heardB.onError,
    });
    const id = jobId('tx27-hostage');
    const outside: number[] = [];
    const silent = proxy.arm({
      match: new RegExp(`INSERT INTO ${effects}`),
      fault: 'blackhole-all',
      when: 'after',
    });
    const first = a.run(id, handlerWith(outside, id));
    const { pid } = await silent;
    // The claim lapses (its renewals are lost), then the other receiver claims it, as a retry would.
    await sleep(leaseMs + 200);
    const t0 = Date.now();
    const taken = await b.run(id, handlerWith(outside, id));
    const waited = Date.now() - t0;
    const session = (await admin.query(`SELECT state FROM pg_stat_activity WHERE pid = $1`, [pid])).rows;
    expect(
      { taken, rows: await rows(id), session, reportsOfB: heardB.stages(), quick: waited < 3000 },
      `took ${waited} ms`,
    ).toEqual({
      taken: { kind: 'processed' },
      rows: [outside[1]],
      session: [],
      // The takeover is reported once (what the cut-off holder did outside its transaction may repeat).
      reportsOfB: ['superseded'],
      quick: true,
    });
    proxy.heal();
    expect((await first).kind).not.toBe('processed');
  });

  it('item 3: a live handler idle on its transaction longer than the lease plus the margin keeps it (each renewal keeps it alive) and commits', async () => {
    const store = await storeAt(url);
    const heard = reports();
    const runner = createJobRunner({
      store,
      leaseMs: 600,
      takeoverGraceMs: 0,
      log: {},
      onError: heard.onError,
    });
    const id = jobId('tx27-idle');
    const result = await runner.run(id, async (claim) => {
      await (claim.transaction as pg.PoolClient).query(
        `INSERT INTO ${effects} (job_id, fence) VALUES ($1, $2)`,
        [id, claim.fencingToken],
      );
      await sleep(2500); // a call to another system, the transaction idle meanwhile
      await (claim.transaction as pg.PoolClient).query('SELECT 1');
    });
    expect({ result, rows: (await rows(id)).length, stages: heard.stages() }).toEqual({
      result: { kind: 'processed' },
      rows: 1,
      stages: [],
    });
  });

  for (const end of ['ROLLBACK', 'COMMIT'] as const) {
    it(`item 4: a handler that ends the transaction itself (${end} on ctx.transaction) fails (500, claim released, a log line), never 2xx`, async () => {
      const store = await storeAt(url);
      const heard = reports();
      const warned: string[] = [];
      const runner = createJobRunner({
        store,
        leaseMs: 3000,
        takeoverGraceMs: 0,
        log: { warn: (m: string) => warned.push(m), error: (m: string) => warned.push(m) },
        onError: heard.onError,
      });
      const id = jobId(`tx27-${end.toLowerCase()}`);
      const outside: number[] = [];
      const result = await runner.run(id, async (claim) => {
        await handlerWith(outside, id)(claim);
        await (claim.transaction as pg.PoolClient).query(end);
      });
      expect(
        {
          result,
          state: await state(id),
          log: warned.some((m) => m.includes(`ended the transaction (${end})`)),
        },
        warned.join('\n'),
      ).toEqual({
        result: { kind: 'handler_failed' },
        state: 'released',
        log: true,
      });
      // The retry processes it; after a COMMIT of the handler's own its row was already written (reported: it may have run twice).
      expect(await runner.run(id, handlerWith(outside, id))).toEqual({ kind: 'processed' });
      expect({ rows: (await rows(id)).length, superseded: superseded(heard) }).toEqual({
        rows: 1,
        superseded: end === 'COMMIT' ? 1 : 0,
      });
    });
  }

  it("item 5: a deferred constraint failing at COMMIT is the handler's failure: 500, claim released, no report of a double; the retry processes it", async () => {
    const store = await storeAt(url);
    const deferred = `${effects}_deferred`;
    await admin.query(
      `CREATE TABLE IF NOT EXISTS ${deferred} (k int, CONSTRAINT ${deferred}_k UNIQUE (k) DEFERRABLE INITIALLY DEFERRED)`,
    );
    const heard = reports();
    const runner = createJobRunner({
      store,
      leaseMs: 3000,
      takeoverGraceMs: 2000,
      log: {},
      onError: heard.onError,
    });
    const id = jobId('tx27-deferred');
    let twice = true;
    const handler = async (claim: ClaimContext) => {
      const tx = claim.transaction as pg.PoolClient;
      await tx.query(`INSERT INTO ${deferred} (k) VALUES (1)${twice ? ', (1)' : ''}`);
    };
    const first = await runner.run(id, handler);
    expect({ first, stages: heard.stages(), state: await state(id) }).toEqual({
      first: { kind: 'handler_failed' },
      stages: ['handler'],
      state: 'released',
    });
    twice = false;
    const t0 = Date.now();
    expect(await runner.run(id, handler)).toEqual({ kind: 'processed' });
    expect({ stages: heard.stages(), quick: Date.now() - t0 < 2500 }).toEqual({
      stages: ['handler'],
      quick: true,
    });
    await admin.query(`DROP TABLE ${deferred}`);
  });

  it('item 6: a renewal in flight when the handler ends (held 150 ms on its way) does not hold up the COMMIT', async () => {
    const proxy = await proxied();
    const store = await storeAt(proxy.url, { operationTimeoutMs: 3000 });
    const heard = reports();
    const runner = createJobRunner({
      store,
      leaseMs: 900,
      takeoverGraceMs: 0,
      log: {},
      onError: heard.onError,
    });
    const id = jobId('tx27-stall');
    const renewing = proxy.arm({ match: /coalesce\(\$4::bigint, nextval/, fault: { delayMs: 150 } });
    let handlerEnd = 0;
    const result = await runner.run(id, async (claim) => {
      await (claim.transaction as pg.PoolClient).query(
        `INSERT INTO ${effects} (job_id, fence) VALUES ($1, $2)`,
        [id, claim.fencingToken],
      );
      await renewing; // a renewal was just sent; it reaches the server 150 ms later
      handlerEnd = Date.now();
    });
    const tookMs = Date.now() - handlerEnd;
    expect(
      { result, rows: (await rows(id)).length, stages: heard.stages(), quick: tookMs < 1000 },
      `${tookMs} ms from the handler's end to the answer`,
    ).toEqual({
      result: { kind: 'processed' },
      rows: 1,
      stages: [],
      quick: true,
    });
  });
});
