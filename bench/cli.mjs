// `jobhook verify` on 10,000 captured deliveries of ~2 KB (JSONL): wall time of the
// spawned binary (process start, key import, reading, verifying, writing), median of 3.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { signDelivery } from '../dist/index.js';
import { ocrBody } from './bodies.mjs';
import { machine, table } from './harness.mjs';

const keys = new URL('../fixtures/keys/', import.meta.url);
const privateKey = readFileSync(new URL('test-2048-private.pem', keys), 'utf8'); // TEST-ONLY
const publicKey = fileURLToPath(new URL('test-2048-public.pem', keys));
const bin = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'jobhook-bench-cli-'));

const template = ocrBody(2000);
const distinct = Array.from({ length: 200 }, (_, k) =>
  JSON.stringify(
    signDelivery(template.replace('3f1c2b9e-6a1d-4e9b-9f1e-2a7c5d8e0b41', `cli-${k}`), privateKey),
  ),
);
const file = join(dir, 'deliveries.jsonl');
writeFileSync(
  file,
  Array.from({ length: 10_000 }, (_, k) => distinct[k % distinct.length]).join('\n') + '\n',
);

function timed(args) {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`exit ${r.status}: ${r.stderr}`);
  return { ms, lines: r.stdout.trim().split('\n').length };
}

console.log(`# cli — ${machine()}\n`);
const rows = [];
for (const [label, args] of [
  ['node dist/cli.js --version (process start)', [bin, '--version']],
  ['jobhook verify, 10,000 × ~2 KB, text', [bin, 'verify', '--key', publicKey, file]],
  ['jobhook verify, 10,000 × ~2 KB, --json', [bin, 'verify', '--json', '--key', publicKey, file]],
]) {
  const runs = [timed(args), timed(args), timed(args)].sort((a, b) => a.ms - b.ms);
  rows.push({ run: label, 'median wall ms': runs[1].ms.toFixed(0), 'lines out': runs[1].lines });
}
console.log(table(rows, Object.keys(rows[0])));
console.log(
  `\nbody size ${Buffer.byteLength(template)} B; per delivery ≈ ${((Number(rows[1]['median wall ms']) - Number(rows[0]['median wall ms'])) / 10).toFixed(0)} µs`,
);
rmSync(dir, { recursive: true, force: true });
