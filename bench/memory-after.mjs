// RSS after one large genuine delivery (issue 19, item 4: "after a 25 MB delivery and a GC,
// RSS within 10 MiB of a naive receiver's"). After `npm run build`:
//   node bench/memory-after.mjs [--mb=25] [--rounds=3]
// Each sample is a fresh process (node --expose-gc) that verifies one delivery of about
// --mb MB (the OCR-like body grown with floats) and then reports its RSS: right after
// (with a GC), and again after waiting past the verification workers' idle time
// (WORKER_IDLE_MS, 5 s; --wait=8 seconds by default) with a GC. --dist=URL: another build's dist/. Contenders: jobhook's agnostic receiver (workers on: the
// body goes to a worker), the same with workers off (verified on the main thread), and a
// naive receiver (JSON.parse, safe-stable-stringify, SHA-256, crypto.verify). Figures are
// RSS minus the process's RSS before the delivery, in MiB; rounds interleave the contenders.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { load, machine, median } from './harness.mjs';

const args = Object.fromEntries(process.argv.slice(2).map((a) => a.replace(/^--/, '').split('=')));
const mb = Number(args.mb ?? 25);
const rounds = Number(args.rounds ?? 3);
const wait = Number(args.wait ?? 8);
const dist = args.dist ?? '../dist/';

if (args.child) {
  const { readFileSync } = await import('node:fs');
  const { createHash, createVerify } = await import('node:crypto');
  const { default: stable } = await import('safe-stable-stringify');
  const { createReceiver, signDelivery } = await import(
    new URL('index.js', new URL(args.dist ?? '../dist/', import.meta.url)).href
  );
  const keys = new URL('../fixtures/keys/', import.meta.url);
  const publicPem = readFileSync(new URL('test-2048-public.pem', keys), 'utf8');
  const privatePem = readFileSync(new URL('test-2048-private.pem', keys), 'utf8'); // TEST-ONLY key
  const floats = [];
  for (let i = 0; floats.length * 20 < mb * 1e6; i++) floats.push(((i * 7919) % 100000) / 997 + 0.5);
  const body = JSON.stringify({
    event: 'async_job_completed',
    job_id: `mem-${process.pid}`,
    status: 'success',
    created_at: new Date().toISOString(),
    finished_at: new Date().toISOString(),
    output: { values: floats },
  });
  const { headers } = signDelivery(body, privatePem);
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  const bytes = Buffer.from(body);
  const mib = () => process.memoryUsage().rss / 2 ** 20;
  globalThis.gc();
  const base = mib();
  let ok;
  if (args.child === 'naive') {
    const hex = createHash('sha256')
      .update(stable(JSON.parse(bytes.toString('utf8')), null, 2))
      .digest('hex');
    ok = createVerify('sha256').update(hex).verify(publicPem, lower['x-service-signature'], 'hex');
  } else {
    const receive = createReceiver({
      publicKey: publicPem,
      onEvent: () => undefined,
      log: {},
      maxBodyBytes: 64 * 2 ** 20,
      maxCanonicalBytes: 1024 * 2 ** 20,
      workerThresholdBytes: args.child === 'main-thread' ? false : undefined,
    });
    ok = (await receive({ body: bytes, headers: lower })).status === 200;
    // Not closed: a running receiver keeps its pool (what this measures).
  }
  if (!ok) throw new Error(`${args.child}: the delivery did not verify`);
  globalThis.gc();
  const after = mib() - base;
  await new Promise((r) => setTimeout(r, Number(args.wait ?? 8) * 1000));
  globalThis.gc();
  const later = mib() - base;
  process.stdout.write(JSON.stringify({ base, after, later, bytes: bytes.length }));
  process.exit(0);
}

const file = fileURLToPath(import.meta.url);
const names = {
  'jobhook agnostic receiver, workers on': 'workers',
  'jobhook agnostic receiver, workers off': 'main-thread',
  'naive receiver': 'naive',
};
const out = Object.fromEntries(Object.keys(names).map((n) => [n, []]));
const loadBefore = load();
let size = 0;
for (let r = 0; r < rounds; r++) {
  for (const [name, child] of Object.entries(names)) {
    const res = JSON.parse(
      execFileSync(
        process.execPath,
        ['--expose-gc', file, `--child=${child}`, `--mb=${mb}`, `--wait=${wait}`],
        { encoding: 'utf8', maxBuffer: 1 << 20 },
      ),
    );
    size = res.bytes;
    out[name].push(res);
  }
}
console.log(
  `${machine()}\n${new Date().toISOString()}, ${rounds} rounds, delivery ${(size / 1e6).toFixed(1)} MB, load average ${loadBefore} → ${load()}\n`,
);
console.log(
  `| contender | base RSS MiB | RSS − base after, GC (median, range) | RSS − base ${wait} s later, GC (median, range) |`,
);
console.log('| --- | --- | --- | --- |');
for (const [name, xs] of Object.entries(out)) {
  const f = (k) =>
    `${median(xs.map((x) => x[k])).toFixed(1)} (${Math.min(...xs.map((x) => x[k])).toFixed(1)}–${Math.max(...xs.map((x) => x[k])).toFixed(1)})`;
  console.log(`| ${name} | ${median(xs.map((x) => x.base)).toFixed(1)} | ${f('after')} | ${f('later')} |`);
}
