// jobhook/web on workerd (the Cloudflare Workers runtime, from npm): verification cost with
// the RSA module given as a Worker's WebAssembly module (provideRsaWasmModule +
// jobhook/rsa.wasm) against without it (BigInt RSA: Workers compile no WebAssembly from
// bytes). Issue 22, item 1. After `npm run build`:
//   node bench/workerd-verify.mjs [--rounds=15] [--n=200]
// Two Workers in one workerd process, the same bundle of the built jobhook/web but for the
// one call. Each request runs n verifications of the 1,352-byte OCR-like delivery (genuine or
// forged) inside the Worker, and a third Worker runs the RSA public operation alone; workerd's clocks stand still while a Worker computes, so the
// figures are taken outside: the workerd process's CPU time (/proc/PID/stat, all its
// threads) and the request's wall time, per verification, in interleaved rounds.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, copyFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { ocrBody } from './bodies.mjs';
import { load, machine, median, spread, table } from './harness.mjs';

const args = Object.fromEntries(process.argv.slice(2).map((a) => a.replace(/^--/, '').split('=')));
const rounds = Number(args.rounds ?? 15);
const n = Number(args.n ?? 200);
const root = fileURLToPath(new URL('..', import.meta.url));
const workerdBin = join(root, 'node_modules', '@cloudflare', 'workerd-linux-64', 'bin', 'workerd');

const { signDelivery } = await import('../dist/index.js');
const keys = new URL('../fixtures/keys/', import.meta.url);
const publicPem = readFileSync(new URL('test-2048-public.pem', keys), 'utf8');
const privatePem = readFileSync(new URL('test-2048-private.pem', keys), 'utf8'); // TEST-ONLY key
const body = ocrBody(1400);
const { headers } = signDelivery(body, privatePem);
const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
const forged = { ...lower, 'x-service-signature': 'ab'.repeat(256) };

const dir = mkdtempSync(join(tmpdir(), 'jobhook-workerd-bench-'));
const source = (provide) => `
import { createVerifier, provideRsaWasmModule } from ${JSON.stringify(join(root, 'dist', 'web.js'))};
${provide ? `import rsaWasm from 'jobhook/rsa.wasm';\nprovideRsaWasmModule(rsaWasm);` : ''}
let verifier;
export default {
  async fetch(request, env) {
    verifier ??= createVerifier({ publicKey: env.KEY, maxAgeSeconds: false });
    const { body, headers, n } = await request.json();
    const bytes = new TextEncoder().encode(body);
    let valid = 0, refused = 0;
    for (let i = 0; i < n; i++) {
      try { await verifier.verify(bytes, headers); valid++; } catch (err) { if (err.code !== 'SIGNATURE_INVALID') throw err; refused++; }
    }
    return Response.json({ valid, refused });
  },
};`;
// The RSA public operation alone (src/lib/runtime/crypto/rsa-public.ts, bundled from the sources),
// the WebAssembly module given vs BigInt forced, on a 2048-bit key: n operations per request.
const rsaSource = `
import { provideRsaWasmModule } from ${JSON.stringify(join(root, 'src', 'lib', 'runtime', 'crypto', 'rsa-wasm-engine.ts'))};
import { createRsaPublicOperation } from ${JSON.stringify(join(root, 'src', 'lib', 'runtime', 'crypto', 'rsa-public.ts'))};
import rsaWasm from 'jobhook/rsa.wasm';
provideRsaWasmModule(rsaWasm);
let ops;
export default {
  async fetch(request, env) {
    const { engine, n } = await request.json();
    if (!ops) {
      const jwk = JSON.parse(env.JWK);
      const b64 = (s) => Uint8Array.from(atob(s.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0));
      ops = { wasm: createRsaPublicOperation(b64(jwk.n), b64(jwk.e)), bigint: createRsaPublicOperation(b64(jwk.n), b64(jwk.e), { engine: 'bigint' }) };
    }
    const sig = new Uint8Array(256).fill(0xab);
    let x = 0;
    for (let i = 0; i < n; i++) x ^= ops[engine].apply(sig)[5];
    return Response.json({ x, engine: ops[engine].engine });
  },
};`;
writeFileSync(join(dir, 'rsa.src.js'), rsaSource);
await build({
  entryPoints: [join(dir, 'rsa.src.js')],
  bundle: true,
  format: 'esm',
  external: ['jobhook/rsa.wasm'],
  outfile: join(dir, 'rsa.js'),
  logLevel: 'error',
});
const jwk = JSON.stringify(
  (await import('node:crypto')).createPublicKey(publicPem).export({ format: 'jwk' }),
);
for (const [name, provide] of [
  ['wasm', true],
  ['bigint', false],
]) {
  writeFileSync(join(dir, `${name}.src.js`), source(provide));
  await build({
    entryPoints: [join(dir, `${name}.src.js`)],
    bundle: true,
    format: 'esm',
    conditions: ['workerd', 'worker', 'browser'],
    external: ['jobhook/rsa.wasm'],
    outfile: join(dir, `${name}.js`),
    logLevel: 'error',
  });
}
copyFileSync(join(root, 'dist', 'rsa.wasm'), join(dir, 'rsa.wasm'));

const freePort = () =>
  new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
const ports = { wasm: await freePort(), bigint: await freePort(), rsa: await freePort() };
const worker = (name, modules) =>
  `(modules = [${modules}], compatibilityDate = "2025-09-01", bindings = [(name = "KEY", text = ${JSON.stringify(publicPem)})])`;
writeFileSync(
  join(dir, 'bench.capnp'),
  `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "wasm", worker = ${worker('wasm', '(name = "worker.js", esModule = embed "wasm.js"), (name = "jobhook/rsa.wasm", wasm = embed "rsa.wasm")')}),
    (name = "bigint", worker = ${worker('bigint', '(name = "worker.js", esModule = embed "bigint.js")')}),
    (name = "rsa", worker = (modules = [(name = "worker.js", esModule = embed "rsa.js"), (name = "jobhook/rsa.wasm", wasm = embed "rsa.wasm")], compatibilityDate = "2025-09-01", bindings = [(name = "JWK", text = ${JSON.stringify(jwk)})])),
  ],
  sockets = [
    (name = "wasm", address = "127.0.0.1:${ports.wasm}", http = (), service = "wasm"),
    (name = "bigint", address = "127.0.0.1:${ports.bigint}", http = (), service = "bigint"),
    (name = "rsa", address = "127.0.0.1:${ports.rsa}", http = (), service = "rsa"),
  ],
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
async function post(name, hdrs, count) {
  const payload = name === 'rsa' ? hdrs : { body, headers: hdrs, n: count };
  const res = await fetch(`http://127.0.0.1:${ports[name]}/`, {
    method: 'POST',
    body: JSON.stringify({ ...payload, n: count }),
  });
  if (!res.ok) throw new Error(`${name}: HTTP ${res.status} ${await res.text()}`);
  return res.json();
}
for (let i = 0; ; i++) {
  try {
    await post('wasm', lower, 1);
    await post('bigint', lower, 1);
    await post('rsa', { engine: 'wasm' }, 1);
    break;
  } catch (err) {
    if (i > 100) throw err;
    await new Promise((r) => setTimeout(r, 100));
  }
}

const contenders = {
  'genuine, rsa.wasm given': ['wasm', lower],
  'genuine, BigInt': ['bigint', lower],
  'forged, rsa.wasm given': ['wasm', forged],
  'forged, BigInt': ['bigint', forged],
  'RSA operation, rsa.wasm given': ['rsa', { engine: 'wasm' }],
  'RSA operation, BigInt': ['rsa', { engine: 'bigint' }],
};
const cpu = Object.fromEntries(Object.keys(contenders).map((k) => [k, []]));
const wall = Object.fromEntries(Object.keys(contenders).map((k) => [k, []]));
const started = new Date().toISOString();
const loadBefore = load();
for (let r = 0; r < rounds + 2; r++) {
  for (const [name, [svc, hdrs]] of Object.entries(contenders)) {
    const c0 = ticks();
    const t0 = performance.now();
    const got = await post(svc, hdrs, n);
    const t = performance.now() - t0;
    const c = ticks() - c0;
    const ok = svc === 'rsa' ? got.engine === hdrs.engine : (hdrs === lower ? got.valid : got.refused) === n;
    if (!ok) throw new Error(`${name}: ${JSON.stringify(got)}`);
    if (r >= 2) {
      cpu[name].push((c / n) * 1000);
      wall[name].push((t / n) * 1000);
    }
  }
}
child.kill();
rmSync(dir, { recursive: true, force: true });

const rows = Object.keys(contenders).map((name) => {
  const base = `${name.split(',')[0]}, BigInt`;
  const ratio = wall[name].map((x, i) => wall[base][i] / x);
  return {
    contender: name,
    'wall µs/op': median(wall[name]).toFixed(1),
    'wall spread': spread(wall[name], 1),
    'workerd CPU µs/op': median(cpu[name]).toFixed(1),
    'CPU spread': spread(cpu[name], 1),
    '× BigInt (wall, per round)': name === base ? '1.00' : `${median(ratio).toFixed(2)} (${spread(ratio)})`,
  };
});
console.log(`${machine()}, workerd ${version}`);
console.log(
  `${started}, ${rounds} rounds of ${n} verifications per contender, load average ${loadBefore} → ${load()}\n`,
);
console.log(table(rows));
