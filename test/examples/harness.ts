/**
 * The example apps of examples/ as a user runs them: each in a directory of its own
 * with the packed tarball installed by npm (test/package/tarball.ts), the framework
 * next to it, started as a process. The directories live under .tmp/ in this
 * repository, so the frameworks (devDependencies) resolve from its node_modules as
 * from a parent folder; `jobhook` resolves only to the installed tarball.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { basename, join } from 'node:path';
import { inject } from 'vitest';
import { signDelivery } from '../../src/index.js';
import { payloadText } from '../helpers/deliveries.js';
import { privatePem, publicPem } from '../helpers/keys.js';
import { ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/servers.js';
import { packedTarball } from '../package/tarball.js';

export const TSX = join(ROOT, 'node_modules', 'tsx', 'dist', 'cli.mjs');
export const PUBLIC_KEY = publicPem(2048);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A directory with `examples/<example>` copied in and the packed jobhook installed.
 * `links` maps a package name to one of this repository's node_modules (Express 4 is
 * installed here as `express4`).
 */
export async function exampleApp(
  example: string,
  options: { name?: string; links?: Record<string, string> } = {},
): Promise<{ dir: string; remove: () => void }> {
  // scripts/test-node-majors.sh packs once for all the Node majors it runs these suites on.
  const tarball = process.env.JOBHOOK_TEST_TARBALL || (await packedTarball()).tarball;
  const dir = join(ROOT, '.tmp', `examples-${basename(inject('packDir'))}`, options.name ?? example);
  mkdirSync(dir, { recursive: true });
  cpSync(join(ROOT, 'examples', example), dir, { recursive: true });
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name: `example-${options.name ?? example}`, private: true, type: 'module' }),
  );
  installTarball(dir, tarball);
  for (const [name, target] of Object.entries(options.links ?? {}))
    symlinkSync(join(ROOT, 'node_modules', target), join(dir, 'node_modules', name), 'dir');
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * What a user does, `npm install` the package, without a registry (it has no dependencies)
 * and with an npm cache of this test run's own, empty of registry data: never the machine's.
 * npm also resolves a package's optional peers (pg, ioredis, bullmq, nats,
 * @opentelemetry/api) and their peers from whatever full packuments its cache holds; offline,
 * a cache that holds some and not others (bullmq's, whose optional peers include ioredis and
 * pg, without pg's: what an `npm install` or `npm view` anywhere on the machine leaves) fails
 * with ERESOLVE `pg@undefined`, on every install, whatever runs beside it. With none cached
 * npm leaves the optional peers out, as it should. test/examples/harness.test.ts.
 */
export function installTarball(dir: string, tarball: string): void {
  const cache = join(inject('packDir'), 'npm-cache');
  execFileSync(
    'npm',
    [
      'install',
      '--offline',
      `--cache=${cache}`,
      '--no-audit',
      '--no-fund',
      '--no-package-lock',
      '--loglevel=error',
      tarball,
    ],
    { cwd: dir, stdio: 'pipe' },
  );
}

/** An example server running as a process. */
export interface Running {
  url: string;
  output: () => string;
  stop: () => Promise<void>;
  /**
   * Sends SIGTERM and waits for the process to exit, `timeoutMs` at most (then SIGKILL):
   * how it exited (`alive: true` when it had not), and after how long (for the report).
   */
  terminate: (
    timeoutMs: number,
  ) => Promise<{ alive: boolean; code: number | null; signal: string | null; ms: number }>;
}

async function listening(
  port: number,
  child: ChildProcess,
  output: () => string,
  timeoutMs: number,
): Promise<void> {
  const start = Date.now();
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the example exited with ${child.exitCode}:\n${output()}`);
    const up = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (up) return;
    if (Date.now() - start > timeoutMs)
      throw new Error(`the example did not listen on ${port} within ${timeoutMs} ms:\n${output()}`);
    await sleep(100);
  }
}

/** Starts `command` (where `{PORT}` is replaced, as in `env`'s values) in `dir` with PORT and GATEWAY_PUBLIC_KEY set, and waits until it listens. */
export async function start(
  dir: string,
  command: string[],
  env: Record<string, string> = {},
  timeoutMs = 30_000,
): Promise<Running> {
  const port = await freePort();
  const [file, ...args] = command.map((c) => c.replace('{PORT}', String(port)));
  const child = spawn(file!, args, {
    cwd: dir,
    env: {
      ...process.env,
      PORT: String(port),
      GATEWAY_PUBLIC_KEY: PUBLIC_KEY,
      ...Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v.replace('{PORT}', String(port))])),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  child.stdout!.on('data', (c: Buffer) => (text += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (text += c.toString()));
  const output = () => text;
  try {
    await listening(port, child, output, timeoutMs);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return {
    url: `http://127.0.0.1:${port}`,
    output,
    terminate: async (timeoutMs) => {
      const sent = performance.now();
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const alive = (await Promise.race([
        exited.then(() => false),
        sleep(timeoutMs).then(() => true),
      ])) as boolean;
      const ms = Math.round(performance.now() - sent);
      if (alive) child.kill('SIGKILL');
      return { alive, code: child.exitCode, signal: alive ? null : child.signalCode, ms };
    },
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(5000)]);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}

/** A TypeScript example file run with tsx, as `npx tsx FILE` would. */
export function startTs(dir: string, file: string, env?: Record<string, string>): Promise<Running> {
  return start(dir, [process.execPath, TSX, file], env);
}

export interface Delivery {
  jobId: string;
  body: string;
  headers: Record<string, string>;
}

let n = 0;
/** A genuine delivery signed with the TEST-ONLY key; `padBytes` adds a string field of that size. */
export function delivery(label: string, padBytes = 0): Delivery {
  const jobId = `${label}-${process.pid}-${Date.now()}-${n++}`;
  const extra = padBytes > 0 ? `,"original_response":{"pages":"${'x'.repeat(padBytes)}"}` : '';
  const { body, headers } = signDelivery(payloadText(jobId, extra), privatePem(2048));
  return { jobId, body: body as string, headers };
}

export interface Answer {
  status: number;
  body: string;
  json: { status?: string; job_id?: string; error?: { code?: string } } | undefined;
}

export async function post(
  url: string,
  body: string | Uint8Array,
  headers: Record<string, string>,
): Promise<Answer> {
  const res = await fetch(url, {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : new Uint8Array(body),
  });
  const text = await res.text();
  let json: Answer['json'];
  try {
    json = JSON.parse(text) as Answer['json'];
  } catch {
    json = undefined;
  }
  return { status: res.status, body: text, json };
}

/** What every recipe must do: genuine → 200 processed, again → 200 duplicate, tampered → 401. */
export async function expectRecipe(
  url: string,
  label: string,
  expect: typeof import('vitest').expect,
): Promise<void> {
  const d = delivery(label);
  const first = await post(url, d.body, d.headers);
  expect({ status: first.status, json: first.json }).toEqual({
    status: 200,
    json: { status: 'processed', job_id: d.jobId },
  });
  const again = await post(url, d.body, d.headers);
  expect({ status: again.status, json: again.json }).toEqual({
    status: 200,
    json: { status: 'duplicate', job_id: d.jobId },
  });
  const tampered = await post(url, d.body.replace('Grüße', 'Gruesse'), d.headers);
  expect({ status: tampered.status, code: tampered.json?.error?.code }).toEqual({
    status: 401,
    code: 'SIGNATURE_INVALID',
  });
}

/** Genuine deliveries of 2 MB and 20 MB (past body-parser's 100 kB and Fastify's 1 MiB defaults) → 200 processed. */
export async function expectLargeDelivery(
  url: string,
  label: string,
  expect: typeof import('vitest').expect,
): Promise<void> {
  // Both written and signed before the first is sent: writing 20 MB took past the server's 5 s
  // keep-alive under load, and fetch then sent it on the idle connection the server was closing (EPIPE).
  const deliveries = [2, 20].map((mib) => ({ mib, d: delivery(`${label}-${mib}`, mib * 1024 * 1024) }));
  for (const { mib, d } of deliveries) {
    expect(d.body.length).toBeGreaterThan(mib * 1024 * 1024);
    const answer = await post(url, d.body, d.headers);
    expect({ size: mib, status: answer.status, json: answer.json }).toEqual({
      size: mib,
      status: 200,
      json: { status: 'processed', job_id: d.jobId },
    });
  }
}
