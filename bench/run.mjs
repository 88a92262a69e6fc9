// npm run bench: every benchmark in turn, each in its own process (build first).
//   npm run bench                  every bench/*.mjs but the helpers below
//   npm run bench -- stores queue  only those
// A new bench file is picked up by itself; a module that is not a bench goes in HELPERS.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const dist = fileURLToPath(new URL('../dist/index.js', import.meta.url));
if (!existsSync(dist)) {
  console.error('bench: dist/ is missing; run npm run build first');
  process.exit(2);
}
const HELPERS = new Set(['run', 'harness', 'bodies']);
// The older goals first, in the order BENCHMARKS.md gives them; then the rest by name.
const ORDER = [
  'verify',
  'canonicalize',
  'engine',
  'event-loop',
  'express',
  'stores',
  'queue',
  'cli',
  'import',
  'web-verify',
  'telemetry',
];
// Benches whose variants each need a process of their own.
const RUNS = {
  'web-verify': ['--mode=auto', '--mode=deno-like', '--mode=no-node-crypto', '--mode=workers-like'].map(
    (mode) => [mode],
  ),
};
const found = readdirSync(fileURLToPath(new URL('.', import.meta.url)))
  .filter((f) => f.endsWith('.mjs'))
  .map((f) => f.slice(0, -'.mjs'.length))
  .filter((name) => !HELPERS.has(name));
const rank = (name) => (ORDER.includes(name) ? ORDER.indexOf(name) : ORDER.length);
found.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
const only = process.argv.slice(2);
const unknown = only.filter((name) => !found.includes(name));
if (unknown.length > 0) {
  console.error(`bench: no bench/${unknown.join('.mjs, bench/')}.mjs; the benches are ${found.join(', ')}`);
  process.exit(2);
}
const benches = found.filter((name) => only.length === 0 || only.includes(name));
console.log(`benches: ${benches.join(', ')}`);
const failed = [];
for (const name of benches) {
  for (const args of RUNS[name] ?? [[]]) {
    const label = [`bench/${name}.mjs`, ...args].join(' ');
    console.log(`\n===== ${label} =====\n`);
    const r = spawnSync(
      process.execPath,
      ['--expose-gc', fileURLToPath(new URL(`./${name}.mjs`, import.meta.url)), ...args],
      { stdio: 'inherit' },
    );
    if (r.status !== 0) {
      failed.push(label);
      console.error(`${label} exited with ${r.status ?? r.signal}`);
    }
  }
}
if (failed.length > 0) console.error(`\nbench: ${failed.length} failed: ${failed.join('; ')}`);
process.exit(failed.length === 0 ? 0 : 1);
