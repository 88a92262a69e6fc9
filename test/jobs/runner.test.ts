/**
 * The job runner (src/lib/jobs/runner.ts, claim.ts): what a handler is told about its
 * claim (fencing number, holdsClaim, signal), self-fencing on the monotonic clock, every
 * job that may have run twice reported, and the PostgreSQL transactional mode on a real
 * server (effects committed with the completion, exactly once).
 */
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import {
  createReceiver,
  MemoryIdempotencyStore,
  type IdempotencyStore,
  type ReceiverAnswer,
  type TransactionalStore,
} from '../../src/index.js';
import { type ClaimContext } from '../../src/store.js';
import { PostgresIdempotencyStore } from '../../src/postgres.js';
import { StoreUnavailableError } from '../../src/lib/base/errors.js';
import { systemClock } from '../../src/lib/jobs/clock.js';
import { createJobRunner } from '../../src/lib/jobs/runner.js';
import { jobId, payloadText, signed } from '../helpers/deliveries.js';
import { privatePem, publicPem } from '../helpers/keys.js';
import { signDelivery } from '../../src/index.js';
import { pausableClock, reports } from '../helpers/jobs.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const publicKey = publicPem(2048);
const code = (a: ReceiverAnswer) => {
  const body = JSON.parse(a.body) as { status?: string; error?: { code: string } };
  return `${a.status} ${body.status ?? body.error?.code}`;
};

describe('job runner', () => {
  it('gives the handler its fencing number; a takeover gets a larger one and is reported as a job that may have run twice', async () => {
    const store = new MemoryIdempotencyStore();
    const heard = reports();
    const runner = createJobRunner({
      store,
      leaseMs: 100,
      takeoverGraceMs: 0,
      log: {},
      onError: heard.onError,
    });
    const id = jobId('fence');
    // A holder that crashed: its claim lapses.
    const crashed = await store.claim(id, { leaseMs: 50 });
    if (crashed.status !== 'acquired') throw new Error(crashed.status);
    await sleep(80);
    let seen: ClaimContext | undefined;
    expect(await runner.run(id, (claim) => void (seen = claim))).toEqual({ kind: 'processed' });
    expect(seen!.fencingToken).toBeGreaterThan(crashed.fence);
    expect(heard.stages()).toEqual(['superseded']);
    expect(heard.seen[0]).toMatchObject({ jobId: id, error: { code: 'JOB_SUPERSEDED', jobId: id } });
    expect(String((heard.seen[0]!.error as Error).message)).toMatch(/may have run twice/);
    // A job nobody held before: no report.
    expect(await runner.run(jobId('fresh'), () => undefined)).toEqual({ kind: 'processed' });
    expect(heard.stages()).toEqual(['superseded']);
  });

  it('a holder whose job was taken over while it ran: its completion is refused, reported (superseded), never counted as a plain success', async () => {
    const shared = new MemoryIdempotencyStore();
    // This instance's link to the store stops taking renewals: its lease lapses while the handler runs.
    let renewDown = false;
    const link: IdempotencyStore = {
      claim: (id, o) => shared.claim(id, o),
      renew: async (id, t, o) => {
        if (renewDown) throw new StoreUnavailableError('renew: no reply');
        return shared.renew(id, t, o);
      },
      complete: (id, t, o) => shared.complete(id, t, o),
      release: (id, t) => shared.release(id, t),
    };
    const heard = reports();
    const runner = createJobRunner({
      store: link,
      leaseMs: 150,
      takeoverGraceMs: 0,
      log: {},
      onError: heard.onError,
    });
    const id = jobId('taken-while-running');
    let aborted: unknown;
    const result = await runner.run(id, async (claim) => {
      renewDown = true;
      await sleep(300);
      // Another instance takes the lapsed job over and completes it.
      const other = await shared.claim(id, { leaseMs: 10_000 });
      if (other.status !== 'acquired') throw new Error(other.status);
      await shared.complete(id, other.token, { retainMs: 60_000 });
      expect(claim.holdsClaim()).toBe(false);
      aborted = claim.signal.reason;
    });
    // Its signal fired while it ran (issue 37 point 7): final, never recorded as processed.
    expect(result).toEqual({ kind: 'claim_lost', retryAfterMs: 150 });
    expect(aborted).toMatchObject({ code: 'CLAIM_LOST' });
    expect(heard.stages()).toContain('superseded');
    expect(heard.seen.find((s) => s.stage === 'superseded')).toMatchObject({
      jobId: id,
      error: { code: 'JOB_SUPERSEDED' },
    });
  });

  it('self-fencing: right after a pause longer than the lease, holdsClaim() is false before any timer or renewal has run', async () => {
    const clock = pausableClock();
    const runner = createJobRunner({ store: new MemoryIdempotencyStore(), leaseMs: 5_000, log: {} }, clock);
    const answers: boolean[] = [];
    await runner.run(jobId('paused'), (claim) => {
      answers.push(claim.holdsClaim());
      clock.pause(4_500); // past the lease minus its safety margin (1 s of 5 s), as a SIGSTOP would
      answers.push(claim.holdsClaim());
    });
    expect(answers).toEqual([true, false]);
  });

  it('self-fencing: a store that stops answering renewals aborts the signal before the lease can lapse in the store', async () => {
    const shared = new MemoryIdempotencyStore();
    const link: IdempotencyStore = {
      claim: (id, o) => shared.claim(id, o),
      renew: async () => {
        throw new StoreUnavailableError('renew: no reply');
      },
      complete: (id, t, o) => shared.complete(id, t, o),
      release: (id, t) => shared.release(id, t),
    };
    const runner = createJobRunner({ store: link, leaseMs: 500, log: {} });
    const id = jobId('unconfirmed');
    let abortedAt = -1;
    const started = performance.now();
    await runner.run(id, async (claim) => {
      claim.signal.addEventListener('abort', () => void (abortedAt = performance.now() - started));
      await sleep(700);
    });
    // The lease (500 ms) minus the margin (100 ms): aborted at about 400 ms, before the store's lease end.
    expect(abortedAt).toBeGreaterThan(350);
    expect(abortedAt).toBeLessThan(500);
  });

  it('a handler that throws releases its claim: the retry runs the job (no report of a double)', async () => {
    const heard = reports();
    const runner = createJobRunner({ store: new MemoryIdempotencyStore(), log: {}, onError: heard.onError });
    const id = jobId('throws');
    expect(await runner.run(id, () => Promise.reject(new Error('db down at 10.0.0.3')))).toEqual({
      kind: 'handler_failed',
    });
    let ran = 0;
    expect(await runner.run(id, () => void ran++)).toEqual({ kind: 'processed' });
    expect(ran).toBe(1);
    expect(heard.stages()).toEqual(['handler']);
  });

  it('a receiver and the reconciler can share one runner; options that belong to the runner are refused beside it', () => {
    const runner = createJobRunner({ log: {} });
    expect(() => createReceiver({ publicKey, runner, leaseMs: 1000, onEvent: () => undefined })).toThrow(
      /leaseMs belongs to the job runner/,
    );
    expect(() => createReceiver({ publicKey, runner, onEvent: () => undefined })).not.toThrow();
    // The replay window is held to the shared runner's retention.
    const short = createJobRunner({ retainMs: 60_000, log: {} });
    expect(() => createReceiver({ publicKey, runner: short, onEvent: () => undefined })).toThrow(
      /maxAgeSeconds/,
    );
  });
});

describe('replay window', () => {
  const receiver = (onEvent = () => undefined) => createReceiver({ publicKey, log: {}, onEvent });
  const at = (finished: string, created = '2026-11-21T10:00:00Z') => {
    const base = payloadText(jobId('times'));
    return signDelivery(
      base
        .replace(/"finished_at":"[^"]*"/, `"finished_at":"${finished}"`)
        .replace(/"created_at":"[^"]*"/, `"created_at":"${created}"`),
      privatePem(2048),
    );
  };
  const iso = (ms: number) => new Date(ms).toISOString();

  it('refuses a finished_at more than maxFutureSkewSeconds ahead (401 EVENT_FROM_FUTURE); a little ahead is fine', async () => {
    const receive = receiver();
    const ahead = at(iso(Date.now() + 400_000));
    expect(code(await receive(ahead))).toBe('401 EVENT_FROM_FUTURE');
    expect(code(await receive(at(iso(Date.now() + 60_000))))).toBe('200 processed');
  });

  it('takes RFC 3339 date-times only (400 PAYLOAD_INVALID for what Date.parse would guess)', async () => {
    const receive = receiver();
    const now = Date.now();
    for (const ok of [
      iso(now - 1000),
      iso(now - 1000).replace('T', ' '),
      iso(now - 1000).replace('Z', '+00:00'),
      new Date(now - 1000).toISOString().replace(/\.\d+Z$/, '.123456Z'),
    ]) {
      expect(code(await receive(at(ok))), ok).toBe('200 processed');
    }
    const local = new Date(now - 1000).toISOString().slice(0, 19); // no offset: its meaning depends on the reader's zone
    for (const bad of [
      local,
      new Date(now - 1000).toUTCString(),
      String(now),
      iso(now - 1000).replace(/T.*/, ''),
      '2026-02-30T10:00:00Z',
    ]) {
      expect(code(await receive(at(bad))), bad).toBe('400 PAYLOAD_INVALID');
    }
    expect(code(await receive(at(iso(now - 1000), 'yesterday')))).toBe('400 PAYLOAD_INVALID');
  });

  it('keeps a completion until the later of finished_at and receipt, plus the window: a replay inside it is a duplicate', async () => {
    let now = Date.now();
    const store = new MemoryIdempotencyStore({ now: () => now });
    let runs = 0;
    // One clock for the verifier (now) and the job runner (the receiver remembers what it verified on the runner's).
    const runner = createJobRunner(
      { store, retainMs: 3_900_000, log: {} },
      { now: () => now, monotonic: systemClock.monotonic },
    );
    const receive = createReceiver({
      publicKey,
      runner,
      maxAgeSeconds: 3_600,
      now: () => now,
      onEvent: () => void runs++,
    });
    // finished_at 4 min ahead of this clock (within the 5 min skew).
    const d = at(iso(now + 240_000));
    expect(code(await receive(d))).toBe('200 processed');
    // An hour after receipt the event is still inside its window (finished_at + 1 h): still remembered.
    now += 3_600_000 + 60_000;
    expect(code(await receive(d))).toBe('200 duplicate');
    expect(runs).toBe(1);
    // Past finished_at + 1 h the window refuses it (too old) before the store is asked.
    now += 240_000;
    expect(code(await receive(d))).toBe('401 EVENT_TOO_OLD');
  });

  it('a delivery received late is answered as known only while its window on finished_at is open: then 401 EVENT_TOO_OLD, not duplicate', async () => {
    let now = Date.now();
    const store = new MemoryIdempotencyStore({ now: () => now });
    const runner = createJobRunner(
      { store, retainMs: 3_900_000, log: {} },
      { now: () => now, monotonic: systemClock.monotonic },
    );
    const receive = createReceiver({
      publicKey,
      runner,
      maxAgeSeconds: 3_600,
      now: () => now,
      onEvent: () => undefined,
    });
    // Finished 10 min before it arrives: its window closes 50 min after receipt.
    const d = at(iso(now - 600_000));
    expect(code(await receive(d))).toBe('200 processed');
    now += 49 * 60_000;
    expect(code(await receive(d))).toBe('200 duplicate');
    now += 2 * 60_000;
    expect(code(await receive(d))).toBe('401 EVENT_TOO_OLD');
  });
});

describe.skipIf(inject('databaseUrl') === '')(
  "PostgreSQL transactional mode: effects written in the completion's transaction",
  () => {
    const url = inject('databaseUrl');
    const pool = new pg.Pool({ connectionString: url, max: 20 });
    pool.on('error', () => undefined);
    const table = `jobhook_tx_${process.pid}`;
    const effects = `jobhook_effects_${process.pid}`;
    const made: PostgresIdempotencyStore[] = [];
    const store = async (options: { now?: () => number } = {}) => {
      const s = new PostgresIdempotencyStore({ pool, table, transactional: true, ...options });
      await s.migrate();
      made.push(s);
      return s;
    };
    afterAll(async () => {
      await pool.query(`DROP TABLE IF EXISTS ${effects}`).catch(() => undefined);
      await pool.end();
    });
    /** The store as seen by an instance whose renewals never get through. */
    const cutOffRenewals = (s: PostgresIdempotencyStore): TransactionalStore<pg.PoolClient> => ({
      claim: (j, o) => s.claim(j, o),
      renew: async () => {
        throw new StoreUnavailableError('renew: no reply');
      },
      complete: (j, t, o) => s.complete(j, t, o),
      release: (j, t) => s.release(j, t),
      transactional: true,
      begin: (j, t, o) => s.begin(j, t, o),
    });
    const count = async (id: string) =>
      Number((await pool.query(`SELECT count(*) AS n FROM ${effects} WHERE job_id = $1`, [id])).rows[0].n);

    it("the handler's writes commit with the completion; a throwing handler leaves nothing and the retry writes once", async () => {
      await pool.query(`CREATE TABLE IF NOT EXISTS ${effects} (job_id text, fence bigint)`);
      const s = await store();
      let fail = true;
      const receive = createReceiver({
        publicKey,
        store: s,
        log: {},
        onEvent: async (event, ctx) => {
          expect(ctx.transaction).toBeDefined();
          await ctx.transaction!.query(`INSERT INTO ${effects} VALUES ($1, $2)`, [
            event.job_id,
            ctx.fencingToken,
          ]);
          if (fail) throw new Error('after the write');
        },
      });
      const id = jobId('tx');
      const d = signed(id);
      expect(code(await receive(d))).toBe('500 HANDLER_FAILED');
      expect(await count(id)).toBe(0);
      fail = false;
      expect(code(await receive(d))).toBe('200 processed');
      expect(code(await receive(d))).toBe('200 duplicate');
      expect(await count(id)).toBe(1);
      const row = (
        await pool.query(`SELECT state, token IS NOT NULL AS has_token FROM ${table} WHERE job_id = $1`, [id])
      ).rows[0];
      expect(row).toEqual({ state: 'completed', has_token: true });
    });

    it("a holder whose claim was taken over while it ran rolls back: its effect is not applied, the taker's is (exactly once), 503 CLAIM_LOST", async () => {
      await pool.query(`CREATE TABLE IF NOT EXISTS ${effects} (job_id text, fence bigint)`);
      const s = await store();
      const id = jobId('tx-taken');
      let release!: () => void;
      const hold = new Promise<void>((r) => (release = r));
      const heard = reports();
      // A short lease whose renewals this holder never gets through: another instance (same database) takes over.
      const slow = createReceiver({
        publicKey,
        runner: createJobRunner({
          store: cutOffRenewals(s),
          leaseMs: 300,
          takeoverGraceMs: 0,
          log: {},
          onError: heard.onError,
        }),
        onEvent: async (event, ctx) => {
          await (ctx.transaction as pg.PoolClient).query(`INSERT INTO ${effects} VALUES ($1, $2)`, [
            event.job_id,
            ctx.fencingToken,
          ]);
          await hold;
        },
      });
      const fast = createReceiver({
        publicKey,
        store: s,
        takeoverGraceMs: 0,
        log: {},
        onEvent: async (event, ctx) => {
          await ctx.transaction!.query(`INSERT INTO ${effects} VALUES ($1, $2)`, [
            event.job_id,
            ctx.fencingToken,
          ]);
        },
      });
      const d = signed(id);
      const first = slow(d);
      await sleep(600);
      expect(code(await fast(d))).toBe('200 processed');
      release();
      expect(code(await first)).toBe('503 CLAIM_LOST');
      expect(await count(id)).toBe(1);
      const fences = (await pool.query(`SELECT fence FROM ${effects} WHERE job_id = $1`, [id])).rows.map(
        (r) => Number(r.fence),
      );
      expect(fences).toHaveLength(1);
    });

    it('a holder paused past its lease after its handler commits when nobody took the job over: the completion statement matched its token and fence and locked the row (issue 37 point 3)', async () => {
      await pool.query(`CREATE TABLE IF NOT EXISTS ${effects} (job_id text, fence bigint)`);
      const s = await store();
      const clock = pausableClock();
      const runner = createJobRunner({ store: s, leaseMs: 5_000, log: {} }, clock);
      const receive = createReceiver({
        publicKey,
        runner,
        onEvent: async (event, ctx) => {
          await (ctx.transaction as pg.PoolClient).query(`INSERT INTO ${effects} VALUES ($1, $2)`, [
            event.job_id,
            ctx.fencingToken,
          ]);
          clock.pause(6_000);
        },
      });
      const id = jobId('tx-paused');
      const d = signed(id);
      expect(code(await receive(d))).toBe('200 processed');
      expect(await count(id)).toBe(1);
      // Done: the retry is a duplicate, exactly once.
      const again = createReceiver({
        publicKey,
        store: s,
        log: {},
        onEvent: async (event, ctx) =>
          void (await ctx.transaction!.query(`INSERT INTO ${effects} VALUES ($1, $2)`, [
            event.job_id,
            ctx.fencingToken,
          ])),
      });
      expect(code(await again(d))).toBe('200 duplicate');
      expect(await count(id)).toBe(1);
    });

    it('begin() needs transactional: true; a non-transactional PostgreSQL store gives no transaction', async () => {
      const plain = new PostgresIdempotencyStore({ pool, table });
      await expect(plain.begin('x', 'token-abc-1', { fence: 1 })).rejects.toThrow(TypeError);
      let tx: unknown = 'unset';
      const receive = createReceiver({
        publicKey,
        store: plain,
        log: {},
        onEvent: (_e, ctx) => void (tx = ctx.transaction),
      });
      expect(code(await receive(signed(jobId('plain'))))).toBe('200 processed');
      expect(tx).toBeUndefined();
      expect(
        () => new PostgresIdempotencyStore({ pool, table, transactional: 'yes' as unknown as boolean }),
      ).toThrow(TypeError);
    });
  },
);
