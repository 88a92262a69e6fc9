// Canonical engines, each followed by SHA-256 of its output, in interleaved rounds in
// one process (every round times every contender once on the same input; the table
// gives the median and the min–max spread of the per-round figures):
//   native  JSON.stringify(JSON.parse(text), null, 2)   (not canonical: the baseline)
//   js      canonicalizeBytes (src/lib/core/canonical, the tree engine)
//   wasm    the WebAssembly engine (src/lib/core/canonical/wasm), output hashed chunk by chunk
// then the peak extra memory per body byte on the 10 MB OCR body, one child process
// per contender; then malformed ~1 MB bodies of several shapes, each failing near its
// end (what a replay under a captured signature can send): the WebAssembly engine's
// refusal against the JS parser's (which the WebAssembly engine ran after its own
// parse, on the calling thread, before it reported its errors itself).
//
//   node bench/engine.mjs               (re-runs itself under tsx to load the TypeScript sources)
//   node bench/engine.mjs --malformed   (only the malformed bodies)
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { base64Body, ocrBody } from './bodies.mjs';
import { machine, table } from './harness.mjs';

const SELF = fileURLToPath(import.meta.url);
if (process.env.JOBHOOK_BENCH_CHILD !== '1') {
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--expose-gc', SELF, ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: { ...process.env, JOBHOOK_BENCH_CHILD: '1' },
  });
  process.exit(r.status ?? 1);
}

const { parseDocument } = await import('../src/lib/core/canonical/parse.ts');
const { serializeDocument } = await import('../src/lib/core/canonical/serialize.ts');
// The JS tree engine itself (the public canonicalize uses the WebAssembly engine where it loads).
const canonicalizeBytes = (body) =>
  new TextEncoder().encode(serializeDocument(parseDocument(body), 'orjson'));
const { wasmEngine, wasmMemoryBytes } = await import('../src/lib/core/canonical/wasm/engine.ts');
const engine = wasmEngine();
if (engine === undefined) throw new Error('WebAssembly engine unavailable');
const OPTIONS = { maxDepth: 1000 };

const contenders = {
  native: (b) =>
    createHash('sha256')
      .update(JSON.stringify(JSON.parse(b.text), null, 2))
      .digest('hex'),
  js: (b) => createHash('sha256').update(canonicalizeBytes(b.bytes)).digest('hex'),
  'wasm (bytes in)': (b) => wasmHash(b.bytes),
  'wasm (string in)': (b) => wasmHash(b.text),
};

function wasmHash(body) {
  const doc = engine.parse(body, OPTIONS);
  const h = createHash('sha256');
  doc.write('orjson', (chunk) => h.update(chunk));
  doc.dispose();
  return h.digest('hex');
}

/** The ≲ 5 µs target: WASM call, copy in and serialize, no hashing. */
let sink = 0;
function wasmNoHash(body) {
  const doc = engine.parse(body, OPTIONS);
  doc.write('orjson', (chunk) => {
    sink += chunk[0];
  });
  doc.dispose();
}

// ---------------------------------------------------------------------------------
// Child mode: peak memory of one contender on one body file.
// ---------------------------------------------------------------------------------
if (process.argv[2] === '--memory') {
  const [, , , name, file] = process.argv;
  const small = { text: ocrBody(20_000), bytes: new TextEncoder().encode(ocrBody(20_000)) };
  contenders[name](small); // compile and warm up
  const bytes = new Uint8Array(readFileSync(file));
  const body = {
    bytes,
    text: name === 'native' || name === 'wasm (string in)' ? new TextDecoder().decode(bytes) : '',
  };
  globalThis.gc();
  const before = process.memoryUsage();
  const maxBefore = process.resourceUsage().maxRSS * 1024;
  const wasmBefore = wasmMemoryBytes();
  contenders[name](body);
  const after = process.memoryUsage();
  const maxAfter = process.resourceUsage().maxRSS * 1024;
  process.stdout.write(
    JSON.stringify({
      peakRss: maxAfter - before.rss,
      earlierPeak: maxBefore - before.rss,
      // WebAssembly memory never shrinks, so its growth is its peak.
      wasmMemory: wasmMemoryBytes() - wasmBefore,
    }),
  );
  process.exit(0);
}

// ---------------------------------------------------------------------------------
// Throughput in interleaved rounds.
// ---------------------------------------------------------------------------------
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const spread = (xs, digits) => `${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}`;

/** Per-round wall-clock ms per operation, and CPU ms per operation (process.cpuUsage: all threads, descheduled time excluded). */
function rounds(body, names, { rounds: n, warmup, reps }) {
  const times = Object.fromEntries(names.map((k) => [k, []]));
  const cpu = Object.fromEntries(names.map((k) => [k, []]));
  for (let r = 0; r < warmup + n; r++) {
    for (const name of names) {
      const fn = name === 'wasm, no hash' ? () => wasmNoHash(body.bytes) : () => contenders[name](body);
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      for (let i = 0; i < reps; i++) fn();
      const ms = (performance.now() - t0) / reps;
      const c = process.cpuUsage(c0);
      if (r >= warmup) {
        times[name].push(ms);
        cpu[name].push((c.user + c.system) / 1000 / reps);
      }
    }
  }
  return { times, cpu };
}

// ---------------------------------------------------------------------------------
// Malformed bodies: what refusing one costs.
// ---------------------------------------------------------------------------------

/** ~1 MB malformed bodies of several shapes, each failing within its last few bytes. */
function malformedBodies(size = 1024 * 1024) {
  const enc = new TextEncoder();
  const fill = (item) => {
    const parts = [];
    let n = 0;
    for (let i = 0; n < size; i++) {
      const s = item(i);
      parts.push(s);
      n += s.length + 1;
    }
    return parts.join(',');
  };
  const ocr = ocrBody(size);
  const badUtf8 = enc.encode(ocr);
  badUtf8[badUtf8.lastIndexOf(0x22, badUtf8.length - 30) - 1] = 0xff; // inside the last string
  return [
    ['floats, a bad number last', enc.encode(`[${fill((i) => `${(i * 0.6180339887) % 1000}`)},1.e5]`)],
    ['OCR words, cut off before its last brace', enc.encode(ocr.slice(0, -1))],
    [
      'OCR words, a duplicate key in the last word',
      enc.encode(ocr.replace(/\]\}\],"confidence"/, ',{"text":"x","text":"y"}]}],"confidence"')),
    ],
    [
      'strings with escapes, the last unterminated',
      enc.encode(`[${fill((i) => `"line ${i}\\n\\tMüller \\u00e9 \\"q\\" 東京"`)},"abc`),
    ],
    [
      'an object of 40k members, a bad last value',
      enc.encode(`{${fill((i) => `"key${i}":{"a":${i},"b":[true,null]}`)},"last":tru}`),
    ],
    [
      'arrays nested 1,000 deep, cut off',
      enc.encode('['.repeat(999) + fill((i) => `${i}.5`) + ']'.repeat(998)),
    ],
    ['OCR words, invalid UTF-8 in the last string', badUtf8],
  ];
}

/** Runs fn, which must throw BodyMalformedError. */
function refused(fn) {
  try {
    fn();
  } catch (err) {
    if (err.code !== 'BODY_MALFORMED') throw err;
    sink += err.offset;
    return;
  }
  throw new Error('a malformed body was accepted');
}

/** The refusal of each malformed body by each engine, in interleaved rounds. */
function malformedSection() {
  const malformedRows = [];
  const decoder = new TextDecoder();
  for (const [label, bytes] of malformedBodies()) {
    const text = label.includes('UTF-8') ? undefined : decoder.decode(bytes);
    const refusers = {
      'wasm (bytes in)': () => refused(() => engine.parse(bytes, OPTIONS)),
      ...(text === undefined ? {} : { 'wasm (string in)': () => refused(() => engine.parse(text, OPTIONS)) }),
      'JS parser (bytes in)': () => refused(() => parseDocument(bytes, OPTIONS)),
    };
    const names = Object.keys(refusers);
    const times = Object.fromEntries(names.map((k) => [k, []]));
    const cpu = Object.fromEntries(names.map((k) => [k, []]));
    for (let r = 0; r < 2 + 11; r++) {
      for (const name of names) {
        const c0 = process.cpuUsage();
        const t0 = performance.now();
        for (let i = 0; i < 3; i++) refusers[name]();
        const ms = (performance.now() - t0) / 3;
        const c = process.cpuUsage(c0);
        if (r >= 2) {
          times[name].push(ms);
          cpu[name].push((c.user + c.system) / 1000 / 3);
        }
      }
    }
    const js = 'JS parser (bytes in)';
    for (const name of names) {
      const ratio = times[js].map((x, i) => x / times[name][i]);
      malformedRows.push({
        body: `${label} (${bytes.length} B)`,
        contender: name,
        'median (ms/op)': median(times[name]).toFixed(2),
        'spread (min–max)': `${spread(times[name], 2)} ms`,
        'CPU time (median)': `${median(cpu[name]).toFixed(2)} ms`,
        '× JS parser (median of rounds)':
          name === js ? '1.00' : `${median(ratio).toFixed(1)} (${spread(ratio, 1)})`,
      });
    }
  }
  console.log(
    `\n## Malformed ~1 MB bodies, each failing near its end: the refusal (BodyMalformedError with its offset)\n`,
  );
  console.log(table(malformedRows, Object.keys(malformedRows[0])));
  console.log(
    `\n"× JS parser": how many times cheaper than the JS parser's refusal of the same bytes, which the WebAssembly engine ` +
      `used to run after its own parse to get the message and offset.`,
  );
}

const load0 = os.loadavg();
const start = new Date();
console.log(`# Canonical engines — ${machine()}\n`);
console.log(`Started ${start.toISOString()}, load average ${load0.map((x) => x.toFixed(2)).join(' ')}.\n`);
if (process.argv.includes('--malformed')) {
  malformedSection();
  process.exit(0);
}

const ENGINES = ['native', 'js', 'wasm (bytes in)', 'wasm (string in)'];
const cases = [
  {
    label: 'ocrBody(1400)',
    text: ocrBody(1400),
    opts: { rounds: 15, warmup: 3, reps: 4000 },
    extra: ['wasm, no hash'],
  },
  {
    label: 'ocrBody 10 MB',
    text: ocrBody(10 * 1024 * 1024),
    opts: { rounds: 9, warmup: 2, reps: 1 },
    extra: [],
  },
  {
    label: 'base64Body 10 MB',
    text: base64Body(10 * 1024 * 1024),
    opts: { rounds: 9, warmup: 2, reps: 1 },
    extra: [],
  },
];

const rows = [];
for (const c of cases) {
  const body = { text: c.text, bytes: new TextEncoder().encode(c.text) };
  // The engines agree (native is not canonical, so it is not compared).
  const want = contenders.js(body);
  for (const name of ['wasm (bytes in)', 'wasm (string in)']) {
    if (contenders[name](body) !== want)
      throw new Error(`${name} disagrees with the JS engine on ${c.label}`);
  }
  const names = [...ENGINES, ...c.extra];
  const { times, cpu } = rounds(body, names, c.opts);
  const small = body.bytes.length < 1e5;
  const mb = body.bytes.length / 1e6;
  for (const name of names) {
    const t = times[name];
    const ratio = t.map((x, i) => times.native[i] / x);
    rows.push({
      body: `${c.label} (${body.bytes.length} B)`,
      contender: name === 'native' ? 'native JSON.parse+stringify' : name,
      'median (µs/op or ms/op)': small ? `${(median(t) * 1000).toFixed(2)} µs` : `${median(t).toFixed(1)} ms`,
      'spread (min–max)': small
        ? spread(
            t.map((x) => x * 1000),
            2,
          ) + ' µs'
        : spread(t, 1) + ' ms',
      'MB/s (median)': (mb / (median(t) / 1000)).toFixed(1),
      '× native (median of rounds)':
        name === 'native' ? '1.00' : `${median(ratio).toFixed(2)} (${spread(ratio, 2)})`,
      'CPU time (median)': small
        ? `${(median(cpu[name]) * 1000).toFixed(2)} µs`
        : `${median(cpu[name]).toFixed(1)} ms`,
    });
  }
}
console.log(table(rows, Object.keys(rows[0])));
console.log(
  `\nEvery figure includes SHA-256 of the output (node:crypto) except "wasm, no hash". native takes the body as a string (its best case); ` +
    `js and "wasm (bytes in)" take the UTF-8 bytes a receiver has. Wall-clock figures unless marked CPU time ` +
    `(process.cpuUsage over the same round: every thread of the process, time spent descheduled excluded; it exceeds wall time where GC or hashing runs on helper threads).`,
);

// ---------------------------------------------------------------------------------
// Peak extra memory on the 10 MB OCR body.
// ---------------------------------------------------------------------------------
const dir = mkdtempSync(join(os.tmpdir(), 'jobhook-bench-'));
try {
  const file = join(dir, 'ocr.json');
  const ocr = new TextEncoder().encode(ocrBody(10 * 1024 * 1024));
  writeFileSync(file, ocr);
  const mem = [];
  for (const name of ENGINES) {
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--expose-gc', SELF, '--memory', name, file], {
      encoding: 'utf8',
      env: { ...process.env, JOBHOOK_BENCH_CHILD: '1' },
    });
    if (r.status !== 0) throw new Error(`memory child ${name} failed: ${r.stderr}`);
    const m = JSON.parse(r.stdout);
    mem.push({
      contender: name === 'native' ? 'native JSON.parse+stringify' : name,
      'peak extra RSS': `${(m.peakRss / 2 ** 20).toFixed(1)} MiB`,
      'per body byte': (m.peakRss / ocr.length).toFixed(2),
      'WASM memory growth (its peak)': name.startsWith('wasm')
        ? `${(m.wasmMemory / 2 ** 20).toFixed(1)} MiB (${(m.wasmMemory / ocr.length).toFixed(2)}/B)`
        : '–',
      'RSS peak before the run (above baseline)': `${(m.earlierPeak / 2 ** 20).toFixed(1)} MiB`,
    });
  }
  console.log(`\n## Peak extra memory, ocrBody 10 MB (${ocr.length} B), one fresh process per contender\n`);
  console.log(table(mem, Object.keys(mem[0])));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
malformedSection();

const load1 = os.loadavg();
console.log(
  `\nFinished ${new Date().toISOString()} (${((Date.now() - start.getTime()) / 1000).toFixed(0)} s), load average ${load1.map((x) => x.toFixed(2)).join(' ')}.`,
);
if (sink === -1) console.log(sink);
