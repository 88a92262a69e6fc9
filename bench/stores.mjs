// claim + complete pairs per second for each idempotency store, on loopback.
// Servers: JOBHOOK_BENCH_REDIS_URL / JOBHOOK_BENCH_DATABASE_URL, defaulting to the
// machine's own loopback services (redis://127.0.0.1:6379, postgres://postgres@127.0.0.1:5432/test).
import { MemoryIdempotencyStore } from '../dist/index.js';
import { RedisIdempotencyStore } from '../dist/redis.js';
import { PostgresIdempotencyStore } from '../dist/postgres.js';
import { machine, table } from './harness.mjs';

const redisUrl = process.env.JOBHOOK_BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const databaseUrl = process.env.JOBHOOK_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const run = `${process.pid}-${Date.now()}`;

let sample = 0;
async function pairsPerSecond(store, concurrency, seconds) {
  let n = 0;
  const tag = sample++;
  const until = performance.now() + seconds * 1000;
  const worker = async (w) => {
    for (let k = 0; performance.now() < until; k++) {
      const id = `bench-${run}-${tag}-${w}-${k}`;
      const c = await store.claim(id, { leaseMs: 60_000 });
      if (c.status !== 'acquired') throw new Error(`unexpected ${c.status}`);
      if (!(await store.complete(id, c.token, { retainMs: 60_000 }))) throw new Error('complete refused');
      n++;
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  return (n * 1000) / (performance.now() - t0);
}

const backends = [
  ['memory', async () => new MemoryIdempotencyStore({ maxEntries: 10_000_000 })],
  ['Redis', async () => new RedisIdempotencyStore({ url: redisUrl, keyPrefix: `jobhook-bench:${run}:`, log: {} })],
  [
    'PostgreSQL',
    async () => {
      const s = new PostgresIdempotencyStore({ connectionString: databaseUrl, table: `jobhook_bench_${process.pid}` });
      await s.migrate();
      return s;
    },
  ],
];

console.log(`# stores — ${machine()}\n`);
const rows = [];
for (const [name, make] of backends) {
  const store = await make();
  await pairsPerSecond(store, 4, 1); // warm-up
  for (const concurrency of [1, 32]) {
    const samples = [];
    for (let s = 0; s < 3; s++) samples.push(await pairsPerSecond(store, concurrency, 2));
    samples.sort((a, b) => a - b);
    rows.push({ store: name, 'in flight': concurrency, 'claim+complete /s (median of 3)': samples[1].toFixed(0), 'µs per pair': ((1e6 / samples[1]) * concurrency).toFixed(0) });
  }
  await store.close?.();
  if (name === 'PostgreSQL') {
    const pg = (await import('pg')).default;
    const client = new pg.Client(databaseUrl);
    await client.connect();
    await client.query(`DROP TABLE IF EXISTS jobhook_bench_${process.pid}`);
    await client.end();
  }
}
console.log(table(rows, Object.keys(rows[0])));
