/**
 * `jobhook check` (checkReceiver) against the jobhook/web example apps on the real Bun,
 * Deno and workerd binaries (test/runtimes/harness.ts: the packed package, each app a
 * process): every delivery passes, sizes up to 25 MB included; br is skipped where the
 * runtime's DecompressionStream has no brotli (workerd). Runs are counted from the apps'
 * `job ID: status` lines where the runtime prints them (Bun, Deno).
 */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkReceiver } from '../../src/testing.js';
import { privatePem, publicPem } from '../helpers/keys.js';
import { ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/servers.js';
import {
  findRuntime,
  makeApp,
  packPackage,
  runtimeEnv,
  serve,
  type RuntimeName,
  type Served,
} from './harness.js';

const runtimes = Object.fromEntries((['Bun', 'Deno', 'workerd'] as const).map((n) => [n, findRuntime(n)]));
const scratch = mkdtempSync(join(tmpdir(), 'jobhook-runtimes-check-'));
const app = join(scratch, 'app');
const started: Served[] = [];

beforeAll(async () => {
  makeApp(app, packPackage(scratch), {
    'bun/server.ts': join(ROOT, 'examples', 'bun', 'server.ts'),
    'deno/server.ts': join(ROOT, 'examples', 'deno', 'server.ts'),
    'workers/worker.js': join(ROOT, 'examples', 'workers', 'worker.js'),
    'workers/workerd.capnp': join(ROOT, 'examples', 'workers', 'workerd.capnp'),
  });
  if (runtimes.workerd!.ok) {
    await build({
      entryPoints: [join(app, 'workers', 'worker.js')],
      bundle: true,
      format: 'esm',
      conditions: ['workerd', 'worker', 'browser'],
      external: ['jobhook/rsa.wasm'],
      outfile: join(app, 'workers', 'dist', 'worker.js'),
      logLevel: 'warning',
    });
    copyFileSync(
      join(app, 'node_modules', 'jobhook', 'dist', 'rsa.wasm'),
      join(app, 'workers', 'dist', 'rsa.wasm'),
    );
    // The Durable Object store's storage (workerd.capnp: do-storage, as run.sh makes it).
    mkdirSync(join(app, 'do-storage'), { recursive: true });
  }
}, 120_000);

afterAll(async () => {
  await Promise.all(started.map((s) => s.stop()));
  rmSync(scratch, { recursive: true, force: true });
});

async function start(name: RuntimeName): Promise<Served> {
  const rt = runtimes[name]!;
  if (!rt.ok) throw new Error(rt.reason);
  const port = name === 'workerd' ? await freePort() : undefined;
  const args: Record<RuntimeName, string[]> = {
    Bun: ['bun/server.ts'],
    Deno: ['run', '--unstable-kv', '--allow-net', '--allow-env', 'deno/server.ts'],
    workerd: ['serve', join('workers', 'workerd.capnp'), '--socket-addr', `http=127.0.0.1:${port}`],
  };
  const s = await serve(rt.bin, args[name], {
    cwd: app,
    env: runtimeEnv(scratch, {
      GATEWAY_PUBLIC_KEY: publicPem(2048),
      HOST: '127.0.0.1',
      PORT: String(port ?? 0),
    }),
    port,
  });
  started.push(s);
  return s;
}

/** The job ids the app ran, from its `job ID: success|fail` lines. */
function effectsOf(s: Served): () => string[] {
  return () => [...s.output().matchAll(/^job (\S+): (?:success|fail)$/gm)].map((m) => m[1]!);
}

const BROTLI: Record<RuntimeName, boolean> = { Bun: true, Deno: true, workerd: false };

for (const name of ['Bun', 'Deno', 'workerd'] as const) {
  const rt = runtimes[name]!;
  describe.skipIf(!rt.ok)(`${name}${rt.ok ? ` ${rt.version}` : ` (SKIPPED: ${rt.reason})`}`, () => {
    it(`jobhook/web on ${name}: every delivery of a default check passes${BROTLI[name] ? '' : ' (br skipped: 415)'}`, async () => {
      const s = await start(name);
      // workerd keeps a Worker's console.log to itself unless asked: runs are read from the answers there.
      const effects = name === 'workerd' ? undefined : effectsOf(s);
      const report = await checkReceiver(`${s.url}/webhooks/gateway`, {
        privateKey: privatePem(2048),
        effects,
        backoffMs: 50,
        maxBackoffMs: 400,
      });
      const notPassed = report.results
        .filter((r) => r.verdict !== 'passed')
        .map((r) => `${r.id}: ${r.verdict} ${r.meaning}`);
      expect(notPassed, s.output().slice(-2000)).toEqual(
        BROTLI[name]
          ? []
          : [
              'genuine/br: skipped HTTP 415 ENCODING_UNSUPPORTED: this Content-Encoding is not taken, which is fine (the gateway sends bodies unencoded)',
            ],
      );
      expect(report).toMatchObject({ ok: true, countedFrom: effects === undefined ? 'answers' : 'effects' });
    }, 300_000);
  });
}
