/**
 * Every store is held to the claim protocol's model (src/lib/jobs/model.ts `transition`):
 * fast-check generates interleavings of claims (fresh tokens and the holder's own again),
 * renewals, completions, releases (which leave released records), replies the caller
 * never reads (lost replies), the same request sent again (a retried reply: a claim
 * retried with its token, a completion retried by the repair queue, a late renewal after
 * a release) and clock advances (past the grace window, past the retention and the
 * release's keep), by several holders on two jobs; each command runs on the model and on
 * the real store, and every reply must match (fencing numbers: the same order, and the
 * same number for a holder claiming again). Redis and PostgreSQL run on real servers, the
 * Durable Object store inside workerd and the Deno KV store inside Deno (each command a
 * call into the runtime: test/stores/runtime-stores.ts), SQLite on a file (two stores on
 * it, as two processes would be: Node 22+ and Bun);
 * each store reads the test's clock instead of its server's (the `now` option), so lease
 * ends, stale marks and retention ends fall exactly where the model puts them.
 *
 * Then the same model with the commands overlapping (model-run.ts, checked for
 * linearizability by model-check.ts): holders send without waiting for each other's
 * replies, their own renewals run beside their transactions, and on PostgreSQL with
 * `transactional: true` transactions are begun, written, completed (the row locked until
 * they end), committed, rolled back, or cut between statements (the connection closed;
 * the server rolls back), and the rows written through them must be those the model
 * commits. Once on the test's clock, once on the servers' own (short leases, real waits:
 * leases lapse, graces and retentions end in real time on the servers).
 *
 *   JOBHOOK_MODEL_RUNS=<n>   n times the runs of each case (the recorded long run: RELIABILITY.md)
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Redis } from 'ioredis';
import pg from 'pg';
import { MemoryIdempotencyStore, type IdempotencyStore } from '../../src/index.js';
import { PostgresIdempotencyStore } from '../../src/postgres.js';
import { RedisIdempotencyStore } from '../../src/redis.js';
import { SqliteIdempotencyStore } from '../../src/sqlite.js';
import { removeSqliteDirs, runtime, sqliteDir, sqliteMissing } from '../helpers/sqlite.js';
import { transition, type ClaimReply, type JobRecord, type JobRequest } from '../../src/lib/jobs/model.js';
import { LAPSED_CLAIM_KEEP_MS } from '../../src/lib/jobs/store.js';
import { commands, runCommands, type Timing } from './model-run.js';
import { edgeRuntime, RemoteStore, startRuntime, type RuntimeServer } from '../stores/runtime-stores.js';

/** Runs multiplier: the long mode (JOBHOOK_MODEL_RUNS=20, say). */
const SCALE = Math.max(1, Number(process.env.JOBHOOK_MODEL_RUNS) || 1);

const JOBS = ['job-a', 'job-b'] as const;
/** The stores that run inside their own runtime. */
const EDGE = [
  ['workerd', 'Durable Object store'],
  ['Deno', 'Deno KV store'],
] as const;
const HOLDERS = 3;
/** Virtual times, in tens of seconds (stores keep real TTLs of at least that long, so nothing expires in real time during a run). */
const LEASES = [10_000, 20_000, 40_000];
const GRACES = [0, 0, 15_000];
const RETAINS = [20_000, 60_000];
const STEPS = [1_000, 5_000, 10_000, 15_000, 30_000, 45_000];
/** Past every retention and every release's keep (lapsed claims are kept longer: their takeover is still reported). */
const LONG_STEP = LAPSED_CLAIM_KEEP_MS + 1_000;

type Command =
  | { op: 'claim'; job: number; holder: number; fresh: boolean; lease: number; grace: number; lost: boolean }
  | { op: 'renew'; job: number; holder: number; lease: number; lost: boolean }
  | { op: 'complete'; job: number; holder: number; retain: number; lost: boolean }
  | { op: 'release'; job: number; holder: number; lost: boolean }
  /** The holder's last request to the job, sent again as it was (its reply was lost, or it arrives late). */
  | { op: 'retry'; job: number; holder: number; lost: boolean }
  | { op: 'advance'; ms: number };

/** A reply the caller never reads (a timeout after the store acted): one command in five. */
const lost = fc.constantFrom(false, false, false, false, true);

const command: fc.Arbitrary<Command> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('claim' as const),
      job: fc.nat(1),
      holder: fc.nat(HOLDERS - 1),
      fresh: fc.boolean(),
      lease: fc.constantFrom(...LEASES),
      grace: fc.constantFrom(...GRACES),
      lost: lost,
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('renew' as const),
      job: fc.nat(1),
      holder: fc.nat(HOLDERS - 1),
      lease: fc.constantFrom(...LEASES),
      lost,
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('complete' as const),
      job: fc.nat(1),
      holder: fc.nat(HOLDERS - 1),
      retain: fc.constantFrom(...RETAINS),
      lost,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('release' as const),
      job: fc.nat(1),
      holder: fc.nat(HOLDERS - 1),
      lost,
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('retry' as const),
      job: fc.nat(1),
      holder: fc.nat(HOLDERS - 1),
      lost,
    }),
  },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('advance' as const), ms: fc.constantFrom(...STEPS) }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('advance' as const), ms: fc.constantFrom(LONG_STEP) }),
  },
);

/** What one holder knows of one job: the token it claims with, and the fencing number its claim carries (model and real). */
interface Hand {
  token: string;
  modelFence?: number;
  realFence?: number;
  /** The last command sent for this job (retried as it was). */
  last?: Exclude<Command, { op: 'advance' | 'retry' }>;
}

/** One run: the model's records and counter, the holders' hands, and how model fencing numbers map onto the store's. */
class World {
  readonly records = new Map<string, JobRecord | undefined>();
  private counter = 0;
  readonly fences = () => ++this.counter;
  readonly hands = new Map<string, Hand>();
  /** Model fencing number → the store's, as far as replies revealed them. */
  readonly fenceMap = new Map<number, number>();
  private tokens = 0;

  constructor(
    readonly prefix: string,
    public now: number,
  ) {}

  jobId(job: number): string {
    return `${this.prefix}-${JOBS[job]}`;
  }

  hand(job: number, holder: number): Hand {
    const key = `${job}/${holder}`;
    let h = this.hands.get(key);
    if (h === undefined) {
      h = { token: this.newToken(holder) };
      this.hands.set(key, h);
    }
    return h;
  }

  newToken(holder: number): string {
    return `h${holder}-tok-${this.tokens++}`;
  }

  /** Checks that `real` fits the order of the fencing numbers seen so far for `model`, and records it. */
  mapFence(model: number, real: number): void {
    const known = this.fenceMap.get(model);
    if (known !== undefined) {
      expect(real, `fencing number of model ${model}`).toBe(known);
      return;
    }
    for (const [m, r] of this.fenceMap) {
      if (m < model)
        expect(real, `fence ${real} (model ${model}) after ${r} (model ${m})`).toBeGreaterThan(r);
      if (m > model) expect(real, `fence ${real} (model ${model}) before ${r} (model ${m})`).toBeLessThan(r);
    }
    this.fenceMap.set(model, real);
  }
}

async function step(world: World, store: IdempotencyStore, command: Command): Promise<void> {
  if (command.op === 'advance') {
    world.now += command.ms;
    return;
  }
  const id = world.jobId(command.job);
  const hand = world.hand(command.job, command.holder);
  let c: Exclude<Command, { op: 'advance' | 'retry' }>;
  if (command.op === 'retry') {
    if (hand.last === undefined) return;
    // The same request again: same token, same fencing number, a claim not made fresh.
    c = { ...hand.last, lost: command.lost, ...(hand.last.op === 'claim' ? { fresh: false } : {}) };
  } else {
    c = command;
  }
  hand.last = c;
  let request: JobRequest;
  if (c.op === 'claim') {
    if (c.fresh) {
      hand.token = world.newToken(c.holder);
      delete hand.modelFence;
      delete hand.realFence;
    }
    request = { op: 'claim', token: hand.token, leaseMs: c.lease, graceMs: c.grace };
  } else if (c.op === 'renew') {
    request = {
      op: 'renew',
      token: hand.token,
      leaseMs: c.lease,
      ...(hand.modelFence === undefined ? {} : { fence: hand.modelFence }),
    };
  } else if (c.op === 'complete') {
    request = {
      op: 'complete',
      token: hand.token,
      retainMs: c.retain,
      ...(hand.modelFence === undefined ? {} : { fence: hand.modelFence }),
    };
  } else {
    request = { op: 'release', token: hand.token, keepMs: LAPSED_CLAIM_KEEP_MS };
  }
  const { record, reply } = transition(world.records.get(id), request, world.now, world.fences);
  world.records.set(id, record);
  const what = `${JSON.stringify(c)} at ${world.now} on ${JSON.stringify(world.records.get(id))}`;

  if (c.op === 'claim') {
    const real = await store.claim(id, { leaseMs: c.lease, token: hand.token, takeoverGraceMs: c.grace });
    const model = reply as unknown as ClaimReply;
    if (c.lost) return; // the caller never reads it (the store changed all the same; later replies check it)
    if (model.status === 'acquired') {
      expect(real, what).toMatchObject({ status: 'acquired', token: hand.token });
      if (real.status !== 'acquired') return;
      expect(real.tookOver === true, what).toBe(model.tookOver);
      world.mapFence(model.fence, real.fence);
      hand.modelFence = model.fence;
      hand.realFence = real.fence;
    } else if (model.status === 'in_progress') {
      expect(real, what).toEqual({
        status: 'in_progress',
        retryAfterMs: model.retryAfterMs,
        ...(model.stale ? { stale: true } : {}),
      });
    } else {
      expect(real, what).toEqual({ status: 'completed' });
    }
    return;
  }
  const fenceArg = hand.realFence === undefined ? {} : { fence: hand.realFence };
  const real =
    c.op === 'renew'
      ? await store.renew!(id, hand.token, { leaseMs: c.lease, ...fenceArg })
      : c.op === 'complete'
        ? await store.complete(id, hand.token, { retainMs: c.retain, ...fenceArg })
        : (await store.release(id, hand.token))
          ? 'released'
          : 'not_held';
  if (!c.lost) expect(real, what).toBe(reply);
}

/** Runs `runs` generated command sequences against `make()`'s store and the model. */
async function holdToModel(
  make: (clock: () => number) => IdempotencyStore | Promise<IdempotencyStore>,
  runs: number,
): Promise<void> {
  let seq = 0;
  const base = Date.UTC(2030, 0, 1);
  await fc.assert(
    fc.asyncProperty(fc.array(command, { minLength: 5, maxLength: 40 }), async (commands) => {
      const world = new World(`mb-${process.pid}-${Date.now()}-${seq++}`, base);
      const store = await make(() => world.now);
      for (const c of commands) await step(world, store, c);
    }),
    { numRuns: runs },
  );
}

describe('stores held to the claim protocol model (fast-check commands)', () => {
  it('memory', async () => {
    await holdToModel((clock) => new MemoryIdempotencyStore({ now: clock }), 400);
  });

  describe.skipIf(inject('redisUrl') === '')('Redis (real server)', () => {
    const client = new Redis(inject('redisUrl'));
    afterAll(async () => {
      await client.quit();
    });
    it('Redis', async () => {
      let n = 0;
      // Each run has its own keys, pending set and fencing counter.
      await holdToModel(
        (clock) =>
          new RedisIdempotencyStore({
            client,
            keyPrefix: `mb:${process.pid}:${n}:job:`,
            pendingKey: `mb:${process.pid}:${n++}:pending`,
            now: clock,
            log: {},
          }),
        150,
      );
    }, 120_000);
  });

  describe.skipIf(inject('databaseUrl') === '')('PostgreSQL (real server)', () => {
    const pool = new pg.Pool({ connectionString: inject('databaseUrl') });
    pool.on('error', () => undefined);
    afterAll(async () => {
      await pool.end();
    });
    it('PostgreSQL', async () => {
      const table = `jobhook_model_${process.pid}`;
      const migrated = new PostgresIdempotencyStore({ pool, table });
      await migrated.migrate();
      // One table for all runs (job ids differ per run); the fencing sequence is shared, which the order check allows.
      await holdToModel((clock) => new PostgresIdempotencyStore({ pool, table, now: clock }), 100);
      await pool.query(`DROP TABLE ${table}`);
    }, 180_000);
  });

  for (const [name, label] of EDGE) {
    describe.skipIf(!edgeRuntime(name).ok)(`${label} (inside ${name})`, () => {
      let server!: RuntimeServer;
      beforeAll(async () => {
        server = await startRuntime(name);
      }, 60_000);
      afterAll(async () => {
        await server?.destroy();
      });
      it(
        label,
        async () => {
          let n = 0;
          // Each run its own objects or keys, and so its own fencing counter.
          await holdToModel(
            (clock) => new RemoteStore(server, `mb-${process.pid}-${n++}`, { now: clock }),
            100,
          );
        },
        180_000,
      );
    });
  }
});

/** The test's clock (as above): exact times, replies compared exactly. */
const VIRTUAL: Timing = { leases: LEASES, graces: GRACES, retains: RETAINS, steps: [...STEPS, LONG_STEP] };
/** The servers' clock: leases a few hundred ms, waits that cross them. */
const REAL: Timing = {
  leases: [200, 400, 800],
  graces: [0, 0, 150],
  retains: [250, 900],
  steps: [40, 120, 250, 500],
};

/** Runs `runs` generated command sequences, overlapping, against `make()`'s store and the model. */
async function holdConcurrent(
  make: (clock: { now: number } | undefined) => IdempotencyStore,
  options: { runs: number; real: boolean; tx?: { admin: pg.Pool; effects: string } },
): Promise<Map<string, number>> {
  let seq = 0;
  const timing = options.real ? REAL : VIRTUAL;
  const coverage = new Map<string, number>();
  await fc.assert(
    fc.asyncProperty(
      fc.array(commands(timing, options.tx !== undefined), {
        minLength: options.tx === undefined ? 10 : 25,
        maxLength: options.real ? 40 : 60,
      }),
      async (cmds) => {
        const prefix = `mc-${process.pid}-${Date.now()}-${seq++}`;
        const clock = options.real ? undefined : { now: Date.UTC(2030, 0, 1) };
        const store = make(clock);
        await runCommands(
          {
            store,
            clock,
            coverage,
            jobIds: JOBS.map((j) => `${prefix}-${j}`),
            ...(options.tx === undefined ? {} : { tx: options.tx }),
          },
          cmds,
          prefix,
        );
      },
    ),
    { numRuns: options.runs * SCALE, endOnFailure: true },
  );
  return coverage;
}

/** Says what the runs reached, and fails when one of `musts` was never reached (a check that checked nothing). */
function reached(name: string, coverage: Map<string, number>, musts: string[]): void {
  if (process.env.JOBHOOK_MODEL_RUNS !== undefined)
    console.log(
      `${name}: ${[...coverage]
        .sort()
        .map(([k, v]) => `${k} ×${v}`)
        .join(', ')}`,
    );
  for (const m of musts) expect(coverage.get(m) ?? 0, `${name}: ${m}`).toBeGreaterThan(0);
}

const OVERLAP = [
  'sent while others were in flight',
  'claim → acquired',
  'claim → in_progress',
  'renew → renewed',
  'complete → completed',
];
const TX = [
  'tx complete → completed',
  'tx complete → superseded',
  'tx commit → ok',
  'tx end → ok',
  'tx cut',
  'answered after a transaction it waited for ended',
];

describe('stores held to the model with overlapping commands (linearizable), transactions, and real time', () => {
  it("memory, the test's clock", { timeout: 30_000 * SCALE }, async () => {
    reached(
      'memory',
      await holdConcurrent(
        (clock) => new MemoryIdempotencyStore(clock === undefined ? {} : { now: () => clock.now }),
        { runs: 200, real: false },
      ),
      OVERLAP,
    );
  });
  it.concurrent('memory, real time', { timeout: 120_000 * SCALE }, async () => {
    reached(
      'memory, real time',
      await holdConcurrent(() => new MemoryIdempotencyStore(), { runs: 5, real: true }),
      OVERLAP,
    );
  });

  describe.skipIf(inject('redisUrl') === '')('Redis (real server)', () => {
    const client = new Redis(inject('redisUrl'));
    afterAll(async () => {
      await client.quit();
    });
    let n = 0;
    const make = (clock: { now: number } | undefined) =>
      new RedisIdempotencyStore({
        client,
        keyPrefix: `mc:${process.pid}:${n}:job:`,
        pendingKey: `mc:${process.pid}:${n++}:pending`,
        ...(clock === undefined ? {} : { now: () => clock.now }),
        log: {},
      });
    it("Redis, the test's clock", { timeout: 120_000 * SCALE }, async () => {
      reached('Redis', await holdConcurrent(make, { runs: 80, real: false }), OVERLAP);
    });
    it.concurrent("Redis, the server's clock (real time)", { timeout: 120_000 * SCALE }, async () => {
      reached('Redis, real time', await holdConcurrent(make, { runs: 10, real: true }), OVERLAP);
    });
  });

  for (const [name, label] of EDGE) {
    describe.skipIf(!edgeRuntime(name).ok)(`${label} (inside ${name})`, () => {
      let server!: RuntimeServer;
      let n = 0;
      beforeAll(async () => {
        server = await startRuntime(name);
      }, 60_000);
      afterAll(async () => {
        await server?.destroy();
      });
      const make = (clock: { now: number } | undefined) =>
        new RemoteStore(
          server,
          `mc-${process.pid}-${n++}`,
          clock === undefined ? {} : { now: () => clock.now },
        );
      it(`${label}, the test's clock`, { timeout: 180_000 * SCALE }, async () => {
        reached(label, await holdConcurrent(make, { runs: 60, real: false }), OVERLAP);
      });
      it(`${label}, the runtime's clock (real time)`, { timeout: 180_000 * SCALE }, async () => {
        reached(`${label}, real time`, await holdConcurrent(make, { runs: 8, real: true }), OVERLAP);
      });
    });
  }

  describe.skipIf(inject('databaseUrl') === '')('PostgreSQL transactional (real server)', () => {
    // Room for every holder's transaction beside the store's own operations (a quarter of the pool).
    const pool = new pg.Pool({ connectionString: inject('databaseUrl'), max: 16 });
    pool.on('error', () => undefined);
    const admin = new pg.Pool({ connectionString: inject('databaseUrl'), max: 2 });
    const table = `jobhook_mc_${process.pid}`;
    const effects = `jobhook_mc_effects_${process.pid}`;
    const tx = { admin, effects };
    afterAll(async () => {
      await admin.query(`DROP TABLE IF EXISTS ${table}, ${table}_pending, ${effects}`);
      await admin.query(`DROP SEQUENCE IF EXISTS ${table}_fence_seq`);
      await Promise.all([pool.end(), admin.end()]);
    });
    const make = (clock: { now: number } | undefined) =>
      new PostgresIdempotencyStore({
        pool,
        table,
        transactional: true,
        ...(clock === undefined ? {} : { now: () => clock.now }),
      });
    it("PostgreSQL transactional, the test's clock", { timeout: 180_000 * SCALE }, async () => {
      await make(undefined).migrate();
      await admin.query(
        `CREATE TABLE IF NOT EXISTS ${effects} (id bigserial PRIMARY KEY, job_id text NOT NULL, token text NOT NULL)`,
      );
      reached('PostgreSQL transactional', await holdConcurrent(make, { runs: 100, real: false, tx }), [
        ...OVERLAP,
        ...TX,
      ]);
    });
    it("PostgreSQL transactional, the server's clock (real time)", { timeout: 180_000 * SCALE }, async () => {
      await make(undefined).migrate();
      await admin.query(
        `CREATE TABLE IF NOT EXISTS ${effects} (id bigserial PRIMARY KEY, job_id text NOT NULL, token text NOT NULL)`,
      );
      // Lock waits and superseded completions need the right timing on the servers' clock: required on the test's clock above, counted here.
      reached(
        'PostgreSQL transactional, real time',
        await holdConcurrent(make, { runs: 40, real: true, tx }),
        [...OVERLAP, 'tx complete → completed', 'tx commit → ok', 'tx cut'],
      );
    });
  });
});

describe.skipIf(sqliteMissing !== undefined)(
  `SQLite on ${runtime} held to the model (a file, two stores on it)${sqliteMissing === undefined ? '' : ` (skipped: ${sqliteMissing})`}`,
  () => {
    const path = sqliteMissing === undefined ? `${sqliteDir('model')}/model.db` : '';
    const stores: SqliteIdempotencyStore[] = [];
    afterAll(async () => {
      await Promise.all(stores.map((s) => s.close()));
      removeSqliteDirs();
    });
    /** One file for every run (job ids differ per run; the fencing counter is shared, which the order check allows). */
    const make = (clock: (() => number) | undefined) => {
      const store = new SqliteIdempotencyStore({
        path,
        migrate: true,
        log: false,
        ...(clock === undefined ? {} : { now: clock }),
      });
      stores.push(store);
      return store;
    };
    /** Two stores on the file, each command sent through one of them in turn: two processes sharing it. */
    const pair = (clock: (() => number) | undefined): IdempotencyStore => {
      const a = make(clock);
      const b = make(clock);
      let k = 0;
      const next = () => (k++ % 2 === 0 ? a : b);
      return {
        claim: (...args) => next().claim(...args),
        renew: (...args) => next().renew(...args),
        complete: (...args) => next().complete(...args),
        release: (...args) => next().release(...args),
      };
    };
    it('SQLite, sequential commands', { timeout: 120_000 }, async () => {
      await holdToModel((clock) => pair(clock), 150);
      await Promise.all(stores.splice(0).map((s) => s.close()));
    });
    it("SQLite, overlapping commands, the test's clock", { timeout: 120_000 * SCALE }, async () => {
      reached(
        'SQLite',
        await holdConcurrent((clock) => pair(clock === undefined ? undefined : () => clock.now), {
          runs: 80,
          real: false,
        }),
        OVERLAP,
      );
      await Promise.all(stores.splice(0).map((s) => s.close()));
    });
    it('SQLite, overlapping commands, real time', { timeout: 120_000 * SCALE }, async () => {
      reached(
        'SQLite, real time',
        await holdConcurrent(() => pair(undefined), { runs: 10, real: true }),
        OVERLAP,
      );
      await Promise.all(stores.splice(0).map((s) => s.close()));
    });
  },
);
