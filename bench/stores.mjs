// Issue 22, item 2: the stores at scale (after npm run build).
//
// 1. claim + complete pairs per second (each pair a fresh job id), 1 and 32 in flight, on
//    Redis and PostgreSQL, against the bare round trips a pair needs, in interleaved
//    rounds: every round runs each contender for SECONDS at the same concurrency, and the
//    ratio is taken round by round. A pair is two round trips today (claim: one script /
//    one statement; complete: the same), which is also the least it can be: the handler
//    runs between the two. The bare contenders make those two round trips with the
//    cheapest commands that do the same writes:
//      Redis:      SET key v NX PX, then SET key v XX PX (one ioredis connection, as the store's)
//                  and, for the round trip alone, two PINGs
//      PostgreSQL: INSERT a row, then UPDATE it, on a table shaped like the store's (primary key
//                  and expires_at index; a pool of 10 connections, the store's default)
//                  and, for the round trip alone, two SELECT 1
//    The memory store is timed too, for scale (no bare contender).
// 2. PostgreSQL purgeExpired() with nothing to delete on tables of 10^4, 10^5, 10^6 rows
//    (all live: two thirds completed marks, one third claims; VACUUM ANALYZE after filling,
//    as autovacuum would), interleaved rounds against the statements of earlier versions
//    sent on the same pool:
//      clock_timestamp() DELETE: the statement up to 5bf1986 (a volatile comparison: a sequential scan)
//      statement_timestamp() DELETE: the one statement of 7b9ac05 (the index, all rows at once)
//      purgeExpired(): this version (batches of 1,000 walking the index, one cutoff)
//
// 3. SQLite (issue 35; needs node:sqlite: Node 22.13+), claim + complete pairs at 1 and 32 in
//    flight on a file in the OS temp dir, against the same statements run bare on the same file:
//      bare statements: the store's own SQL for a pair, prepared once on a connection of its own
//        to that file with the store's settings (WAL, synchronous = FULL): claim = BEGIN
//        IMMEDIATE, SELECT the job's row, UPDATE the fencing counter RETURNING it, INSERT OR
//        REPLACE the row, COMMIT; complete = BEGIN IMMEDIATE, SELECT the row, INSERT OR REPLACE
//        it, DELETE its pending record, COMMIT. Two fsyncs a pair, as the store's. What the
//        bare contender leaves out is the store itself: argument checks, the protocol's
//        transition (model.ts), the rows mapped to records, its promises.
//    `node bench/stores.mjs sqlite` runs this part alone (the default runs it when node:sqlite exists).
//
// Servers: JOBHOOK_BENCH_REDIS_URL / JOBHOOK_BENCH_DATABASE_URL, defaulting to the machine's
// loopback services (redis://127.0.0.1:6379, postgres://postgres@127.0.0.1:5432/test).
//   node bench/stores.mjs                 both parts
//   node bench/stores.mjs pairs | purge   one part
// ROUNDS (default 7), SECONDS per contender per round (default 1), PURGE_SIZES (default 1e4,1e5,1e6).
import { MemoryIdempotencyStore } from '../dist/index.js';
import { RedisIdempotencyStore } from '../dist/redis.js';
import { PostgresIdempotencyStore } from '../dist/postgres.js';
import { Redis } from 'ioredis';
import pg from 'pg';
import { interleaved, load, machine, median, spread, table } from './harness.mjs';

const redisUrl = process.env.JOBHOOK_BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const databaseUrl = process.env.JOBHOOK_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const ROUNDS = Number(process.env.ROUNDS ?? 7);
const SECONDS = Number(process.env.SECONDS ?? 1);
const PURGE_SIZES = (process.env.PURGE_SIZES ?? '1e4,1e5,1e6').split(',').map(Number);
const parts = process.argv.slice(2);
const want = (part) => parts.length === 0 || parts.includes(part);
/** node:sqlite, when this Node has it (22.13 and later). */
const nodeSqlite = await import('node:sqlite').catch(() => undefined);
const run = `${process.pid}-${Date.now()}`;
const LAPSED_CLAIM_KEEP_MS = 60_000;

console.log(`# stores — ${machine()}; load ${load()}; ${new Date().toISOString()}\n`);

let sample = 0;
/** Pairs per second of `pair(id)` with `concurrency` in flight for `seconds`. */
async function pairsPerSecond(pair, concurrency, seconds) {
  let n = 0;
  const tag = sample++;
  const until = performance.now() + seconds * 1000;
  const worker = async (w) => {
    for (let k = 0; performance.now() < until; k++) {
      await pair(`bench-${run}-${tag}-${w}-${k}`);
      n++;
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  return (n * 1000) / (performance.now() - t0);
}

const storePair = (store) => async (id) => {
  const c = await store.claim(id, { leaseMs: 60_000 });
  if (c.status !== 'acquired') throw new Error(`unexpected ${c.status}`);
  if ((await store.complete(id, c.token, { retainMs: 60_000, fence: c.fence })) !== 'completed')
    throw new Error('complete refused');
};

/** Interleaved rounds of `contenders` ({ name: pair }) at `concurrency`; { name: [pairs/s per round] }. */
async function pairRounds(contenders, concurrency) {
  const out = Object.fromEntries(Object.keys(contenders).map((n) => [n, []]));
  for (const pair of Object.values(contenders)) await pairsPerSecond(pair, concurrency, 0.5); // warm-up
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, pair] of Object.entries(contenders))
      out[name].push(await pairsPerSecond(pair, concurrency, SECONDS));
  }
  return out;
}

function pairRows(backend, concurrency, rates, baseline) {
  return Object.entries(rates).map(([name, xs]) => {
    const ratios = xs.map((x, i) => x / rates[baseline][i]);
    return {
      store: backend,
      'in flight': concurrency,
      contender: name,
      'pairs/s (median)': median(xs).toFixed(0),
      'spread /s': spread(xs, 0),
      'µs per pair': ((1e6 / median(xs)) * concurrency).toFixed(0),
      '× the bare writes, per round (median, spread)':
        name === baseline ? '1.00' : `${median(ratios).toFixed(2)} (${spread(ratios)})`,
    };
  });
}

if (want('pairs')) {
  await storePairs();
}

async function storePairs() {
  const rows = [];
  // memory: for scale
  {
    const store = new MemoryIdempotencyStore({ maxEntries: 10_000_000 });
    for (const concurrency of [1, 32])
      rows.push(
        ...pairRows(
          'memory',
          concurrency,
          await pairRounds({ 'jobhook claim+complete': storePair(store) }, concurrency),
          'jobhook claim+complete',
        ).map((row) => ({ ...row, '× the bare writes, per round (median, spread)': '' })),
      );
  }
  // Redis
  {
    const store = new RedisIdempotencyStore({ url: redisUrl, keyPrefix: `jobhook-bench:${run}:`, log: {} });
    const bare = new Redis(redisUrl, { lazyConnect: false });
    const contenders = {
      'bare SET NX + SET XX': async (id) => {
        const key = `jobhook-bench-bare:${run}:${id}`;
        if ((await bare.set(key, 'claimed', 'PX', 60_000, 'NX')) !== 'OK') throw new Error('bare SET NX');
        if ((await bare.set(key, 'completed', 'PX', 60_000, 'XX')) !== 'OK') throw new Error('bare SET XX');
      },
      'bare 2 × PING': async () => {
        await bare.ping();
        await bare.ping();
      },
      'jobhook claim+complete': storePair(store),
    };
    for (const concurrency of [1, 32])
      rows.push(
        ...pairRows('Redis', concurrency, await pairRounds(contenders, concurrency), 'bare SET NX + SET XX'),
      );
    const keys = await bare.keys(`jobhook-bench*:${run}:*`);
    for (let i = 0; i < keys.length; i += 1000) await bare.del(...keys.slice(i, i + 1000));
    await store.close?.();
    bare.disconnect();
  }
  // PostgreSQL
  {
    const table_ = `jobhook_bench_${process.pid}`;
    const bareTable = `jobhook_bench_bare_${process.pid}`;
    const store = new PostgresIdempotencyStore({ connectionString: databaseUrl, table: table_ });
    await store.migrate();
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 10 });
    await pool.query(
      `CREATE TABLE ${bareTable} (job_id text PRIMARY KEY, token text, state text NOT NULL, expires_at timestamptz NOT NULL, stale_at timestamptz, fence bigint NOT NULL DEFAULT 0, took_over boolean NOT NULL DEFAULT false)`,
    );
    await pool.query(`CREATE INDEX ${bareTable}_expires_at ON ${bareTable} (expires_at)`);
    const contenders = {
      'bare INSERT + UPDATE': async (id) => {
        await pool.query(
          `INSERT INTO ${bareTable} (job_id, token, state, expires_at) VALUES ($1, $2, 'claimed', now() + interval '1 minute')`,
          [id, 'bench-token-1'],
        );
        const r = await pool.query(
          `UPDATE ${bareTable} SET state = 'completed', expires_at = now() + interval '1 minute' WHERE job_id = $1`,
          [id],
        );
        if (r.rowCount !== 1) throw new Error('bare UPDATE');
      },
      'bare 2 × SELECT 1': async () => {
        await pool.query('SELECT 1');
        await pool.query('SELECT 1');
      },
      'jobhook claim+complete': storePair(store),
    };
    for (const concurrency of [1, 32])
      rows.push(
        ...pairRows(
          'PostgreSQL',
          concurrency,
          await pairRounds(contenders, concurrency),
          'bare INSERT + UPDATE',
        ),
      );
    await store.close();
    await pool.query(`DROP TABLE IF EXISTS ${table_}, ${table_}_pending, ${bareTable}`);
    await pool.query(`DROP SEQUENCE IF EXISTS ${table_}_fence_seq`);
    await pool.end();
  }
  console.log(
    `## claim + complete pairs: ${ROUNDS} rounds × ${SECONDS} s per contender, interleaved; load after ${load()}\n`,
  );
  console.log(table(rows));
  console.log();
}

if (want('sqlite') && (nodeSqlite !== undefined || parts.includes('sqlite'))) {
  if (nodeSqlite === undefined)
    throw new Error(
      `node:sqlite is missing on Node ${process.version}: run this part on Node 22.13 or later`,
    );
  await sqlitePairs();
}

async function sqlitePairs() {
  const { SqliteIdempotencyStore } = await import('../dist/sqlite.js');
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const dir = mkdtempSync(join(tmpdir(), 'jobhook-bench-sqlite-'));
  const path = join(dir, 'bench.db');
  const store = new SqliteIdempotencyStore({ path, log: false });
  await store.migrate();
  const db = new nodeSqlite.DatabaseSync(path);
  db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000');
  const t = '"jobhook_jobs"';
  const select = db.prepare(
    `SELECT state, token, fence, until_ms, stale_at, flag FROM ${t} WHERE job_id = ?`,
  );
  const fence = db.prepare(
    `UPDATE "jobhook_jobs_meta" SET value = value + 1 WHERE name = 'fence' RETURNING value`,
  );
  const upsert = db.prepare(
    `INSERT OR REPLACE INTO ${t} (job_id, state, token, fence, until_ms, stale_at, flag) VALUES (?, ?, ?, ?, ?, ?, ?)`,
  );
  const unpend = db.prepare(`DELETE FROM "jobhook_jobs_pending" WHERE job_id = ?`);
  const contenders = {
    'bare statements': async (id) => {
      db.exec('BEGIN IMMEDIATE');
      if (select.get(id) !== undefined) throw new Error('bare: the job exists');
      const f = fence.get().value;
      upsert.run(id, 'held', 'bench-token-1', f, Date.now() + 60_000, null, 0);
      db.exec('COMMIT');
      await undefined; // the handler runs between the claim and the completion
      db.exec('BEGIN IMMEDIATE');
      if (select.get(id)?.token !== 'bench-token-1') throw new Error('bare: not held');
      upsert.run(id, 'completed', 'bench-token-1', f, Date.now() + 60_000, null, 0);
      unpend.run(id);
      db.exec('COMMIT');
    },
    'jobhook claim+complete': storePair(store),
  };
  const rows = [];
  for (const concurrency of [1, 32])
    rows.push(
      ...pairRows('SQLite', concurrency, await pairRounds(contenders, concurrency), 'bare statements'),
    );
  await store.close();
  db.close();
  rmSync(dir, { recursive: true, force: true });
  console.log(
    `## SQLite claim + complete pairs (${process.version}, a file in ${tmpdir()}): ${ROUNDS} rounds × ${SECONDS} s per contender, interleaved; load after ${load()}\n`,
  );
  console.log(table(rows));
  console.log();
}

if (want('purge')) {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  const rows = [];
  const backlogRows = [];
  for (const size of PURGE_SIZES) {
    const name = `jobhook_bench_purge_${size}_${process.pid}`;
    const store = new PostgresIdempotencyStore({ pool, table: name });
    await store.migrate();
    const t0 = performance.now();
    await pool.query(
      `INSERT INTO ${name} (job_id, token, state, expires_at)
         SELECT 'live-' || g, 'token-' || g, CASE WHEN g % 3 = 0 THEN 'claimed' ELSE 'completed' END, now() + interval '1 hour' + g * interval '1 ms'
           FROM generate_series(1, $1::int) g`,
      [size],
    );
    await pool.query(`VACUUM ANALYZE ${name}`);
    const filled = performance.now() - t0;
    const none = async (p) => {
      const n = await p;
      if (n !== 0) throw new Error(`deleted ${n}`);
    };
    const times = await interleaved(
      {
        'clock_timestamp() DELETE (≤ 5bf1986)': () =>
          none(
            pool
              .query(
                `DELETE FROM ${name} WHERE expires_at <= clock_timestamp()
                   AND (state = 'completed' OR greatest(expires_at, stale_at) <= clock_timestamp() - $1 * interval '1 millisecond')`,
                [LAPSED_CLAIM_KEEP_MS],
              )
              .then((r) => r.rowCount),
          ),
        'statement_timestamp() DELETE (7b9ac05)': () =>
          none(
            pool
              .query(
                `DELETE FROM ${name} WHERE expires_at <= coalesce($2::timestamptz, statement_timestamp())
                   AND (state = 'completed' OR greatest(expires_at, stale_at) <= coalesce($2::timestamptz, statement_timestamp()) - $1 * interval '1 millisecond')`,
                [LAPSED_CLAIM_KEEP_MS, null],
              )
              .then((r) => r.rowCount),
          ),
        'purgeExpired() (batched)': () => none(store.purgeExpired()),
        'bare SELECT 1': () => pool.query('SELECT 1'),
      },
      { rounds: ROUNDS + 4, warmup: 2, minMs: 150 },
    );
    // The server's own time for each statement (EXPLAIN ANALYZE: planning + execution),
    // less exposed to the client's share of a loaded machine. purgeExpired()'s statement
    // is captured from a store whose pool only records and forwards queries.
    let sent;
    const capturing = new PostgresIdempotencyStore({
      pool: { query: (sql, params) => ((sent = { sql, params }), pool.query(sql, params)) },
      table: name,
    });
    await capturing.purgeExpired();
    const statements = {
      'clock_timestamp() DELETE (≤ 5bf1986)': {
        sql: `DELETE FROM ${name} WHERE expires_at <= clock_timestamp() AND (state = 'completed' OR greatest(expires_at, stale_at) <= clock_timestamp() - $1 * interval '1 millisecond')`,
        params: [LAPSED_CLAIM_KEEP_MS],
      },
      'statement_timestamp() DELETE (7b9ac05)': {
        sql: `DELETE FROM ${name} WHERE expires_at <= coalesce($2::timestamptz, statement_timestamp()) AND (state = 'completed' OR greatest(expires_at, stale_at) <= coalesce($2::timestamptz, statement_timestamp()) - $1 * interval '1 millisecond')`,
        params: [LAPSED_CLAIM_KEEP_MS, null],
      },
      'purgeExpired() (batched)': sent,
    };
    const server = Object.fromEntries(Object.keys(statements).map((k) => [k, []]));
    const plans = {};
    for (let r = 0; r < ROUNDS + 4; r++) {
      for (const [k, { sql, params }] of Object.entries(statements)) {
        const { rows: out } = await pool.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, params);
        const plan = out[0]['QUERY PLAN'][0];
        server[k].push(plan['Planning Time'] + plan['Execution Time']);
        const scans = [];
        const walk = (node) => {
          if (node['Relation Name'] === name && node['Node Type'] !== 'ModifyTable')
            scans.push(
              `${node['Node Type']}${node['Index Name'] ? ` on ${node['Index Name'].replace(name, '…')}` : ''}`,
            );
          for (const child of node.Plans ?? []) walk(child);
        };
        walk(plan.Plan);
        plans[k] = [...new Set(scans)].join(', ');
      }
    }
    for (const [contender, t] of Object.entries(times)) {
      const ratios = t.map((x, i) => x / times['purgeExpired() (batched)'][i]);
      rows.push({
        rows: size.toLocaleString('en'),
        contender,
        'median ms': median(t).toFixed(3),
        'spread ms': spread(t, 3),
        '× purgeExpired() time': `${median(ratios).toFixed(1)} (${spread(ratios, 1)})`,
        'server ms (EXPLAIN ANALYZE: planning + execution), median (spread)': server[contender]
          ? `${median(server[contender]).toFixed(3)} (${spread(server[contender], 3)})`
          : '',
        'scan of the table': plans[contender] ?? '',
      });
    }
    // Then a backlog: size / 10 completed marks past their retention, deleted by the
    // batched purge (default 1,000 rows a batch, and 10,000) or by 7b9ac05's one
    // statement, alternately, 3 times each (the
    // backlog written again before each). "longest statement" is how long one statement
    // held its row locks: all the backlog's rows at once for the single statement.
    const backlog = size / 10;
    const timed = [];
    const timingPool = {
      query: async (sql, params) => {
        const t = performance.now();
        const r = await pool.query(sql, params);
        timed.push(performance.now() - t);
        return r;
      },
    };
    const timing = new PostgresIdempotencyStore({ pool: timingPool, table: name });
    const deleting = {
      'statement_timestamp() DELETE (7b9ac05)': [],
      'purgeExpired() (batched)': [],
      'purgeExpired({ batchSize: 10000 })': [],
    };
    for (let rep = 0; rep < 3; rep++) {
      for (const contender of Object.keys(deleting)) {
        await pool.query(
          `INSERT INTO ${name} (job_id, token, state, expires_at) SELECT 'old-' || g, 'token-' || g, 'completed', now() - interval '1 hour' + g * interval '1 ms' FROM generate_series(1, $1::int) g`,
          [backlog],
        );
        timed.length = 0;
        const t = performance.now();
        const n =
          contender === 'purgeExpired() (batched)'
            ? await timing.purgeExpired()
            : contender === 'purgeExpired({ batchSize: 10000 })'
              ? await timing.purgeExpired({ batchSize: 10_000 })
              : (await timingPool.query(statements[contender].sql, statements[contender].params)).rowCount;
        const total = performance.now() - t;
        if (n !== backlog) throw new Error(`${contender} deleted ${n} of ${backlog}`);
        deleting[contender].push({ total, longest: Math.max(...timed), statements: timed.length });
      }
    }
    for (const [contender, reps] of Object.entries(deleting)) {
      backlogRows.push({
        rows: size.toLocaleString('en'),
        backlog: backlog.toLocaleString('en'),
        contender,
        'total ms, 3 runs': reps.map((x) => x.total.toFixed(0)).join(', '),
        'ms per 1,000 rows (median)': ((median(reps.map((x) => x.total)) / backlog) * 1000).toFixed(1),
        statements: reps[0].statements,
        'longest statement ms, 3 runs': reps.map((x) => x.longest.toFixed(1)).join(', '),
      });
    }
    console.log(`(${name}: filled and analysed in ${(filled / 1000).toFixed(1)} s)`);
    await pool.query(`DROP TABLE IF EXISTS ${name}, ${name}_pending`);
    await pool.query(`DROP SEQUENCE IF EXISTS ${name}_fence_seq`);
  }
  await pool.end();
  console.log(
    `\n## purgeExpired() with nothing to delete: ${ROUNDS + 4} rounds (≥ 150 ms per contender each), interleaved; load after ${load()}\n`,
  );
  console.log(table(rows));
  console.log(
    `\n## Deleting a backlog (a tenth of the table, past its retention), 3 runs each, alternating; load after ${load()}\n`,
  );
  console.log(table(backlogRows));
}
