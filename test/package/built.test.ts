/**
 * The package as users get it: the built files (ESM and CJS), the binary, and what a
 * bundler makes of the web entry. Builds the JavaScript once (declarations are
 * checked by `npm run check:packaging`).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, fixture } from '../helpers/paths.js';

const dist = join(ROOT, 'dist');
const scratch = mkdtempSync(join(tmpdir(), 'jobhook-built-'));

beforeAll(() => {
  // JavaScript only (JOBHOOK_BUILD=js keeps the declarations already in dist).
  execFileSync(process.execPath, [join(ROOT, 'node_modules', 'tsup', 'dist', 'cli-default.js'), '--silent'], {
    cwd: ROOT,
    stdio: 'pipe',
    env: { ...process.env, JOBHOOK_BUILD: 'js' },
  });
}, 120_000);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the built binary', () => {
  it('runs as a process: stdin, output and exit codes', () => {
    const bin = join(dist, 'cli.js');
    expect(existsSync(bin)).toBe(true);
    expect(readFileSync(bin, 'utf8')).toMatch(/^#!\/usr\/bin\/env node/);
    const signed = spawnSync(
      process.execPath,
      [bin, 'sign', '--key', fixture('keys', 'test-2048-private.pem'), '--job-id', 'spawned'],
      { encoding: 'utf8' },
    );
    expect(signed.status).toBe(0);
    const ok = spawnSync(
      process.execPath,
      [bin, 'verify', '--key', fixture('keys', 'test-2048-public.pem'), '-'],
      { input: signed.stdout, encoding: 'utf8' },
    );
    expect({ status: ok.status, stdout: ok.stdout }).toEqual({
      status: 0,
      stdout: `VALID spawned orjson ${fixture('keys', 'test-2048-public.pem')}\n`,
    });
    const bad = spawnSync(
      process.execPath,
      [bin, 'verify', '--key', fixture('keys', 'test-3072-public.pem'), '-'],
      { input: signed.stdout, encoding: 'utf8' },
    );
    expect(bad.status).toBe(1);
    expect(spawnSync(process.execPath, [bin, 'verify'], { input: '', encoding: 'utf8' }).status).toBe(2);
  });
});

describe('class names survive the build', () => {
  it('under require() (CJS) and import (ESM): err.name, String(err), constructor.name', async () => {
    type Entries = typeof import('../../src/index.js') & typeof import('../../src/errors.js');
    const load = (format: 'cjs' | 'esm') => async (entry: string) =>
      format === 'cjs'
        ? createRequire(import.meta.url)(join(dist, `${entry}.cjs`))
        : await import(pathToFileURL(join(dist, `${entry}.js`)).href);
    const both = async (format: 'cjs' | 'esm') =>
      ({ ...(await load(format)('index')), ...(await load(format)('errors')) }) as Entries;
    const [cjs, esm] = [await both('cjs'), await both('esm')];
    for (const m of [cjs, esm]) {
      const err = new m.SignatureInvalidError('forged');
      expect({ name: err.name, text: String(err), ctor: err.constructor.name }).toEqual({
        name: 'SignatureInvalidError',
        text: 'SignatureInvalidError: forged',
        ctor: 'SignatureInvalidError',
      });
      expect(new m.BodyTooLargeError(10).name).toBe('BodyTooLargeError');
      expect(m.MemoryIdempotencyStore.name).toBe('MemoryIdempotencyStore');
      expect(new m.GatewayNotFoundError('x', 404).name).toBe('GatewayNotFoundError');
      // One copy recognises the other's errors.
      expect((m === cjs ? esm : cjs).isWebhookError(err)).toBe(true);
    }
    const redis = createRequire(import.meta.url)(
      join(dist, 'redis.cjs'),
    ) as typeof import('../../src/redis.js');
    expect(redis.RedisIdempotencyStore.name).toBe('RedisIdempotencyStore');
  });
});

describe('the verification workers of the built package', () => {
  it('start from dist under import and require, and verify a large delivery', async () => {
    const { signDelivery } = (await import('../../src/index.js')) as typeof import('../../src/index.js');
    const body = `{"event":"async_job_completed","job_id":"built-worker","status":"success","finished_at":"${new Date().toISOString()}","output":{"a":"${'x'.repeat(50_000)}"}}`;
    const d = signDelivery(body, readFileSync(fixture('keys', 'test-2048-private.pem'), 'utf8'));
    const publicKey = readFileSync(fixture('keys', 'test-2048-public.pem'), 'utf8');
    const cjs = createRequire(import.meta.url)(
      join(dist, 'index.cjs'),
    ) as typeof import('../../src/index.js');
    const esm = (await import(
      pathToFileURL(join(dist, 'index.js')).href
    )) as typeof import('../../src/index.js');
    for (const m of [esm, cjs]) {
      const jobs: string[] = [];
      const receive = m.createReceiver({
        publicKey,
        workerThresholdBytes: 1024,
        log: {},
        onEvent: (e) => void jobs.push(e.job_id),
      });
      const answer = await receive({ body: d.body, headers: d.headers });
      expect(answer.status).toBe(200);
      expect(jobs).toEqual(['built-worker']);
      await receive.close();
    }
  });
});

describe('the WebAssembly RSA operation of the built package', () => {
  // Loaded by a dynamic import() only where the probe finds no raw RSA in node:crypto
  // (Deno): BigInt answers until it is loaded, WebAssembly after. Counted by the modules
  // of its size compiled.
  for (const format of ['esm', 'cjs'] as const) {
    it(`loads when the probe picks it, and opens every fixture before and after (${format})`, async () => {
      const { rsaWasmBytes } = await import('../../src/lib/runtime/crypto/rsa-wasm.js');
      const { deliveries, publicPem } = await import('../helpers/keys.js');
      const cases = deliveries().map((d) => ({
        body: d.body,
        headers: d.headers,
        jobId: d.jobId,
        key: publicPem(d.keyBits),
      }));
      const load =
        format === 'esm'
          ? `const m = await import(${JSON.stringify(pathToFileURL(join(dist, 'index.js')).href)});`
          : `const m = require(${JSON.stringify(join(dist, 'index.cjs'))});`;
      const script = `${format === 'esm' ? "import crypto from 'node:crypto';" : "const crypto = require('node:crypto'); (async () => {"}
const Real = WebAssembly.Module;
let rsa = 0;
WebAssembly.Module = class extends Real { constructor(bytes) { super(bytes); if (bytes.byteLength === ${rsaWasmBytes().byteLength}) rsa++; } };
crypto.publicDecrypt = () => { throw new Error('Unknown padding'); };
${load}
const cases = ${JSON.stringify(cases)};
const now = () => Date.parse('2026-11-21T10:05:00Z');
const verifyAll = () => cases.map((c) => m.createVerifier({ publicKey: c.key, now }).verify(c.body, c.headers).jobId === c.jobId);
const before = verifyAll();
const compiledBefore = rsa;
await new Promise((resolve) => setTimeout(resolve, 200));
const after = verifyAll();
console.log(JSON.stringify({ before, compiledBefore, after, compiledAfter: rsa }));
${format === 'esm' ? '' : '})();'}`;
      const file = join(scratch, `rsa-fallback.${format === 'esm' ? 'mjs' : 'cjs'}`);
      writeFileSync(file, script);
      const out = spawnSync(process.execPath, [file], { encoding: 'utf8' });
      expect(out.stderr).toBe('');
      const all = cases.map(() => true);
      expect(JSON.parse(out.stdout)).toEqual({
        before: all,
        compiledBefore: 0,
        after: all,
        compiledAfter: 1,
      });
    });
  }
});

describe('optional peer dependencies', () => {
  // The built files, copied where no node_modules can be found: as in an app that did not install ioredis or pg.
  const pkg = join(scratch, 'app', 'node_modules', 'jobhook');
  beforeAll(() => {
    cpSync(dist, join(pkg, 'dist'), { recursive: true });
    cpSync(join(ROOT, 'package.json'), join(pkg, 'package.json'));
  });

  for (const [entry, make, dep] of [
    ['redis', "new m.RedisIdempotencyStore({ url: 'redis://127.0.0.1:6379' })", 'ioredis'],
    ['postgres', "new m.PostgresIdempotencyStore({ connectionString: 'postgres://127.0.0.1/x' })", 'pg'],
  ] as const) {
    for (const format of ['esm', 'cjs'] as const) {
      it(`a missing ${dep} fails at construction, with the install command (${entry}, ${format})`, () => {
        const file = join(scratch, 'app', `try-${entry}.${format === 'esm' ? 'mjs' : 'cjs'}`);
        const load =
          format === 'esm'
            ? `const m = await import('jobhook/${entry}');`
            : `const m = require('jobhook/${entry}');`;
        writeFileSync(
          file,
          `${format === 'esm' ? '' : '(async () => {'}${load}\ntry { ${make}; console.log('constructed'); } catch (e) { console.log(e.name + ': ' + e.message); }${format === 'esm' ? '' : '})();'}\n`,
        );
        const out = spawnSync(process.execPath, [file], { encoding: 'utf8', cwd: join(scratch, 'app') });
        expect(out.stderr).toBe('');
        expect(out.stdout.trim()).toBe(
          `TypeError: ${entry === 'redis' ? 'RedisIdempotencyStore' : 'PostgresIdempotencyStore'} needs the optional peer dependency ${dep}, which is not installed: npm install ${dep}`,
        );
      });
    }
  }
});

describe('the web entry in a bundle', () => {
  it('an edge bundle of jobhook/web plus errors and the memory store from jobhook pulls in no node: module', async () => {
    // In the app whose node_modules holds the built package (see above).
    const entry = join(scratch, 'app', 'edge.mjs');
    writeFileSync(
      entry,
      "import { createReceiver } from 'jobhook/web';\nimport { isWebhookError, MemoryIdempotencyStore } from 'jobhook';\n" +
        'export default { fetch: createReceiver({ publicKey: globalThis.KEY, store: new MemoryIdempotencyStore(), onEvent: (e) => console.log(e.job_id, isWebhookError(e)) }) };\n',
    );
    const out = await build({
      entryPoints: [entry],
      bundle: true,
      write: false,
      platform: 'neutral',
      format: 'esm',
      conditions: ['workerd', 'worker', 'browser'],
      absWorkingDir: join(scratch, 'app'),
      logLevel: 'silent',
    });
    const code = out.outputFiles[0]!.text;
    // The edge build of jobhook was picked (its stubs, unused here, are shaken out; the bundle names each module it took).
    expect(code).toContain('node_modules/jobhook/dist/neutral.js');
    expect(code).not.toContain('node_modules/jobhook/dist/index.js');
    expect(code).toContain('async_job_completed');
    expect(code.match(/from\s*["']node:[a-z_/]+["']|require\(["']node:/g) ?? []).toEqual([]);
  });
});
