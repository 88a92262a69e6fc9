// Issue 39: the agnostic receiver's own work, in process, without HTTP: `receive({ body,
// headers })` (the memory store, 32 in flight) and `createVerifier().verify` against the
// floor's work on the same bytes (SHA-256 of the body, one RSA verification with a
// KeyObject, JSON.parse, the answer's JSON). Distinct, freshly signed 1.4 KB deliveries (each
// job once); one warm-up round of N, then interleaved rounds of N each; CPU time
// (process.cpuUsage, all threads) per delivery. Reported: the median and spread per
// contender, and its difference from the floor round by round.
//   npm run build && node bench/receive.mjs [deliveries per round, default 3000] [rounds, default 5]
//   (ONLY=floor,receive for some contenders; run with --cpu-prof to profile)
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  sign as rsaSign,
  verify as rsaVerify,
} from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ocrBody } from './bodies.mjs';
import { load, machine, median, spread, table } from './harness.mjs';

const lib = await import('../dist/index.js');
const keys = new URL('../fixtures/keys/', import.meta.url);
const publicPem = readFileSync(new URL('test-2048-public.pem', keys), 'utf8');
const key = createPrivateKey(readFileSync(new URL('test-2048-private.pem', keys), 'utf8')); // TEST-ONLY
const N = Number(process.argv[2] ?? 3000);
const ROUNDS = Number(process.argv[3] ?? 5);
const template = ocrBody(1400).replace(
  '2026-11-21T10:00:05Z',
  new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
);
const signHex = (text) =>
  rsaSign('sha256', Buffer.from(createHash('sha256').update(text).digest('hex')), key).toString('hex');
// The gateway's signature covers the canonical form; the floor's, the raw bytes.
const deliveries = Array.from({ length: N * (ROUNDS + 1) }, (_, k) => {
  const body = template.replace('3f1c2b9e-6a1d-4e9b-9f1e-2a7c5d8e0b41', `receive-bench-${process.pid}-${k}`);
  return { body: Buffer.from(body), floor: signHex(body), signature: signHex(lib.canonicalize(body)) };
});
const headers = (d) => ({
  'content-type': 'application/json',
  'x-service-signature': d.signature,
  'x-service-hash-algorithm': 'SHA256',
});
const publicKey = createPublicKey(publicPem);
const receive = lib.createReceiver({ publicKey: publicPem, onEvent: () => undefined, log: false });
const verifier = lib.createVerifier({ publicKey: publicPem });
await verifier.ready();

const CONTENDERS = {
  floor: async (list) => {
    for (const d of list) {
      const digest = createHash('sha256').update(d.body).digest('hex');
      const ok = rsaVerify('sha256', Buffer.from(digest), publicKey, Buffer.from(d.floor, 'hex'));
      const event = JSON.parse(d.body);
      if (!ok) throw new Error('floor: not verified');
      JSON.stringify({ status: 'processed', job_id: event.job_id });
    }
  },
  verify: async (list) => {
    for (const d of list) verifier.verify(d.body, headers(d));
  },
  receive: async (list) => {
    let next = 0;
    const lane = async () => {
      while (next < list.length) {
        const d = list[next++];
        const answer = await receive({ body: d.body, headers: headers(d) });
        if (answer.status !== 200) throw new Error(`receive: ${answer.status} ${answer.body}`);
      }
    };
    await Promise.all(Array.from({ length: 32 }, lane));
  },
};
const names = Object.keys(CONTENDERS).filter((n) => process.env.ONLY?.split(',').includes(n) ?? true);
const cpu = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
console.log(
  `# receive, in process — ${machine()}\n\nStarted ${new Date().toISOString()}, load average ${load()}.`,
);
const results = Object.fromEntries(names.map((n) => [n, []]));
for (let round = 0; round <= ROUNDS; round++) {
  const list = deliveries.slice(round * N, (round + 1) * N);
  for (const name of names) {
    const t = cpu();
    await CONTENDERS[name](list);
    if (round > 0) results[name].push((cpu() - t) / N);
  }
}
const rows = names.map((name) => {
  const r = results[name];
  const over = results.floor === undefined ? undefined : r.map((x, i) => x - results.floor[i]);
  return {
    contender: name,
    'CPU µs/delivery': `${median(r).toFixed(1)} (${spread(r, 1)})`,
    '− floor µs':
      over === undefined || name === 'floor' ? '' : `${median(over).toFixed(1)} (${spread(over, 1)})`,
  };
});
console.log(
  `\n${table(rows)}\n\nFinished ${new Date().toISOString()}, load average ${load()}; ${N} deliveries per round, ${ROUNDS} rounds after one of warm-up.`,
);
await receive.close();
