/**
 * The runtime matrix's parts: the Bun, Deno and workerd binaries from their npm packages
 * (devDependencies), the package as users install it (built, packed with `npm pack`,
 * unpacked into an app's node_modules), the example apps started as child processes,
 * and the deliveries sent to them.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { accessSync, constants, cpSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { ROOT } from '../helpers/paths.js';

export type RuntimeName = 'Bun' | 'Deno' | 'workerd';

/** Each runtime's npm package (linux x64 glibc builds, what this project's machines are) and its binary inside. */
const PACKAGES: Record<RuntimeName, { pkg: string; bin: string }> = {
  Bun: { pkg: '@oven/bun-linux-x64', bin: 'bin/bun' },
  Deno: { pkg: '@deno/linux-x64-glibc', bin: 'deno' },
  workerd: { pkg: '@cloudflare/workerd-linux-64', bin: 'bin/workerd' },
};

export type Runtime =
  | { name: RuntimeName; ok: true; bin: string; version: string }
  | { name: RuntimeName; ok: false; reason: string };

/**
 * The binary inside the package, used directly (the packages have no install script, so
 * npm's install-scripts policy changes nothing), checked by running `--version`. Where it
 * cannot run, a loud notice and the runtime's tests are skipped; under CI=true that is an error.
 */
export function findRuntime(name: RuntimeName): Runtime {
  const { pkg, bin } = PACKAGES[name];
  let reason: string | undefined;
  let path = '';
  try {
    path = join(dirname(createRequire(join(ROOT, 'package.json')).resolve(`${pkg}/package.json`)), bin);
  } catch {
    reason = `${pkg} is not installed (npm ci installs it on Linux x64 with glibc)`;
  }
  if (reason === undefined) {
    try {
      accessSync(path, constants.X_OK);
      const run = spawnSync(path, ['--version'], { encoding: 'utf8', timeout: 20_000 });
      const out = `${run.stdout ?? ''}`.trim();
      if (run.status !== 0)
        reason = `${path} --version failed (${run.error?.message ?? `exit ${run.status}`}): ${`${run.stderr ?? ''}`.trim().slice(0, 300)}`;
      else {
        // "1.4.5", "deno 2.9.6 (stable, …)", "workerd 2026-11-17"
        const version = out
          .split('\n')[0]!
          .replace(/^(deno|workerd) /, '')
          .replace(/ \(.*$/, '');
        return { name, ok: true, bin: path, version };
      }
    } catch (err) {
      reason = `${path} cannot be run: ${(err as Error).message}`;
    }
  }
  if (process.env.CI === 'true') throw new Error(`CI must run the ${name} runtime tests, but ${reason}`);
  console.warn(
    `\n${'!'.repeat(100)}\n!!! [jobhook] ${name} runtime tests SKIPPED: ${reason}\n${'!'.repeat(100)}\n`,
  );
  return { name, ok: false, reason: reason! };
}

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): string {
  const r = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0)
    throw new Error(
      `${cmd} ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status}`}):\n${r.stdout}\n${r.stderr}`,
    );
  return r.stdout;
}

/**
 * The package's tarball, of the current source: the JavaScript built by the project's tsup
 * config (as built.test.ts does, but into `scratch`, so no test reads dist while another
 * rewrites it), staged with package.json and README.md, then `npm pack` (its scripts off:
 * the build is done). JOBHOOK_TEST_TARBALL, when set, is used instead:
 * scripts/test-node-majors.sh packs once for all the Node majors it runs these suites on.
 */
export function packPackage(scratch: string): string {
  if (process.env.JOBHOOK_TEST_TARBALL) return process.env.JOBHOOK_TEST_TARBALL;
  const stage = join(scratch, 'package');
  mkdirSync(stage, { recursive: true });
  run(
    process.execPath,
    [
      join(ROOT, 'node_modules', 'tsup', 'dist', 'cli-default.js'),
      '--silent',
      '--out-dir',
      join(stage, 'dist'),
    ],
    ROOT,
    { ...process.env, JOBHOOK_BUILD: 'js' },
  );
  run(
    process.execPath,
    [join(ROOT, 'scripts', 'write-rsa-wasm.mjs'), '--out-dir', join(stage, 'dist')],
    ROOT,
  );
  for (const f of ['package.json', 'README.md']) cpSync(join(ROOT, f), join(stage, f));
  const packed = JSON.parse(
    run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', scratch], stage),
  ) as Array<{ filename: string }>;
  return join(scratch, packed[0]!.filename);
}

/**
 * An app directory as a user has it: `jobhook` installed from the tarball, Express (for the
 * Node entries) linked from this repository, and the given files copied in.
 */
export function makeApp(dir: string, tarball: string, files: Record<string, string>): string {
  const jobhook = join(dir, 'node_modules', 'jobhook');
  mkdirSync(jobhook, { recursive: true });
  run('tar', ['-xzf', tarball, '-C', jobhook, '--strip-components=1'], dir);
  symlinkSync(join(ROOT, 'node_modules', 'express'), join(dir, 'node_modules', 'express'), 'dir');
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ private: true, type: 'module', dependencies: { jobhook: '*', express: '*' } }),
  );
  for (const [to, from] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, to)), { recursive: true });
    cpSync(from, join(dir, to));
  }
  return dir;
}

export interface Served {
  /** http://127.0.0.1:port (no trailing slash). */
  url: string;
  /** What the app printed after its URL on the "listening on" line. */
  info: string;
  /** Everything it printed so far. */
  output(): string;
  stop(): Promise<void>;
}

/** The environment of a runtime process: no update checks, no telemetry, its home and caches in the scratch directory. */
export function runtimeEnv(scratch: string, extra: Record<string, string>): NodeJS.ProcessEnv {
  const home = join(scratch, 'home');
  mkdirSync(home, { recursive: true });
  return {
    PATH: process.env.PATH,
    HOME: home,
    XDG_CACHE_HOME: join(home, '.cache'),
    BUN_INSTALL_CACHE_DIR: join(home, '.bun-cache'),
    NO_COLOR: '1',
    DO_NOT_TRACK: '1',
    DENO_NO_UPDATE_CHECK: '1',
    DENO_NO_PROMPT: '1',
    DENO_DIR: join(scratch, 'deno-dir'),
    ...extra,
  };
}

function stopper(child: ChildProcess): () => Promise<void> {
  return async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  };
}

/**
 * Starts a server process and waits until it serves: the line "listening on http://…"
 * (Bun, Deno, Node apps), or, with `port`, the first answer on that port (workerd prints none).
 */
export async function serve(
  bin: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; port?: number; timeoutMs?: number },
): Promise<Served> {
  const child = spawn(bin, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const stop = stopper(child);
  const timeoutMs = options.timeoutMs ?? 20_000;
  try {
    const ready = await new Promise<{ url: string; info: string }>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${bin} ${args.join(' ')} did not serve within ${timeoutMs} ms:\n${out}`)),
        timeoutMs,
      );
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`${bin} ${args.join(' ')} exited (${code ?? signal}) before serving:\n${out}`));
      });
      const done = (v: { url: string; info: string }) => {
        clearTimeout(timer);
        resolve(v);
      };
      if (options.port === undefined) {
        const look = () => {
          const m = /listening on (http:\/\/[^\s/]+)\/?(?: (.*))?$/m.exec(out);
          if (m !== null) done({ url: m[1]!, info: m[2] ?? '' });
        };
        child.stdout!.on('data', look);
      } else {
        const url = `http://127.0.0.1:${options.port}`;
        const poll = () => {
          if (child.exitCode !== null) return;
          const req = http.get(`${url}/`, (res) => {
            res.resume();
            done({ url, info: '' });
          });
          req.on('error', () => setTimeout(poll, 50));
        };
        poll();
      }
    });
    return { ...ready, output: () => out, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

export interface Answer {
  status: number;
  body: { status?: string; error?: { code?: string } } & Record<string, unknown>;
}

/** One POST on its own connection (fetch's pool would keep a connection the server asked to close). */
export function post(
  url: string,
  body: Uint8Array | string,
  headers: Record<string, string>,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const bytes =
      typeof body === 'string'
        ? Buffer.from(body)
        : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    const req = http.request(
      url,
      { method: 'POST', agent: false, headers: { ...headers, 'content-length': String(bytes.length) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          let parsed: Answer['body'];
          try {
            parsed = JSON.parse(text) as Answer['body'];
          } catch {
            parsed = { text };
          }
          resolve({ status: res.statusCode!, body: parsed });
        });
      },
    );
    req.on('error', reject);
    req.end(bytes);
  });
}

/**
 * A forged delivery that declares `total` bytes: `first` bytes are sent, then nothing
 * until the server answers. An answer proves it was given without reading the body.
 */
export function forgedLarge(
  url: string,
  total: number,
  first: number,
  waitMs = 10_000,
): Promise<Answer & { sent: number }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: 'POST',
      agent: false,
      headers: {
        'content-type': 'application/json',
        'content-length': String(total),
        'x-service-signature': 'ab'.repeat(256),
      },
    });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`no answer within ${waitMs} ms after ${first} of ${total} bytes were sent`));
    }, waitMs);
    req.on('response', (res) => {
      clearTimeout(timer);
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        req.destroy();
        resolve({
          status: res.statusCode!,
          body: JSON.parse(Buffer.concat(chunks).toString()) as Answer['body'],
          sent: first,
        });
      });
    });
    // The server may close the connection as it answers: errors after the answer are expected.
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.write(Buffer.alloc(first, 0x20));
  });
}
