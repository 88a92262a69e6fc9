// Cold import: how long `import('jobhook')` takes in a fresh Node process (what a CLI, a
// serverless cold start or a test worker pays before the first line of its own code).
//
// Each sample is one new process that times only its import (performance.now() around
// the dynamic import, so process start-up is left out), in wall time and in CPU time
// (process.cpuUsage, all threads: less sensitive to other work on the machine). Contenders are interleaved: round
// r starts one process per contender, in turn, so a change of machine load hits all of
// them alike. The baseline imports node:crypto (which jobhook needs anyway): "− baseline"
// is the median of the per-round differences, jobhook's own share. "files" is how many of
// the package's files the import loads (its static imports, followed): Node 20's ESM
// loader pays for each one.
//
//   node bench/import.mjs [--rounds N] [--also NAME=PATH ...]
//   (--also adds a module file to compare, e.g. another checkout's dist/index.js; a .cjs file is required)
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { machine, median, spread, table } from './harness.mjs';

const args = process.argv.slice(2);
let rounds = 10;
const extra = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--rounds') rounds = Number(args[++i]);
  else if (args[i] === '--also') {
    const [name, file] = args[++i].split('=');
    extra.push([name, file]);
  } else {
    console.error(`bench/import.mjs: unknown argument ${args[i]}`);
    process.exit(2);
  }
}
const dist = (file) => fileURLToPath(new URL(`../dist/${file}`, import.meta.url));
if (!existsSync(dist('index.js'))) {
  console.error('bench: dist/ is missing; run npm run build first');
  process.exit(2);
}

const report = 'const w=performance.now()-t,u=process.cpuUsage(c);process.stdout.write(w+" "+(u.user+u.system)/1000)';
const esm = (specifier) => `const c=process.cpuUsage(),t=performance.now();await import(${JSON.stringify(specifier)});${report}`;
const cjs = (file) => `const c=process.cpuUsage(),t=performance.now();require(${JSON.stringify(file)});${report}`;
const contenders = {
  'baseline: import node:crypto': ['--input-type=module', '-e', esm('node:crypto')],
  "import('jobhook')": ['--input-type=module', '-e', esm(pathToFileURL(dist('index.js')).href)],
  "require('jobhook')": ['-e', cjs(dist('index.cjs'))],
  "import('jobhook/express')": ['--input-type=module', '-e', esm(pathToFileURL(dist('express.js')).href)],
  "import('jobhook/web')": ['--input-type=module', '-e', esm(pathToFileURL(dist('web.js')).href)],
  ...Object.fromEntries(extra.map(([name, file]) => [name, file.endsWith('.cjs') ? ['-e', cjs(file)] : ['--input-type=module', '-e', esm(pathToFileURL(file).href)]])),
};

/** The package's files a module file loads: itself and its relative static imports, followed. */
function loadedFiles(file) {
  const seen = new Set();
  const visit = (path) => {
    if (seen.has(path)) return;
    seen.add(path);
    for (const m of readFileSync(path, 'utf8').matchAll(/(?:\bfrom\s*|\bimport\s*|\brequire\(\s*)["'](\.\.?\/[^"']+)["']/g)) visit(join(dirname(path), m[1]));
  };
  visit(file);
  return seen.size;
}
const files = {
  "import('jobhook')": loadedFiles(dist('index.js')),
  "require('jobhook')": loadedFiles(dist('index.cjs')),
  "import('jobhook/express')": loadedFiles(dist('express.js')),
  "import('jobhook/web')": loadedFiles(dist('web.js')),
  ...Object.fromEntries(extra.map(([name, file]) => [name, loadedFiles(file)])),
};

const names = Object.keys(contenders);
const times = Object.fromEntries(names.map((n) => [n, []]));
const cpu = Object.fromEntries(names.map((n) => [n, []]));
// One warm-up round (file system cache), not counted.
for (let r = -1; r < rounds; r++) {
  for (const name of names) {
    const out = spawnSync(process.execPath, contenders[name], { encoding: 'utf8' });
    if (out.status !== 0) throw new Error(`${name}: ${out.stderr}`);
    const [wall, used] = out.stdout.split(' ').map(Number);
    if (r >= 0) {
      times[name].push(wall);
      cpu[name].push(used);
    }
  }
}

const base = times[names[0]];
const cpuBase = cpu[names[0]];
const rows = names.map((name) => {
  const t = times[name];
  const c = cpu[name];
  return {
    contender: name,
    files: String(files[name] ?? ''),
    'median ms': median(t).toFixed(1),
    'spread ms': spread(t, 1),
    '− baseline ms': name === names[0] ? '' : median(t.map((x, i) => x - base[i])).toFixed(1),
    'CPU median ms': median(c).toFixed(1),
    'CPU − baseline ms': name === names[0] ? '' : median(c.map((x, i) => x - cpuBase[i])).toFixed(1),
  };
});
console.log(`${machine()}\n${new Date().toISOString()}, ${rounds} rounds of fresh processes, load average ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}\n`);
console.log(table(rows));
