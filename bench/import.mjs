// Cold import: how long `import('jobhook')` takes in a fresh Node process (what a CLI, a
// serverless cold start or a test worker pays before the first line of its own code).
//
// Each sample is one new process whose entry is a small module file that times only the
// import it makes (performance.now() and process.cpuUsage() around the dynamic import or
// the require(), so process start-up is left out), in wall time and in CPU time (all
// threads: less sensitive to other work on the machine). Contenders are interleaved:
// round r starts one process per contender, in turn, so a change of machine load hits
// all of them alike. "− baseline" is the median of the per-round differences from the
// baseline of the same module system: a module that imports only node:crypto (which
// jobhook needs anyway) for import(), a file that requires only node:crypto for
// require(). "files" and "kB" are the package's files the import loads (its static
// imports, followed) and their size: Node's loaders pay for each file and V8 compiles
// every byte.
//
// Why the entry is a file: a program's entry is a file, so by the time it imports
// jobhook, Node's ESM loader has loaded files before (the modules it needs for reading
// one: node:fs/promises and what that loads). A process started with `-e` has not, and
// its first file import pays ~3-4 ms of that (a file module importing only node:crypto
// costs that much more than `-e "await import('node:crypto')"`), which no package can
// avoid. `--eval` times the old way (a `-e` entry, every contender against
// `-e "await import('node:crypto')"`), for comparison with figures taken before.
//
// `--instructions` counts instead of timing: one process per contender under valgrind's
// callgrind (Linux, valgrind installed), single-threaded, with fixed hash and random seeds
// and no address randomisation, so the count repeats to ~0.01 % whatever else the machine
// runs; "− baseline" is then the whole process's instructions minus the baseline
// process's: the import's share. What a millisecond is worth in instructions depends on
// the machine; the differences between contenders do not.
//
//   node bench/import.mjs [--rounds N] [--eval] [--instructions] [--also NAME=PATH ...]
//   (--also adds a module file to compare, e.g. another checkout's dist/index.js; a .cjs file is required.
//   A copy of another checkout's dist/ needs the package's package.json beside it: without
//   "type": "module" Node 20 compiles each .js file twice, as CommonJS and then as ESM, and
//   the loader reads the nearest package.json, whose size counts too)
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { machine, median, spread, table } from './harness.mjs';

const args = process.argv.slice(2);
let rounds = 10;
let evalEntry = false;
let instructions = false;
const extra = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--rounds') rounds = Number(args[++i]);
  else if (args[i] === '--eval') evalEntry = true;
  else if (args[i] === '--instructions') instructions = true;
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

// The entries and the baselines, written to a directory of their own (no package.json above them but the system's).
const dir = mkdtempSync(join(os.tmpdir(), 'jobhook-import-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
const report =
  'const w=performance.now()-t,u=process.cpuUsage(c);process.stdout.write(w+" "+(u.user+u.system)/1000)';
const esmTimer = `const c=process.cpuUsage(),t=performance.now();await import(process.argv.at(-1));${report}`;
const cjsTimer = `const c=process.cpuUsage(),t=performance.now();require(process.argv.at(-1));${report}`;
const file = (name, text) => {
  writeFileSync(join(dir, name), text);
  return join(dir, name);
};
const esmEntry = file('entry.mjs', esmTimer);
const cjsEntry = file('entry.cjs', cjsTimer);
const esmBaseline = file('baseline.mjs', "import 'node:crypto';\n");
const cjsBaseline = file('baseline.cjs', "require('node:crypto');\n");
const empty = file('empty.mjs', 'export {};\n');

/** How one sample process is started: node's arguments, the target last. */
const esm = (path) =>
  evalEntry
    ? ['--input-type=module', '-e', esmTimer, pathToFileURL(path).href]
    : [esmEntry, pathToFileURL(path).href];
const cjs = (path) => (evalEntry ? ['-e', cjsTimer, path] : [cjsEntry, path]);
const byExtension = (path) => (path.endsWith('.cjs') ? cjs(path) : esm(path));

const ESM_BASE = 'baseline: a module importing node:crypto';
const CJS_BASE = 'baseline: a CommonJS file requiring node:crypto';
const EVAL_BASE = "baseline: -e import('node:crypto')";
/** name → [node arguments, the baseline it is compared with, its file (for files/kB)] */
const contenders = evalEntry
  ? {
      [EVAL_BASE]: [['--input-type=module', '-e', esmTimer, 'node:crypto'], EVAL_BASE],
      "import('jobhook')": [esm(dist('index.js')), EVAL_BASE, dist('index.js')],
      "require('jobhook')": [cjs(dist('index.cjs')), EVAL_BASE, dist('index.cjs')],
      "import('jobhook/express')": [esm(dist('express.js')), EVAL_BASE, dist('express.js')],
      "import('jobhook/web')": [esm(dist('web.js')), EVAL_BASE, dist('web.js')],
      ...Object.fromEntries(extra.map(([name, path]) => [name, [byExtension(path), EVAL_BASE, path]])),
    }
  : {
      [ESM_BASE]: [esm(esmBaseline), ESM_BASE],
      'an empty module (no node:crypto)': [esm(empty), ESM_BASE],
      "import('jobhook')": [esm(dist('index.js')), ESM_BASE, dist('index.js')],
      "import('jobhook/express')": [esm(dist('express.js')), ESM_BASE, dist('express.js')],
      "import('jobhook/web')": [esm(dist('web.js')), ESM_BASE, dist('web.js')],
      [CJS_BASE]: [cjs(cjsBaseline), CJS_BASE],
      "require('jobhook')": [cjs(dist('index.cjs')), CJS_BASE, dist('index.cjs')],
      ...Object.fromEntries(
        extra.map(([name, path]) => [
          name,
          [byExtension(path), path.endsWith('.cjs') ? CJS_BASE : ESM_BASE, path],
        ]),
      ),
    };

/**
 * The package's files a module file loads: itself and its relative static imports,
 * followed (not a dynamic import(), which CommonJS writes
 * `Promise.resolve().then(() => _interopRequireWildcard(require("./x.cjs")))`).
 */
function loadedFiles(path) {
  const seen = new Set();
  const visit = (p) => {
    if (seen.has(p)) return;
    seen.add(p);
    for (const m of readFileSync(p, 'utf8').matchAll(
      /(?:\bfrom\s*|\bimport\s*|(?<!\(\) => _interopRequireWildcard\()\brequire\(\s*)["'](\.\.?\/[^"']+)["']/g,
    ))
      visit(join(dirname(p), m[1]));
  };
  visit(path);
  return { files: seen.size, kB: [...seen].reduce((sum, p) => sum + statSync(p).size, 0) / 1000 };
}

const names = Object.keys(contenders);

if (instructions) {
  /** Instructions of one process (callgrind's "Collected"), single-threaded, seeds fixed, without address randomisation where setarch is there. */
  const count = (nodeArgs) => {
    const valgrind = [
      'valgrind',
      '--tool=callgrind',
      '--callgrind-out-file=/dev/null',
      '--smc-check=all-non-file',
      process.execPath,
      '--single-threaded',
      '--hash-seed=1',
      '--random-seed=1',
      ...nodeArgs,
    ];
    const setarch = spawnSync('setarch', ['-R', 'true']).status === 0;
    const { NODE_EXTRA_CA_CERTS: _certs, ...env } = process.env; // read at start-up: work outside the import, and the same for all
    const out = spawnSync(
      setarch ? 'setarch' : valgrind[0],
      setarch ? ['-R', ...valgrind] : valgrind.slice(1),
      { encoding: 'utf8', env },
    );
    const collected = /Collected : (\d+)/.exec(out.stderr);
    if (out.status !== 0 || collected === null)
      throw new Error(`valgrind: ${out.error?.message ?? out.stderr.slice(-500)}`);
    return Number(collected[1]) / 1e6;
  };
  const counted = Object.fromEntries(names.map((name) => [name, count(contenders[name][0])]));
  const rows = names.map((name) => {
    const [, base, path] = contenders[name];
    const loaded = path === undefined ? undefined : loadedFiles(path);
    return {
      contender: name,
      files: loaded === undefined ? '' : String(loaded.files),
      kB: loaded === undefined ? '' : loaded.kB.toFixed(0),
      'instructions M': counted[name].toFixed(1),
      '− baseline M': name === base ? '' : (counted[name] - counted[base]).toFixed(1),
    };
  });
  console.log(
    `${machine()}\n${new Date().toISOString()}, instructions of one process each (callgrind, ${evalEntry ? '-e entries' : 'file entries'})\n`,
  );
  console.log(table(rows));
  process.exit(0);
}

const times = Object.fromEntries(names.map((n) => [n, []]));
const cpu = Object.fromEntries(names.map((n) => [n, []]));
// One warm-up round (file system cache), not counted.
for (let r = -1; r < rounds; r++) {
  for (const name of names) {
    const out = spawnSync(process.execPath, contenders[name][0], { encoding: 'utf8' });
    if (out.status !== 0) throw new Error(`${name}: ${out.stderr}`);
    const [wall, used] = out.stdout.split(' ').map(Number);
    if (r >= 0) {
      times[name].push(wall);
      cpu[name].push(used);
    }
  }
}

const rows = names.map((name) => {
  const [, base, path] = contenders[name];
  const loaded = path === undefined ? undefined : loadedFiles(path);
  const t = times[name];
  const c = cpu[name];
  return {
    contender: name,
    files: loaded === undefined ? '' : String(loaded.files),
    kB: loaded === undefined ? '' : loaded.kB.toFixed(0),
    'median ms': median(t).toFixed(1),
    'spread ms': spread(t, 1),
    '− baseline ms': name === base ? '' : median(t.map((x, i) => x - times[base][i])).toFixed(1),
    'CPU median ms': median(c).toFixed(1),
    'CPU − baseline ms': name === base ? '' : median(c.map((x, i) => x - cpu[base][i])).toFixed(1),
  };
});
console.log(
  `${machine()}\n${new Date().toISOString()}, ${rounds} rounds of fresh processes (${evalEntry ? '-e entries' : 'file entries'}), load average ${os
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}\n`,
);
console.log(table(rows));
