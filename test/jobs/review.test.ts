/**
 * REVIEW of issue 18 (the job protocol): findings, one test each. Every test in this file
 * failed on the code under review (wip/review18 from main at 9fd40c9); F1, F2, F5–F8 and
 * F11 were fixed before this file landed (their names still say what went wrong), F3, F4,
 * F9 and F10 by the protocol's model v2 (src/lib/jobs/model.ts: released records, a
 * takeover's taint kept through a retried claim or a release, superseded completions
 * that stay superseded, lapsed claims kept 24 h; their names say what is required); the report to the lead (same branch) describes each one: the lines,
 * the interleaving, the consequence and a suggested fix. Real stores only: the
 * in-memory store, and Redis and PostgreSQL servers started by the test helpers. Faults
 * are made as the tests in runner.test.ts make them: a thin link in front of a real store
 * that loses a reply after the store acted (or refuses once the "process" is dead).
 *
 * Run: npx vitest run test/jobs/review.test.ts
 */
import pg from 'pg';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { MemoryIdempotencyStore, type IdempotencyStore } from '../../src/index.js';
import { createReconciler } from '../../src/gateway.js';
import { type ClaimContext } from '../../src/store.js';
import { PostgresIdempotencyStore } from '../../src/postgres.js';
import { RedisIdempotencyStore } from '../../src/redis.js';
import { StoreUnavailableError } from '../../src/lib/base/errors.js';
import { createJobRunner, type RunResult } from '../../src/lib/jobs/runner.js';
import { pausableClock, reports } from '../helpers/jobs.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let serial = 0;
const newId = (what: string) => `review-${what}-${process.pid}-${Date.now()}-${serial++}`;

/**
 * Runs `body` with this process's uncaughtException listeners (vitest's) replaced by one
 * that records what reaches it: an 'error' event nobody listens to would crash a
 * receiver process; here it is counted instead.
 */
async function catchingUncaught<T>(body: () => Promise<T>): Promise<{ value: T; uncaught: unknown[] }> {
  const saved = process.listeners('uncaughtException');
  process.removeAllListeners('uncaughtException');
  const uncaught: unknown[] = [];
  const catcher = (err: unknown) => void uncaught.push(err);
  process.on('uncaughtException', catcher);
  try {
    const value = await body();
    await sleep(100);
    return { value, uncaught };
  } finally {
    process.removeListener('uncaughtException', catcher);
    for (const l of saved) process.on('uncaughtException', l);
  }
}

describe.skipIf(inject('databaseUrl') === '')('REVIEW issue 18: PostgreSQL transactional mode', () => {
  const url = inject('databaseUrl');
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  pool.on('error', () => undefined);
  const table = `jobhook_review_${process.pid}`;
  const effects = `jobhook_review_effects_${process.pid}`;
  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${effects}`).catch(() => undefined);
    await pool.query(`DROP TABLE IF EXISTS ${table}`).catch(() => undefined);
    await pool.query(`DROP TABLE IF EXISTS ${table}_pending`).catch(() => undefined);
    await pool.end();
  });
  const count = async (id: string) =>
    Number((await pool.query(`SELECT count(*) AS n FROM ${effects} WHERE job_id = $1`, [id])).rows[0].n);

  it("F1: the server ending a handler's transaction connection (idle_in_transaction_session_timeout, a restart, pg_terminate_backend) must not crash the process: begin() leaves the checked-out client without an error listener", async () => {
    await pool.query(`CREATE TABLE IF NOT EXISTS ${effects} (job_id text, fence bigint)`);
    const store = new PostgresIdempotencyStore({ pool, table, transactional: true });
    await store.migrate();
    const runner = createJobRunner({ store, log: {} });
    const id = newId('f1');
    const { value, uncaught } = await catchingUncaught(() =>
      runner.run(id, async (claim: ClaimContext) => {
        const tx = claim.transaction as pg.PoolClient;
        await tx.query(`INSERT INTO ${effects} VALUES ($1, $2)`, [id, claim.fencingToken]);
        // The database (or its role) ends transactions left idle this long, as managed services often do.
        await tx.query(`SET LOCAL idle_in_transaction_session_timeout = '200ms'`);
        await sleep(700); // the handler awaits something else (an HTTP call) meanwhile
      }),
    );
    // The transaction is gone, so nothing may be applied and the run must not count as processed...
    expect(await count(id)).toBe(0);
    expect(value.kind).not.toBe('processed');
    // ...but the receiver process must survive it: a pg client emitting 'error' with no listener throws.
    expect(uncaught.map((e) => String((e as Error)?.message ?? e))).toEqual([]);
  });

  it('F2: begin() that times out while waiting for a pool connection leaks that connection for good (an orphaned BEGIN), so the store stops answering', async () => {
    // A pool you pass (no connectionTimeoutMillis: pg waits for a free client as long as it takes), two
    // connections (the least a transactional store accepts, issue 37 point 5).
    const small = new pg.Pool({
      connectionString: url,
      max: 2,
      application_name: `review_f2_${process.pid}`,
    });
    small.on('error', () => undefined);
    small.on('connect', (c) => void c.on('error', () => undefined)); // so the clean-up below cannot crash the test (F1)
    const store = new PostgresIdempotencyStore({
      pool: small,
      table,
      transactional: true,
      operationTimeoutMs: 300,
    });
    await store.migrate();
    try {
      // The handlers of other deliveries hold every connection.
      const busy = [await small.connect(), await small.connect()];
      await expect(store.begin(newId('f2'), 'review-token-f2', { fence: 1 })).rejects.toThrow(
        StoreUnavailableError,
      );
      for (const b of busy) b.release(); // ...and finish
      for (let waited = 0; waited < 3000 && small.idleCount < 2; waited += 50) await sleep(50);
      // The connections should be back in the pool; an orphaned begin() would take one and never give it back.
      expect({ idle: small.idleCount, total: small.totalCount }).toEqual({ idle: 2, total: 2 });
      await expect(store.ping()).resolves.toBeUndefined();
    } finally {
      await pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, [
        `review_f2_${process.pid}`,
      ]);
    }
  });
});

/**
 * A receiver's link to a real store that can lose the reply of its next claim: the store
 * acts, the caller gets a timeout (a dropped connection, a reply past the deadline).
 */
function losingClaimReplies(store: IdempotencyStore) {
  let lose = 0;
  const link: IdempotencyStore = {
    claim: async (id, o) => {
      const r = await store.claim(id, o);
      if (lose > 0) {
        lose--;
        throw new StoreUnavailableError('claim: the reply was lost');
      }
      return r;
    },
    renew: (id, t, o) => store.renew!(id, t, o),
    complete: (id, t, o) => store.complete(id, t, o),
    release: (id, t) => store.release(id, t),
  };
  return { link, loseNext: () => void lose++ };
}

/**
 * F3, on each store: a holder applied its effect and died (its lease lapses). The next
 * delivery's claim takes the job over, but its reply is lost: the runner answers 503 and
 * queues an undo. What the store knew (this job was taken from a holder that may have
 * finished) was then gone: the retry claimed again with the same token (takeUndo:
 * acquired, tookOver false), or, once the undo's release went out, claimed a free job,
 * and the handler ran a second time without a word. Model v2: a claim made again by its
 * token keeps `tookOver`, and a released takeover leaves a tainted release whose next
 * claim is `tookOver` too.
 */
function lostTakeoverReply(name: string, make: () => Promise<IdempotencyStore>, leaseMs: number) {
  it(`F3 (${name}): a takeover whose reply was lost, then the retry reusing the undo token: reported as may-have-run-twice`, async () => {
    const store = await make();
    const { link, loseNext } = losingClaimReplies(store);
    const heard = reports();
    const runner = createJobRunner({
      store: link,
      leaseMs,
      takeoverGraceMs: 0,
      log: {},
      onError: heard.onError,
    });
    const id = newId('f3a');
    const crashed = await store.claim(id, { leaseMs: 50 }); // applied its effect, then kill -9
    expect(crashed.status).toBe('acquired');
    await sleep(120);
    let runs = 0;
    loseNext();
    expect(await runner.run(id, () => void runs++)).toEqual({ kind: 'store_unavailable' });
    expect(await runner.run(id, () => void runs++)).toEqual({ kind: 'processed' });
    expect(runs).toBe(1); // the crashed holder's run + this one: twice
    expect(heard.stages()).toContain('superseded');
  });

  it(`F3 (${name}): a takeover whose reply was lost, then the retry after the undo released it: reported as may-have-run-twice`, async () => {
    const store = await make();
    const { link, loseNext } = losingClaimReplies(store);
    const heard = reports();
    const runner = createJobRunner({
      store: link,
      leaseMs,
      takeoverGraceMs: 0,
      log: {},
      onError: heard.onError,
    });
    const id = newId('f3b');
    const crashed = await store.claim(id, { leaseMs: 50 });
    expect(crashed.status).toBe('acquired');
    await sleep(120);
    let runs = 0;
    loseNext();
    expect(await runner.run(id, () => void runs++)).toEqual({ kind: 'store_unavailable' });
    for (let i = 0; i < 40 && runner.pending > 0; i++) await sleep(50); // the undo goes out and releases the takeover
    expect(runner.pending).toBe(0);
    expect(await runner.run(id, () => void runs++)).toEqual({ kind: 'processed' });
    expect(runs).toBe(1);
    expect(heard.stages()).toContain('superseded');
  });
}

describe('REVIEW issue 18: lost takeover replies', () => {
  lostTakeoverReply('memory', async () => new MemoryIdempotencyStore(), 1_000);

  describe.skipIf(inject('redisUrl') === '')('Redis', () => {
    const client = new Redis(inject('redisUrl'));
    afterAll(async () => {
      await client.quit();
    });
    let n = 0;
    lostTakeoverReply(
      'Redis',
      async () =>
        new RedisIdempotencyStore({
          client,
          keyPrefix: `review:${process.pid}:${n}:job:`,
          pendingKey: `review:${process.pid}:${n++}:pending`,
          log: {},
        }),
      1_000,
    );
  });

  describe.skipIf(inject('databaseUrl') === '')('PostgreSQL', () => {
    const pool = new pg.Pool({ connectionString: inject('databaseUrl'), max: 5 });
    pool.on('error', () => undefined);
    const table = `jobhook_review_f3_${process.pid}`;
    afterAll(async () => {
      await pool.query(`DROP TABLE IF EXISTS ${table}`).catch(() => undefined);
      await pool.query(`DROP TABLE IF EXISTS ${table}_pending`).catch(() => undefined);
      await pool.end();
    });
    lostTakeoverReply(
      'PostgreSQL',
      async () => {
        const s = new PostgresIdempotencyStore({ pool, table });
        await s.migrate();
        return s;
      },
      1_000,
    );
  });
});

/**
 * F4, on each shared store: receiver 1's handler applies its effect, its completion gets no
 * answer (a store blip), the delivery is answered 200 (processed), then the process is
 * killed. The gateway sends nothing more; 6 min later the reconciler (5 min grace) polls
 * the job and runs it again. The lapsed claim was forgotten after 60 s (PostgreSQL's
 * purge, Redis's key life), so nothing said so. Now it is kept 24 h: the reconciler's
 * claim takes it over at once (its lease ended past the grace window) and reports it.
 * `age`: what the store does to its records in those 6 min.
 */
function forgottenBeforeReconciler(
  name: string,
  make: (now: () => number) => Promise<PendingStoreLike>,
  age: (store: PendingStoreLike, id: string) => Promise<void>,
) {
  it(`F4 (${name}): answered 200 with its completion only in the in-memory repair queue, then the process dies: 6 min later the lapsed claim is still kept, and the reconciler (5 min grace) that runs the job again reports it as may-have-run-twice`, async () => {
    let now = Date.now();
    const store = await make(() => now);
    const id = newId('f4');
    await store.trackPending(id, { since: now - 60_000 }); // created through the gateway client

    // Receiver 1: the handler applies its effect, the completion gets no answer (a store blip),
    // the delivery is answered 200 (processed); then the process is killed (its link goes dead).
    let dead = false;
    const link: IdempotencyStore = {
      claim: (j, o) => store.claim(j, o),
      renew: async (j, t, o) => {
        if (dead) throw new StoreUnavailableError('process gone');
        return store.renew!(j, t, o);
      },
      complete: async () => {
        dead = true;
        throw new StoreUnavailableError('complete: no reply');
      },
      release: async () => {
        throw new StoreUnavailableError('process gone');
      },
    };
    const effects: string[] = [];
    const first = createJobRunner({ store: link, log: {} });
    expect(await first.run(id, () => void effects.push('webhook'))).toEqual({ kind: 'processed' });

    // The gateway got its 200 and sends nothing more.
    now += 6 * 60_000;
    await age(store, id);

    const heard = reports();
    const reconciler = createReconciler({
      client: {
        getJob: async (jobId: string) => ({
          public_id: jobId,
          status: 'success' as const,
          output: { text: 'done' },
        }),
      },
      store,
      log: {},
      onError: heard.onError,
      now: () => now,
      onEvent: () => void effects.push('poll'),
    });
    const report = await reconciler.runOnce();
    await reconciler.stop();
    expect(report.processed).toBe(1);
    expect(effects).toEqual(['webhook', 'poll']); // it ran twice...
    expect(heard.stages()).toContain('superseded'); // ...and must be reported
  });
}

type PendingStoreLike = IdempotencyStore & Required<Pick<IdempotencyStore, 'trackPending'>>;

describe('REVIEW issue 18: what the store forgets before the reconciler comes', () => {
  describe.skipIf(inject('databaseUrl') === '')('PostgreSQL', () => {
    const pool = new pg.Pool({ connectionString: inject('databaseUrl'), max: 5 });
    pool.on('error', () => undefined);
    const table = `jobhook_review_f4_${process.pid}`;
    afterAll(async () => {
      await pool.query(`DROP TABLE IF EXISTS ${table}`).catch(() => undefined);
      await pool.query(`DROP TABLE IF EXISTS ${table}_pending`).catch(() => undefined);
      await pool.end();
    });
    forgottenBeforeReconciler(
      'PostgreSQL',
      async (now) => {
        const s = new PostgresIdempotencyStore({ pool, table, now });
        await s.migrate();
        return s;
      },
      // purgeExpired() runs (hourly, as the README says).
      async (store) => void (await (store as PostgresIdempotencyStore).purgeExpired()),
    );
  });

  describe.skipIf(inject('redisUrl') === '')('Redis', () => {
    const client = new Redis(inject('redisUrl'));
    afterAll(async () => {
      await client.quit();
    });
    const prefix = `review-f4:${process.pid}:job:`;
    forgottenBeforeReconciler(
      'Redis',
      async (now) =>
        new RedisIdempotencyStore({
          client,
          keyPrefix: prefix,
          pendingKey: `review-f4:${process.pid}:pending`,
          now,
          log: {},
        }),
      // The key would have expired by now (its life is counted in real time): it must live longer than the 6 min.
      async (_store, id) => expect(await client.pttl(prefix + id)).toBeGreaterThan(6 * 60_000),
    );
  });
});

describe.skipIf(inject('databaseUrl') === '')(
  'REVIEW issue 18: transactional mode under load and other isolation levels',
  () => {
    const url = inject('databaseUrl');
    const admin = new pg.Pool({ connectionString: url, max: 2 });
    admin.on('error', () => undefined);
    const table = `jobhook_review_tx_${process.pid}`;
    const effects = `jobhook_review_txfx_${process.pid}`;
    const pools: pg.Pool[] = [];
    const poolOf = (config: pg.PoolConfig) => {
      const p = new pg.Pool({ connectionString: url, ...config });
      p.on('error', () => undefined);
      p.on('connect', (c) => void c.on('error', () => undefined)); // F1 aside
      pools.push(p);
      return p;
    };
    afterAll(async () => {
      await Promise.all(pools.map((p) => p.end().catch(() => undefined)));
      for (const t of [effects, table, `${table}_pending`])
        await admin.query(`DROP TABLE IF EXISTS ${t}`).catch(() => undefined);
      await admin.end();
    });
    const count = async (id: string) =>
      Number((await admin.query(`SELECT count(*) AS n FROM ${effects} WHERE job_id = $1`, [id])).rows[0].n);

    it('F5: as many deliveries at once as the pool has connections, handlers slower than the lease: the renewals wait behind the transactions, every holder self-fences and rolls back, though the store is healthy (and the retries do the same)', async () => {
      await admin.query(`CREATE TABLE IF NOT EXISTS ${effects} (job_id text, fence bigint)`);
      const pool = poolOf({ max: 2 });
      const store = new PostgresIdempotencyStore({
        pool,
        table,
        transactional: true,
        operationTimeoutMs: 1_500,
      });
      await store.migrate();
      const runner = createJobRunner({ store, leaseMs: 600, log: {} });
      const ids = [newId('f5a'), newId('f5b')];
      const handler = (id: string) => async (claim: ClaimContext) => {
        await (claim.transaction as pg.PoolClient).query(`INSERT INTO ${effects} VALUES ($1, $2)`, [
          id,
          claim.fencingToken,
        ]);
        await sleep(1_000);
      };
      const results = await Promise.all(ids.map((id) => runner.run(id, handler(id))));
      expect(results).toEqual<RunResult[]>([{ kind: 'processed' }, { kind: 'processed' }]);
      expect(await Promise.all(ids.map(count))).toEqual([1, 1]);
    });

    it('F6: a database whose default isolation is REPEATABLE READ or SERIALIZABLE: a handler that writes, then takes longer than one renewal period, can never complete (the renewals update the job row after its snapshot: 40001 at the completion), so the job is never processed', async () => {
      await admin.query(`CREATE TABLE IF NOT EXISTS ${effects} (job_id text, fence bigint)`);
      const pool = poolOf({ max: 6, options: '-c default_transaction_isolation=serializable' });
      const store = new PostgresIdempotencyStore({ pool, table, transactional: true });
      await store.migrate();
      const heard = reports();
      const runner = createJobRunner({ store, leaseMs: 600, log: {}, onError: heard.onError });
      const id = newId('f6');
      const handler = async (claim: ClaimContext) => {
        await (claim.transaction as pg.PoolClient).query(`INSERT INTO ${effects} VALUES ($1, $2)`, [
          id,
          claim.fencingToken,
        ]);
        await sleep(450); // two renewals (every 200 ms) land meanwhile
      };
      const results: RunResult[] = [];
      for (let attempt = 0; attempt < 3; attempt++) {
        const r = await runner.run(id, handler);
        results.push(r);
        if (r.kind === 'processed') break;
      }
      expect({
        results,
        errors: heard.seen.map((s) => `${s.stage}: ${String((s.error as Error).message).slice(0, 100)}`),
      }).toEqual({ results: [{ kind: 'processed' }], errors: [] });
      expect(await count(id)).toBe(1);
    });
  },
);

describe.skipIf(inject('databaseUrl') === '')(
  'REVIEW issue 18: transactional mode, effects outside the transaction',
  () => {
    const pool = new pg.Pool({ connectionString: inject('databaseUrl'), max: 5 });
    pool.on('error', () => undefined);
    const table = `jobhook_review_f7_${process.pid}`;
    afterAll(async () => {
      await pool.query(`DROP TABLE IF EXISTS ${table}`).catch(() => undefined);
      await pool.query(`DROP TABLE IF EXISTS ${table}_pending`).catch(() => undefined);
      await pool.end();
    });

    it('F7: a handler that resolved, rolled back because its lease could not be confirmed (a pause), then released: the retry runs it again and its effects outside the transaction happen twice without a report', async () => {
      const store = new PostgresIdempotencyStore({ pool, table, transactional: true });
      await store.migrate();
      const clock = pausableClock();
      const heard = reports();
      const runner = createJobRunner({ store, leaseMs: 5_000, log: {}, onError: heard.onError }, clock);
      const id = newId('f7');
      const mails: number[] = [];
      const first = await runner.run(id, async (claim) => {
        mails.push(claim.fencingToken); // an e-mail, a call to a payment API: not in the transaction
        clock.pause(6_000); // SIGSTOP / a long GC right after it
      });
      // Issue 37 point 3: the completion statement matched the claim and locked its row, so the
      // COMMIT is safe whatever this holder's clock says: processed once, nothing to report.
      expect(first).toEqual({ kind: 'processed' });
      expect(await runner.run(id, (claim) => void mails.push(claim.fencingToken))).toEqual({
        kind: 'duplicate',
      });
      expect(mails).toHaveLength(1);
      expect(heard.stages()).toEqual([]);
    });

    it("F11: a handler that swallowed an SQL error in its transaction (the transaction is aborted): reported and answered as a store outage (503 STORE_UNAVAILABLE, stage complete), not as the handler's failure", async () => {
      const store = new PostgresIdempotencyStore({ pool, table, transactional: true });
      await store.migrate();
      const heard = reports();
      const runner = createJobRunner({ store, log: {}, onError: heard.onError });
      const id = newId('f11');
      const result = await runner.run(id, async (claim) => {
        // "Insert, and if it is there already, fine": right in autocommit, but in a transaction
        // the error aborts it (25P02 for every later statement) unless a SAVEPOINT was taken.
        await (claim.transaction as pg.PoolClient).query('SELECT 1/0').catch(() => undefined);
      });
      expect({ result, stages: heard.stages() }).toEqual({
        result: { kind: 'handler_failed' },
        stages: ['handler'],
      });
      // The store is fine all along.
      await expect(store.ping()).resolves.toBeUndefined();
    });
  },
);

describe('REVIEW issue 18: the repair queue', () => {
  it("F8: two completions of one job waiting in one runner (a holder cut off, the job taken over in the same process): the later one replaces the earlier, the taker's completion is dropped, and the job is left claimed: a third run follows", async () => {
    const shared = new MemoryIdempotencyStore();
    let cutOff: string | undefined; // the first holder's link to the store carries no renewals
    let completeDown = false;
    const link: IdempotencyStore = {
      claim: async (j, o) => {
        const r = await shared.claim(j, o);
        if (r.status === 'acquired') cutOff ??= r.token;
        return r;
      },
      renew: async (j, t, o) => {
        if (t === cutOff) throw new StoreUnavailableError('renew: no reply');
        return shared.renew(j, t, o);
      },
      complete: async (j, t, o) => {
        if (completeDown) throw new StoreUnavailableError('complete: no reply');
        return shared.complete(j, t, o);
      },
      release: (j, t) => shared.release(j, t),
    };
    const heard = reports();
    const runner = createJobRunner({
      store: link,
      leaseMs: 300,
      takeoverGraceMs: 0,
      log: {},
      onError: heard.onError,
    });
    const id = newId('f8');
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const first = runner.run(id, () => gate); // holder 1: its lease lapses while its handler runs
    await sleep(450);
    completeDown = true;
    expect(await runner.run(id, () => undefined)).toEqual({ kind: 'processed' }); // holder 2 took over (reported), its completion queued
    open();
    // Holder 1's signal fired while it ran (issue 37 point 7): final, not recorded, reported.
    expect(await first).toEqual({ kind: 'claim_lost', retryAfterMs: 300 });
    completeDown = false;
    for (let i = 0; i < 40 && runner.pending > 0; i++) await sleep(25);
    expect(runner.pending).toBe(0);
    await sleep(400); // holder 2's lease, no longer renewed, lapses
    // Both handlers finished and both deliveries were answered 200: the job must be recorded as done.
    expect(await shared.claim(id, { leaseMs: 1_000 })).toEqual({ status: 'completed' });
  });
});

/**
 * F9, on each store: a completion that superseded a taker which had lapsed itself is
 * recorded and answered `superseded`; when that reply is lost, the runner's retry of the
 * same completion was answered `completed`: the "may have run twice" was gone. Model v2:
 * the completed record says it was superseded, and a retry gets `superseded` again.
 */
function retriedSupersededCompletion(name: string, make: () => Promise<IdempotencyStore>) {
  it(`F9 (${name}): a superseded completion retried after its reply was lost is answered 'superseded' again`, async () => {
    const store = await make();
    const id = newId('f9');
    const a = await store.claim(id, { leaseMs: 50 });
    if (a.status !== 'acquired') throw new Error(a.status);
    await sleep(80);
    const b = await store.claim(id, { leaseMs: 50 });
    expect(b).toMatchObject({ status: 'acquired', tookOver: true });
    await sleep(80); // the taker lapsed too (it may be gone)
    expect(await store.complete(id, a.token, { retainMs: 60_000, fence: a.fence })).toBe('superseded');
    // The same call again (the runner's repair queue retries a completion whose reply it never got):
    expect(await store.complete(id, a.token, { retainMs: 60_000, fence: a.fence })).toBe('superseded');
  });
}

describe('REVIEW issue 18: replies to a retried completion', () => {
  retriedSupersededCompletion('memory', async () => new MemoryIdempotencyStore());
  describe.skipIf(inject('redisUrl') === '')('Redis', () => {
    const client = new Redis(inject('redisUrl'));
    afterAll(async () => {
      await client.quit();
    });
    retriedSupersededCompletion(
      'Redis',
      async () =>
        new RedisIdempotencyStore({
          client,
          keyPrefix: `review-f9:${process.pid}:job:`,
          pendingKey: `review-f9:${process.pid}:pending`,
          log: {},
        }),
    );
  });
  describe.skipIf(inject('databaseUrl') === '')('PostgreSQL', () => {
    const pool = new pg.Pool({ connectionString: inject('databaseUrl'), max: 3 });
    pool.on('error', () => undefined);
    const table = `jobhook_review_f9_${process.pid}`;
    afterAll(async () => {
      await pool.query(`DROP TABLE IF EXISTS ${table}`).catch(() => undefined);
      await pool.query(`DROP TABLE IF EXISTS ${table}_pending`).catch(() => undefined);
      await pool.end();
    });
    retriedSupersededCompletion('PostgreSQL', async () => {
      const s = new PostgresIdempotencyStore({ pool, table });
      await s.migrate();
      return s;
    });
  });
});

describe('REVIEW issue 18: late renewals', () => {
  it('F10: a renewal that timed out but reaches the store after its holder released the job (the handler threw) is superseded by the kept release and claims nothing: the retry processes the job at once, with no false "may have run twice"', async () => {
    const shared = new MemoryIdempotencyStore();
    let late = true;
    const link: IdempotencyStore = {
      claim: (j, o) => shared.claim(j, o),
      renew: (j, t, o) => {
        if (!late) return shared.renew(j, t, o);
        late = false;
        // The request goes out, its answer does not come in time (guarded() gives up), the store gets it later.
        const landing = sleep(300).then(() => shared.renew(j, t, o));
        landing.catch(() => undefined);
        return Promise.race([
          landing,
          sleep(50).then(() => Promise.reject(new StoreUnavailableError('renew: no reply in time'))),
        ]);
      },
      complete: (j, t, o) => shared.complete(j, t, o),
      release: (j, t) => shared.release(j, t),
    };
    const heard = reports();
    const runner = createJobRunner({
      store: link,
      leaseMs: 300,
      takeoverGraceMs: 0,
      log: {},
      onError: heard.onError,
    });
    const id = newId('f10');
    const failed = await runner.run(id, async () => {
      await sleep(200); // the first renewal went out at 100 ms
      throw new Error('the handler failed');
    });
    expect(failed).toEqual({ kind: 'handler_failed' });
    await sleep(300); // the late renewal lands
    expect(await runner.run(id, () => undefined)).toEqual({ kind: 'processed' });
    expect(heard.stages()).not.toContain('superseded');
  });
});
