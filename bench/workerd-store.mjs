// The Durable Object store's cost per delivery on workerd (issue 35, item 6):
//   node bench/workerd-store.mjs [--rounds=9] [--pairs=400]
// One workerd process (the binary from npm), one Worker bundled from the sources with
// jobhook/cloudflare, its JobhookIdempotencyObject on SQLite storage on local disk (as
// examples/workers/workerd.capnp has it). Each request runs `pairs` deliveries' store work
// inside the Worker — claim, then complete (what the receiver sends the store for a
// handler shorter than its lease's renewal) — against:
//   - the memory store (no I/O: the floor);
//   - the object's round trip alone (a ping, no storage: the call's cost), and a claim that
//     finds the job held (the row read, nothing written), per call;
//   - the Durable Object store, one delivery at a time, and 32 at once on 1 and 4 shards.
// workerd's clocks stand still while a Worker computes, so the figures are taken from
// outside: the request's wall time and the workerd process's CPU time (/proc/PID/stat, all
// its threads), per delivery, in interleaved rounds.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { load, machine, median, spread, table } from './harness.mjs';

const args = Object.fromEntries(process.argv.slice(2).map((a) => a.replace(/^--/, '').split('=')));
const rounds = Number(args.rounds ?? 9);
const pairs = Number(args.pairs ?? 400);
const root = fileURLToPath(new URL('..', import.meta.url));
const workerdBin = join(root, 'node_modules', '@cloudflare', 'workerd-linux-64', 'bin', 'workerd');

// TMPDIR=/dev/shm puts the object's storage on tmpfs (its fsyncs then cost nothing).
const dir = mkdtempSync(join(tmpdir(), 'jobhook-workerd-store-bench-'));
const source = `
import { DurableObjectIdempotencyStore } from ${JSON.stringify(join(root, 'src', 'cloudflare.ts'))};
import { MemoryIdempotencyStore } from ${JSON.stringify(join(root, 'src', 'store.ts'))};
export { JobhookIdempotencyObject } from ${JSON.stringify(join(root, 'src', 'cloudflare.ts'))};
let round = 0;
export default {
  async fetch(request, env) {
    const { store, pairs, inflight, shards } = await request.json();
    const name = 'bench-' + round++;
    const s = store === 'memory' ? new MemoryIdempotencyStore() : new DurableObjectIdempotencyStore({ namespace: env.JOBHOOK, name, shards });
    let next = 0, done = 0;
    const lane = async () => {
      while (next < pairs) {
        const job = name + '-' + next++;
        if (store === 'ping') { await s.ping(); done++; continue; }
        if (store === 'held') {
          if (next === 1) await s.claim(name, { leaseMs: 600000 });
          if ((await s.claim(name, { leaseMs: 30000 })).status === 'in_progress') done++;
          continue;
        }
        const c = await s.claim(job, { leaseMs: 30000 });
        if (c.status !== 'acquired') throw new Error(c.status);
        if ((await s.complete(job, c.token, { retainMs: 60000, fence: c.fence })) === 'completed') done++;
      }
    };
    await Promise.all(Array.from({ length: inflight }, lane));
    return Response.json({ done });
  },
};`;
writeFileSync(join(dir, 'src.js'), source);
await build({
  entryPoints: [join(dir, 'src.js')],
  bundle: true,
  format: 'esm',
  platform: 'neutral',
  conditions: ['workerd', 'worker', 'browser'],
  outfile: join(dir, 'worker.js'),
  logLevel: 'error',
});
mkdirSync(join(dir, 'do'));
const port = await new Promise((resolve) => {
  const s = createServer().listen(0, '127.0.0.1', () => {
    const { port } = s.address();
    s.close(() => resolve(port));
  });
});
writeFileSync(
  join(dir, 'bench.capnp'),
  `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "main", worker = .w), (name = "do", disk = (path = ${JSON.stringify(join(dir, 'do'))}, writable = true))],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "main")],
);
const w :Workerd.Worker = (
  modules = [(name = "worker.js", esModule = embed "worker.js")],
  compatibilityDate = "2025-09-01",
  durableObjectNamespaces = [(className = "JobhookIdempotencyObject", uniqueKey = "bench", enableSql = true)],
  durableObjectStorage = (localDisk = "do"),
  bindings = [(name = "JOBHOOK", durableObjectNamespace = "JobhookIdempotencyObject")],
);`,
);
const child = spawn(workerdBin, ['serve', join(dir, 'bench.capnp')], {
  stdio: ['ignore', 'ignore', 'inherit'],
});
process.on('exit', () => child.kill());
const version = (
  await new Promise((resolve) => {
    const v = spawn(workerdBin, ['--version']);
    let out = '';
    v.stdout.on('data', (c) => (out += c));
    v.on('close', () => resolve(out.trim()));
  })
).replace(/^workerd\s*/, '');
const ticks = () => {
  const f = readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10; // utime + stime, clock ticks of 10 ms → ms
};
async function post(body) {
  const res = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`HTTP ${res.status} ${await res.text()}`);
  return res.json();
}
for (let i = 0; ; i++) {
  try {
    await post({ store: 'memory', pairs: 1, inflight: 1 });
    break;
  } catch (err) {
    if (i > 100) throw err;
    await new Promise((r) => setTimeout(r, 100));
  }
}

const contenders = {
  'memory store (no I/O)': { store: 'memory', inflight: 1, shards: 1 },
  'object round trip alone (ping), per call': { store: 'ping', inflight: 1, shards: 1 },
  'a claim answered in_progress (read, no write), per call': { store: 'held', inflight: 1, shards: 1 },
  'Durable Object, 1 at a time': { store: 'do', inflight: 1, shards: 1 },
  'Durable Object, 32 at once': { store: 'do', inflight: 32, shards: 1 },
  'Durable Object, 32 at once, 4 shards': { store: 'do', inflight: 32, shards: 4 },
};
const cpu = Object.fromEntries(Object.keys(contenders).map((k) => [k, []]));
const wall = Object.fromEntries(Object.keys(contenders).map((k) => [k, []]));
const started = new Date().toISOString();
const loadBefore = load();
for (let r = 0; r < rounds + 1; r++) {
  for (const [name, c] of Object.entries(contenders)) {
    const c0 = ticks();
    const t0 = performance.now();
    const got = await post({ ...c, pairs });
    const t = performance.now() - t0;
    const used = ticks() - c0;
    if (got.done !== pairs) throw new Error(`${name}: ${JSON.stringify(got)}`);
    if (r >= 1) {
      cpu[name].push((used / pairs) * 1000);
      wall[name].push((t / pairs) * 1000);
    }
  }
}
const exited = new Promise((r) => child.once('exit', r));
child.kill();
await exited;
rmSync(dir, { recursive: true, force: true });

const rows = Object.keys(contenders).map((name) => ({
  contender: name,
  'wall µs/delivery': median(wall[name]).toFixed(0),
  'wall spread': spread(wall[name], 0),
  'deliveries/s': Math.round(1e6 / median(wall[name])),
  'workerd CPU µs/delivery': median(cpu[name]).toFixed(0),
  'CPU spread': spread(cpu[name], 0),
}));
console.log(
  `workerd ${version}; ${pairs} deliveries (claim + complete) per request, ${rounds} rounds; ${JSON.stringify(machine())}; started ${started}; load ${loadBefore} → ${load()}\n`,
);
console.log(table(rows));
