// jobhook/web verification against the Node verifier, in interleaved rounds in one
// process (issue 22, item 1: jobhook/web ≤ 1.5× the Node verifier's CPU per verification).
// Plain JavaScript on the built package only, so the same file runs on Node, Bun and Deno:
//   node bench/web-verify.mjs [--mode=auto|deno-like|no-node-crypto|workers-like] [--before=DIR]
//   bun bench/web-verify.mjs ...           deno run -A bench/web-verify.mjs ...
// Modes (each needs its own process: the choices are made once per process):
//   auto            as the runtime is: jobhook/web opens with node:crypto where its probe passes
//   deno-like       node:crypto as process.getBuiltinModule hands it out, but its publicDecrypt
//                   refuses RSA_NO_PADDING (as Deno's does): WebAssembly RSA, node:crypto SHA-256
//   no-node-crypto  process.getBuiltinModule hidden first: WebAssembly RSA and WebCrypto's
//                   SHA-256, as in browsers and on Deno without node:crypto
//   workers-like    also WebAssembly compilation from bytes refused (as Cloudflare Workers do)
//                   once the canonical engine is loaded: BigInt RSA, the path before issue 22
// --before=DIR: also time the jobhook/web of another build (DIR/web.js), e.g. the previous
// commit's dist, in the same rounds.
// Per verification: CPU time of the whole process (all threads: WebCrypto's digest runs on
// Node's thread pool) and wall time, the median of per-round figures and their spread;
// ratios are taken round by round against the Node verifier of the same round.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { ocrBody } from './bodies.mjs';
import { load, median, spread, table } from './harness.mjs';

const args = Object.fromEntries(process.argv.slice(2).map((a) => a.replace(/^--/, '').split('=')));
const mode = args.mode ?? 'auto';
if (!['auto', 'deno-like', 'no-node-crypto', 'workers-like'].includes(mode))
  throw new Error(`unknown --mode=${mode}`);
if (mode === 'deno-like') {
  const real = process.getBuiltinModule('node:crypto');
  const noRawRsa = Object.create(real, {
    publicDecrypt: {
      value(options, buffer) {
        if (options.padding === real.constants.RSA_NO_PADDING) throw new TypeError('Unsupported padding');
        return real.publicDecrypt(options, buffer);
      },
    },
  });
  const get = process.getBuiltinModule;
  process.getBuiltinModule = (id) =>
    id === 'node:crypto' || id === 'crypto' ? noRawRsa : get.call(process, id);
} else if (mode !== 'auto') {
  process.getBuiltinModule = undefined;
}

const { createVerifier, signDelivery } = await import('../dist/index.js');
const web = await import('../dist/web.js');
const before =
  args.before === undefined
    ? undefined
    : await import(pathToFileURL(`${args.before.replace(/\/$/, '')}/web.js`).href);

const runtime = globalThis.Bun
  ? `Bun ${globalThis.Bun.version}`
  : globalThis.Deno
    ? `Deno ${globalThis.Deno.version.deno}`
    : `Node ${process.version}`;
const cpuUsage = typeof process.cpuUsage === 'function' ? () => process.cpuUsage() : undefined;

const keys = new URL('../fixtures/keys/', import.meta.url);
const publicPem = readFileSync(new URL('test-2048-public.pem', keys), 'utf8');
const privatePem = readFileSync(new URL('test-2048-private.pem', keys), 'utf8'); // TEST-ONLY key

const body = ocrBody(1400);
const bytes = new TextEncoder().encode(body);
const { headers } = signDelivery(body, privatePem);
const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
// Below the test key's modulus: it costs the one RSA operation, then is refused.
const forged = { ...lower, 'x-service-signature': 'ab'.repeat(256) };

/** A contender, or why it cannot run here (checked once: a genuine delivery verifies, a forged one is refused). */
async function contender(make) {
  try {
    const v = make();
    const r = await v.verify(bytes, lower);
    if (typeof r.jobId !== 'string') throw new Error('no jobId');
    let code = 'VALID';
    try {
      await v.verify(bytes, forged); // the Node verifier throws, jobhook/web rejects
    } catch (err) {
      code = err.code;
    }
    if (code !== 'SIGNATURE_INVALID') throw new Error(`a forged delivery gave ${code}`);
    const sync = typeof v.verify(bytes, lower).then !== 'function';
    return {
      valid: () => v.verify(bytes, lower),
      forged: sync
        ? () => {
            try {
              v.verify(bytes, forged);
            } catch {
              // SIGNATURE_INVALID, checked above
            }
          }
        : () => v.verify(bytes, forged).catch(() => undefined),
    };
  } catch (err) {
    return { error: err instanceof Error ? err.message : String(err) };
  }
}

const nodeVerifier = await contender(() => createVerifier({ publicKey: publicPem, maxAgeSeconds: false }));
if (mode === 'workers-like') {
  // The canonical engine is loaded (above); from now on WebAssembly cannot be compiled from bytes.
  const real = globalThis.WebAssembly;
  const blocked = Object.create(real);
  Object.defineProperty(blocked, 'Module', {
    value: function Module() {
      throw new real.CompileError('WebAssembly.Module(): Wasm code generation disallowed by embedder');
    },
  });
  globalThis.WebAssembly = blocked;
}
const webVerifier = await contender(() => web.createVerifier({ publicKey: publicPem, maxAgeSeconds: false }));
const beforeVerifier =
  before === undefined
    ? undefined
    : await contender(() => before.createVerifier({ publicKey: publicPem, maxAgeSeconds: false }));

const contenders = {};
const skipped = [];
for (const [name, c] of [
  ['Node verifier', nodeVerifier],
  ['jobhook/web', webVerifier],
  ...(beforeVerifier === undefined ? [] : [['jobhook/web before', beforeVerifier]]),
]) {
  if (c.error !== undefined) {
    skipped.push(`${name}: ${c.error}`);
    continue;
  }
  contenders[`${name}, genuine`] = c.valid;
  contenders[`${name}, forged`] = c.forged;
}

const rounds = Number(args.rounds ?? 15);
const warmup = Number(args.warmup ?? 3);
const minMs = Number(args.minMs ?? 150);
const wall = Object.fromEntries(Object.keys(contenders).map((n) => [n, []]));
const cpu = Object.fromEntries(Object.keys(contenders).map((n) => [n, []]));

const started = new Date().toISOString();
const loadBefore = load();
for (let r = 0; r < warmup + rounds; r++) {
  for (const [name, fn] of Object.entries(contenders)) {
    let n = 0;
    const c0 = cpuUsage?.();
    const t0 = performance.now();
    let t;
    do {
      await fn();
      n++;
      t = performance.now();
    } while (t - t0 < minMs);
    const c1 = cpuUsage?.();
    if (r < warmup) continue;
    wall[name].push(((t - t0) * 1000) / n);
    if (c0 !== undefined) cpu[name].push((c1.user - c0.user + c1.system - c0.system) / n);
  }
}

const metric = cpuUsage === undefined ? wall : cpu;
const yardstick = 'Node verifier, genuine';
const rows = Object.keys(contenders).map((name) => {
  const row = {
    contender: name,
    'CPU µs/op': cpuUsage === undefined ? 'n/a' : median(cpu[name]).toFixed(1),
    'CPU spread': cpuUsage === undefined ? '' : spread(cpu[name], 1),
    'wall µs/op': median(wall[name]).toFixed(1),
  };
  if (metric[yardstick] !== undefined) {
    const ratios = metric[name].map((x, i) => x / metric[yardstick][i]);
    row[`${cpuUsage === undefined ? 'wall' : 'CPU'} × Node verifier genuine`] =
      `${median(ratios).toFixed(2)} (${spread(ratios)})`;
  }
  return row;
});

console.log(`# web-verify, mode ${mode} — ${runtime}, ${process.platform} ${process.arch}\n`);
console.log(
  `Started ${started}, load average ${loadBefore}; ${rounds} rounds of ≥ ${minMs} ms per contender after ${warmup} warm-up rounds; body ${bytes.length} B, 2048-bit key.\n`,
);
console.log(table(rows));
const pairs = [
  ['jobhook/web, genuine', 'Node verifier, genuine'],
  ['jobhook/web, forged', 'Node verifier, forged'],
  ['jobhook/web before, genuine', 'jobhook/web, genuine'],
  ['jobhook/web before, forged', 'jobhook/web, forged'],
];
console.log('');
for (const [a, b] of pairs) {
  if (metric[a] === undefined || metric[b] === undefined) continue;
  const ratios = metric[a].map((x, i) => x / metric[b][i]);
  console.log(
    `${a} ÷ ${b} (${cpuUsage === undefined ? 'wall' : 'CPU'} per round): median ${median(ratios).toFixed(2)} (${spread(ratios)})`,
  );
}
for (const s of skipped) console.log(`skipped ${s}`);
console.log(`\nFinished ${new Date().toISOString()}, load average ${load()}.`);
