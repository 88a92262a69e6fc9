// Receiver throughput with the queue handoff (jobhook/bullmq, jobhook/nats) against the
// same receiver with a no-op onEvent: deliveries per second through the framework-agnostic
// receiver, 64 in flight, each a new job (claim, handler, completion in a memory store).
// Interleaved rounds in one process (bench/harness.mjs). Starts its own throwaway
// redis-server (appendonly yes, everysec) and nats-server -js (file storage) on free
// loopback ports from the local binaries; never the machine's own services.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { connect, StorageType } from 'nats';
import { createReceiver, MemoryIdempotencyStore, signDelivery } from '../dist/index.js';
import { createBullMQHandler } from '../dist/bullmq.js';
import { createJetStreamHandler } from '../dist/nats.js';
import { interleaved, load, machine, median, spread, table } from './harness.mjs';

const IN_FLIGHT = 64;
const BATCHES = 4; // per contender per round: 256 deliveries
const ROUNDS = Number(process.env.JOBHOOK_BENCH_ROUNDS) || 15;
const WARMUP = 3;

const freePort = () =>
  new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });

function start(bin, args, ready) {
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${bin} did not start:\n${out}`)), 15_000);
    const read = (c) => {
      out += c;
      if (out.includes(ready)) {
        clearTimeout(timer);
        resolve(child);
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('exit', (code) => reject(new Error(`${bin} exited with ${code}:\n${out}`)));
  });
}

const root = mkdtempSync(join(tmpdir(), 'jobhook-bench-queue-'));
const redisPort = await freePort();
const natsPort = await freePort();
const redis = await start(
  'redis-server',
  [
    '--port',
    String(redisPort),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'yes',
    '--appendfsync',
    'everysec',
    '--dir',
    root,
  ],
  'Ready to accept connections',
);
const natsBin = ['/usr/sbin/nats-server', '/usr/bin/nats-server'].find((p) => existsSync(p));
const nats = await start(
  natsBin ?? 'nats-server',
  ['-a', '127.0.0.1', '-p', String(natsPort), '-js', '-sd', join(root, 'nats')],
  'Server is ready',
);

const publicKey = readFileSync(new URL('../fixtures/keys/test-2048-public.pem', import.meta.url), 'utf8');
const privateKey = readFileSync(new URL('../fixtures/keys/test-2048-private.pem', import.meta.url), 'utf8');

// One signed delivery per job; each contender has its own store, so every contender sees each job once.
const perRound = IN_FLIGHT * BATCHES;
const total = perRound * (ROUNDS + WARMUP);
const finished = new Date().toISOString();
const deliveries = Array.from({ length: total }, (_, i) => {
  const jobId = `bench-${process.pid}-${i}`;
  return signDelivery(
    `{"event":"async_job_completed","job_id":"${jobId}","status":"success","feature":"ocr","subfeature":"ocr","provider":"acme","model":null,` +
      `"created_at":"${finished}","finished_at":"${finished}","output":{"text":"Grüße","confidence":1.0,"box":{"x":0.0,"y":0.5}}}`,
    privateKey,
  );
});

const queue = new Queue(`bench-${process.pid}`, { connection: { host: '127.0.0.1', port: redisPort } });
await queue.waitUntilReady();
const nc = await connect({ servers: `nats://127.0.0.1:${natsPort}` });
const jsm = await nc.jetstreamManager();
await jsm.streams.add({
  name: 'BENCH',
  subjects: ['bench.events'],
  storage: StorageType.File,
  duplicate_window: 300e9,
});
const jetstream = createJetStreamHandler(nc.jetstream(), { subject: 'bench.events', stream: 'BENCH' });
await jetstream.ready;

const receivers = {
  'no-op onEvent': createReceiver({
    publicKey,
    store: new MemoryIdempotencyStore({ maxEntries: total * 2 }),
    log: {},
    onEvent: async () => undefined,
  }),
  'BullMQ handoff (Redis, AOF everysec)': createReceiver({
    publicKey,
    store: new MemoryIdempotencyStore({ maxEntries: total * 2 }),
    log: {},
    onEvent: createBullMQHandler(queue),
  }),
  'JetStream handoff (file storage)': createReceiver({
    publicKey,
    store: new MemoryIdempotencyStore({ maxEntries: total * 2 }),
    log: {},
    onEvent: jetstream,
  }),
};
const next = Object.fromEntries(Object.keys(receivers).map((k) => [k, 0]));
let unexpected = 0;
const contenders = Object.fromEntries(
  Object.entries(receivers).map(([name, receive]) => [
    name,
    async () => {
      const start = next[name];
      next[name] += IN_FLIGHT;
      const answers = await Promise.all(
        deliveries.slice(start, start + IN_FLIGHT).map((d) => receive({ body: d.body, headers: d.headers })),
      );
      for (const a of answers) if (a.status !== 200 || !a.body.includes('processed')) unexpected++;
    },
  ]),
);

const loadBefore = load();
const times = await interleaved(contenders, { rounds: ROUNDS, warmup: WARMUP, reps: BATCHES });
const loadAfter = load();
if (unexpected > 0) throw new Error(`${unexpected} deliveries were not answered 200 processed`);

const baseline = 'no-op onEvent';
const rows = Object.entries(times).map(([name, t]) => {
  const perSecond = t.map((ms) => (IN_FLIGHT * 1000) / ms);
  const ratios = t.map((x, i) => times[baseline][i] / x);
  return {
    contender: name,
    'deliveries/s (median)': median(perSecond).toFixed(0),
    'spread /s': spread(perSecond, 0),
    'µs per delivery': ((median(t) * 1000) / IN_FLIGHT).toFixed(0),
    [`throughput × ${baseline}`]:
      name === baseline ? '1.00' : `${median(ratios).toFixed(2)} (${spread(ratios)})`,
  };
});
console.log(`# queue handoff — ${machine()}\n`);
console.log(
  `${ROUNDS} rounds (+${WARMUP} warm-up), each contender ${BATCHES} × ${IN_FLIGHT} deliveries in flight per round; load average before ${loadBefore}, after ${loadAfter}\n`,
);
console.log(table(rows));
const counts = await queue.getJobCounts('waiting');
const info = await jsm.streams.info('BENCH');
console.log(
  `\nqueued: BullMQ ${counts.waiting} jobs, JetStream ${info.state.messages} messages (each ${total} expected)`,
);

await queue.close();
await nc.close();
redis.kill('SIGKILL');
nats.kill('SIGKILL');
rmSync(root, { recursive: true, force: true });
