/**
 * What `npm pack` ships, from a copy of the repository as a fresh clone has it, after
 * the JavaScript-only build of `npm run demo` (test/package/tarball.ts): the prepack
 * script builds everything, so every entry of the exports map has its JavaScript and
 * both declaration files; no source maps; a small tarball.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, ROOT } from '../helpers/paths.js';
import { packedTarball, type Packed } from './tarball.js';

type Conditions = { [condition: string]: string | Conditions };
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  exports: Record<string, string | Conditions>;
  bin: Record<string, string>;
};

/** Every file path the exports map names, with the condition path that names it. */
function targets(value: string | Conditions, at: string[] = []): Array<{ at: string; file: string }> {
  if (typeof value === 'string') return [{ at: at.join(' → '), file: value.replace(/^\.\//, '') }];
  return Object.entries(value).flatMap(([k, v]) => targets(v, [...at, k]));
}

const unpacked = mkdtempSync(join(tmpdir(), 'jobhook-unpacked-'));
let packed: Packed;
let files: Set<string>;
/** The text of a file in the tarball. */
let read: (path: string) => string;

beforeAll(async () => {
  packed = await packedTarball();
  files = new Set(packed.files.map((f) => f.path));
  execFileSync('tar', ['-xzf', packed.tarball, '-C', unpacked]);
  read = (path) => readFileSync(join(unpacked, 'package', path), 'utf8');
}, 15 * 60_000);
afterAll(() => rmSync(unpacked, { recursive: true, force: true }));

describe('npm pack (prepack builds; a fresh clone after npm run demo)', () => {
  it('ships every file the exports map and bin name', () => {
    const named = Object.entries(pkg.exports).flatMap(([subpath, value]) => targets(value, [subpath]));
    expect(named.length).toBeGreaterThan(30);
    const missing = named.filter(({ file }) => !files.has(file));
    expect(missing).toEqual([]);
    for (const bin of Object.values(pkg.bin)) expect(files.has(bin.replace(/^\.\//, ''))).toBe(true);
  });

  it('every entry has its ESM and CJS JavaScript, and its .d.ts and .d.cts', () => {
    const entries = Object.keys(pkg.exports)
      .filter((s) => s !== './package.json' && s !== './rsa.wasm')
      .map((s) => (s === '.' ? 'index' : s.slice(2)));
    expect(entries).toEqual([
      'index',
      'express',
      'web',
      'errors',
      'gateway',
      'store',
      'redis',
      'postgres',
      'sqlite',
      'testing',
      'bullmq',
      'nats',
      'cloudflare',
      'deno',
    ]);
    for (const name of entries) {
      for (const ext of ['js', 'cjs', 'd.ts', 'd.cts'])
        expect(files.has(`dist/${name}.${ext}`), `dist/${name}.${ext}`).toBe(true);
    }
    // The edge build of jobhook, and the worker file the verification pool starts (by URL, not by import).
    expect(files.has('dist/neutral.js')).toBe(true);
    expect(files.has('dist/verify-worker.js')).toBe(true);
  });

  it('jobhook/rsa.wasm (for Workers) is the RSA module the code embeds, with its declarations', async () => {
    expect(Object.keys(pkg.exports)).toContain('./rsa.wasm');
    for (const f of ['dist/rsa.wasm', 'dist/rsa-wasm.d.ts', 'dist/rsa-wasm.d.cts'])
      expect(files.has(f), f).toBe(true);
    const { rsaWasmBytes } = await import('../../src/lib/runtime/crypto/rsa-wasm.js');
    const shipped = readFileSync(join(unpacked, 'package', 'dist', 'rsa.wasm'));
    expect(Buffer.compare(shipped, Buffer.from(rsaWasmBytes()))).toBe(0);
    const exports = WebAssembly.Module.exports(new WebAssembly.Module(shipped)).map((e) => e.name);
    expect(exports).toEqual(expect.arrayContaining(['memory', 'rsa_prepare', 'rsa_modexp']));
  });

  it('every relative import of a shipped JavaScript or declaration file is shipped too', () => {
    const broken: string[] = [];
    for (const path of files) {
      if (!/\.(c?js|d\.c?ts)$/.test(path)) continue;
      const text = read(path);
      for (const m of text.matchAll(/(?:from\s*|import\s*\(?\s*|require\(\s*)["'](\.\.?\/[^"']+)["']/g)) {
        const target = join(path, '..', m[1]!).replace(/\\/g, '/');
        // A declaration file imports its sibling chunk by the JavaScript name ('./x.js' → x.d.ts).
        const candidates = path.endsWith('.d.ts')
          ? [target.replace(/\.js$/, '.d.ts')]
          : path.endsWith('.d.cts')
            ? [target.replace(/\.cjs$|\.js$/, '.d.cts')]
            : [target];
        if (!candidates.some((c) => files.has(c))) broken.push(`${path} → ${m[1]}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('the declarations are one set, real: the entry types of jobhook name its public functions, with their examples', () => {
    // Each ESM declaration re-exports its CommonJS one (scripts/share-declarations.mjs); the
    // exports map still names a .d.ts under import and a .d.cts under require.
    const entries = Object.keys(pkg.exports)
      .filter((s) => s !== './package.json' && s !== './rsa.wasm')
      .map((s) => (s === '.' ? 'index' : s.slice(2)));
    for (const name of entries) expect(read(`dist/${name}.d.ts`)).toBe(`export * from './${name}.cjs';\n`);
    expect([...files].filter((path) => /-[\w-]{8}\.d\.ts$/.test(path))).toEqual([]);
    const text = read('dist/index.d.cts');
    // A public function is declared under its name, or under its implementation's name and
    // exported as the public one; either way its declaration carries its JSDoc example.
    for (const name of ['createVerifier', 'createReceiver', 'verifyWebhook', 'signDelivery']) {
      const declared = new RegExp(`\\b(\\w+) as ${name}\\b`).exec(text)?.[1] ?? name;
      const doc = new RegExp(`/\\*\\*((?!\\*/)[\\s\\S])*\\*/\\s*declare function ${declared}\\b`).exec(text);
      expect(doc?.[0], `dist/index.d.cts: ${name} (declared as ${declared})`).toContain('@example');
    }
  });

  it('the binary is executable and starts with its #! line', () => {
    for (const bin of Object.values(pkg.bin)) {
      const path = bin.replace(/^\.\//, '');
      expect(read(path).startsWith('#!/usr/bin/env node\n'), path).toBe(true);
      expect(statSync(join(unpacked, 'package', path)).mode & 0o111, path).toBe(0o111);
    }
  });

  it("each embedded WebAssembly module ships once per format: the CLI and the worker share the library's chunks", () => {
    // A copy per bundle was 20-odd kB of the tarball each. The modules are base64 template
    // literals in lines of 100 characters (src/lib/**/*-wasm*.ts); 20 such lines are one of them.
    const where = new Map<string, string[]>();
    for (const path of files) {
      if (!/\.c?js$/.test(path)) continue;
      for (const m of read(path).matchAll(/`\n?((?:[A-Za-z0-9+/=]{100}\n){20,}[A-Za-z0-9+/=]*\n?)`/g)) {
        const key = m[1]!.slice(0, 80);
        where.set(key, [...(where.get(key) ?? []), path]);
      }
    }
    expect(where.size, 'the canonical engine and the RSA module').toBeGreaterThanOrEqual(2);
    for (const paths of where.values()) {
      expect(
        paths.filter((p) => p.endsWith('.js')),
        paths.join(', '),
      ).toHaveLength(1);
      expect(
        paths.filter((p) => p.endsWith('.cjs')),
        paths.join(', '),
      ).toHaveLength(1);
    }
  });

  /**
   * The package's files loading `entry` loads: it and its static imports, followed. Not
   * a dynamic import(), which CommonJS writes `Promise.resolve().then(() =>
   * _interopRequireWildcard(require("./x.cjs")))`: that file is loaded when first used.
   */
  const closure = (entry: string): string[] => {
    const seen = new Set<string>();
    const visit = (path: string): void => {
      if (seen.has(path)) return;
      seen.add(path);
      for (const m of read(path).matchAll(
        /(?:\bfrom\s*|\bimport\s*|(?<!\(\) => _interopRequireWildcard\()\brequire\(\s*)["'](\.\.?\/[^"']+)["']/g,
      )) {
        visit(join(dirname(path), m[1]!).replace(/\\/g, '/'));
      }
    };
    visit(entry);
    return [...seen];
  };

  it("import('jobhook') and require('jobhook') load at most 3 of the package's files, all of them ASCII", () => {
    // Node 20's ESM loader pays for every file (bench/import.mjs); a chunk with one
    // non-ASCII byte is decoded from UTF-8 the slow way and compiled as two-byte source.
    // A new dynamic import() of a jobhook module, or an entry that takes part of the core
    // (tsup.config.ts: SHARES), cuts the core into more chunks.
    for (const entry of ['dist/index.js', 'dist/index.cjs']) {
      const loaded = closure(entry);
      expect(loaded.length, loaded.join(', ')).toBeLessThanOrEqual(3);
      expect(
        loaded.filter((path) => /[^\x00-\x7f]/.test(read(path))),
        entry,
      ).toEqual([]);
    }
  });

  it('a production import loads none of the tools (src/tools/: the CLI, the simulator, jobhook check)', () => {
    // The tools' code is in chunks of its own that only jobhook/testing and the command load.
    // ESM chunks name each module's source (`// src/tools/…`); both formats hold the
    // simulator's User-Agent and the command's usage line.
    const toolCode = (path: string) => {
      const text = read(path);
      return (
        /^\/\/ src\/tools\//m.test(text) ||
        text.includes('jobhook-gateway-simulator/') ||
        text.includes('Usage: jobhook')
      );
    };
    for (const marker of ['dist/testing.js', 'dist/testing.cjs', 'dist/cli.js'])
      expect(closure(marker).some(toolCode), `${marker} loads the tools`).toBe(true);
    const entries = [...files].filter(
      (path) => /^dist\/[a-z-]+\.c?js$/.test(path) && !/^dist\/(testing|cli)\./.test(path),
    );
    expect(entries.length).toBeGreaterThan(15);
    for (const entry of entries) expect(closure(entry).filter(toolCode), entry).toEqual([]);
  });

  it("import('jobhook'), require('jobhook') and jobhook/web load neither the WebAssembly RSA operation nor the worker pool: each is loaded when first used", async () => {
    // Where node:crypto does the RSA operation (Node, Bun) the WebAssembly one (15 kB of
    // base64 and its code) is never needed; the pool only by a costly body (bench/import.mjs).
    const { RSA_WASM_BASE64 } = await import('../../src/lib/runtime/crypto/rsa-wasm-module.js');
    const markers = {
      'the RSA WebAssembly': RSA_WASM_BASE64.trim().split('\n')[0]!,
      'the worker pool': 'var WorkerPool = class',
    };
    const shippedJs = [...files].filter((path) => /\.c?js$/.test(path));
    for (const [what, marker] of Object.entries(markers)) {
      expect(marker.length, what).toBeGreaterThan(20);
      // Shipped once per format, in a file of its own that no entry loads.
      expect(
        shippedJs
          .filter((path) => read(path).includes(marker))
          .map((path) => path.slice(path.lastIndexOf('.')))
          .sort(),
        what,
      ).toEqual(['.cjs', '.js']);
      for (const entry of [
        'dist/index.js',
        'dist/index.cjs',
        'dist/web.js',
        'dist/web.cjs',
        'dist/express.js',
        'dist/express.cjs',
      ]) {
        expect(
          closure(entry).filter((path) => read(path).includes(marker)),
          `${entry}: ${what}`,
        ).toEqual([]);
      }
    }
  });

  it('is readable: no line of shipped JavaScript over 1,000 characters', () => {
    const long: string[] = [];
    for (const path of files) {
      if (!/\.c?js$/.test(path)) continue;
      read(path)
        .split('\n')
        .forEach(
          (line, i) => line.length > 1000 && long.push(`${path}:${i + 1} (${line.length} characters)`),
        );
    }
    expect(long).toEqual([]);
  });

  it('a configuration error thrown at construction leads with its message, not kilobytes of source', () => {
    const app = join(unpacked, 'app');
    execFileSync('mkdir', ['-p', join(app, 'node_modules')]);
    execFileSync('ln', ['-sfn', join(unpacked, 'package'), join(app, 'node_modules', 'jobhook')]);
    const privateKey = readFileSync(fixture('keys', 'test-2048-private.pem'), 'utf8');
    for (const [file, code] of [
      [
        'esm.mjs',
        "import { createReceiver } from 'jobhook/express';\ncreateReceiver({ publicKey: process.env.KEY, onEvent() {} });\n",
      ],
      [
        'cjs.cjs',
        "const { createReceiver } = require('jobhook/express');\ncreateReceiver({ publicKey: process.env.KEY, onEvent() {} });\n",
      ],
    ] as const) {
      writeFileSync(join(app, file), code);
      const run = spawnSync(process.execPath, [file], {
        cwd: app,
        encoding: 'utf8',
        env: { ...process.env, KEY: privateKey },
      });
      expect(run.status, file).toBe(1);
      const at = run.stderr.indexOf('TypeError');
      expect(at, run.stderr.slice(0, 300)).toBeGreaterThanOrEqual(0);
      // Node prints the throwing line before the error: a line of code, not a chunk.
      expect(at, `${file}: ${run.stderr.slice(0, 300)}`).toBeLessThan(1000);
      expect(run.stderr.slice(at, at + 400)).toMatch(/private key/i);
    }
  });

  it('ships no source maps, no sources, no tests; the tarball stays under 400 kB (readable, not minified)', () => {
    const maps = packed.files.filter((f) => f.path.endsWith('.map'));
    expect(maps.reduce((n, f) => n + f.size, 0)).toBeLessThanOrEqual(100 * 1024);
    expect(packed.files.filter((f) => /^(src|test|fixtures|bench|examples|native)\//.test(f.path))).toEqual(
      [],
    );
    const largest = [...packed.files]
      .sort((a, b) => b.size - a.size)
      .slice(0, 8)
      .map((f) => `${f.path} ${f.size}`);
    console.log(
      `packed: ${packed.tarball.split('/').pop()} ${packed.size} bytes, ${packed.files.length} files; demo build ${packed.seconds.demoBuild.toFixed(1)} s, npm pack ${packed.seconds.pack.toFixed(1)} s; largest unpacked: ${largest.join(', ')}`,
    );
    expect(packed.size).toBeLessThanOrEqual(400 * 1024);
  });
});
