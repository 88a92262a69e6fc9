/**
 * The stores that run only on their own runtime, driven from the Node test process: the
 * Durable Object store inside workerd (its object's SQLite storage on disk) and the Deno KV
 * store inside Deno (a KV file). test/runtimes/apps/store-*.ts are bundled with esbuild from
 * the sources and served by the runtime's binary (the npm packages test/runtimes/harness.ts
 * finds); `RemoteStore` is an IdempotencyStore whose every call runs in the runtime, by
 * HTTP. The runtime can be killed (SIGKILL) and started again on the same port and storage.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { StoreUnavailableError } from '../../src/errors.js';
import type { IdempotencyStore } from '../../src/index.js';
import { ROOT } from '../helpers/paths.js';
import { freePort, type Throwaway } from '../helpers/servers.js';
import { findRuntime, runtimeEnv, type Runtime } from '../runtimes/harness.js';

export type EdgeRuntime = 'workerd' | 'Deno';

export interface RuntimeOptions {
  /** workerd: the namespace without SQLite storage (`enableSql = false`, a `new_classes` migration's). */
  withoutSql?: boolean;
  /** The fault cases' receiver: its lease, grace and work per job, and where it tells effects and reports. */
  receiver?: {
    leaseMs: number;
    takeoverGraceMs: number;
    workMs: number;
    publicKey: string;
    collector: string;
  };
}

/** The runtime serving a store app, which can be killed and started again with the same storage. */
export interface RuntimeServer extends Throwaway {
  name: EdgeRuntime;
  /** SIGKILL, no warning (a crash): returns once it has exited. */
  kill(): Promise<void>;
  output(): string;
}

const runtimes = new Map<EdgeRuntime, Runtime>();
/** The runtime's binary, or why its tests are skipped (once per process). */
export function edgeRuntime(name: EdgeRuntime): Runtime {
  let r = runtimes.get(name);
  if (r === undefined) runtimes.set(name, (r = findRuntime(name)));
  return r;
}

async function bundle(name: EdgeRuntime, dir: string): Promise<string> {
  const file = join(dir, name === 'workerd' ? 'worker.js' : 'store-deno.js');
  await build({
    entryPoints: [
      join(ROOT, 'test', 'runtimes', 'apps', name === 'workerd' ? 'store-worker.ts' : 'store-deno.ts'),
    ],
    bundle: true,
    platform: 'neutral',
    format: 'esm',
    target: 'es2022',
    conditions: ['workerd', 'worker', 'browser'],
    outfile: file,
    logLevel: 'warning',
  });
  return file;
}

function workerdConfig(port: number, disk: string, o: RuntimeOptions): string {
  const r = o.receiver;
  const collector =
    r === undefined
      ? ''
      : `, (name = "collector", external = (address = "${new URL(r.collector).host}", http = ()))`;
  const bindings = [
    '(name = "JOBHOOK", durableObjectNamespace = "JobhookIdempotencyObject")',
    ...(r === undefined
      ? []
      : [
          `(name = "PUBLIC_KEY", text = ${JSON.stringify(r.publicKey)})`,
          `(name = "RECEIVER", text = ${JSON.stringify(JSON.stringify({ leaseMs: r.leaseMs, takeoverGraceMs: r.takeoverGraceMs, workMs: r.workMs }))})`,
          '(name = "COLLECTOR", service = "collector")',
        ]),
  ];
  return `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "main", worker = .w), (name = "do-disk", disk = (path = ${JSON.stringify(disk)}, writable = true))${collector}],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "main")],
);
const w :Workerd.Worker = (
  modules = [(name = "worker.js", esModule = embed "worker.js")],
  compatibilityDate = "2025-09-01",
  durableObjectNamespaces = [(className = "JobhookIdempotencyObject", uniqueKey = "jobhook-test", enableSql = ${o.withoutSql === true ? 'false' : 'true'})],
  durableObjectStorage = (localDisk = "do-disk"),
  bindings = [${bindings.join(', ')}],
);
`;
}

/** Starts the store app on its runtime, on a free port, with its storage in a new temporary directory. */
export async function startRuntime(name: EdgeRuntime, o: RuntimeOptions = {}): Promise<RuntimeServer> {
  const runtime = edgeRuntime(name);
  if (!runtime.ok) throw new Error(runtime.reason);
  const dir = mkdtempSync(join(tmpdir(), `jobhook-${name.toLowerCase()}-store-`));
  const port = await freePort();
  await bundle(name, dir);
  let args: string[];
  let env: NodeJS.ProcessEnv;
  if (name === 'workerd') {
    const disk = join(dir, 'do');
    mkdirSync(disk);
    writeFileSync(join(dir, 'config.capnp'), workerdConfig(port, disk, o));
    args = ['serve', join(dir, 'config.capnp')];
    env = runtimeEnv(dir, {});
  } else {
    args = [
      'run',
      '--unstable-kv',
      '--allow-net',
      '--allow-env',
      '--allow-read',
      '--allow-write',
      join(dir, 'store-deno.js'),
    ];
    const r = o.receiver;
    env = runtimeEnv(dir, {
      KV_PATH: join(dir, 'jobs.kv'),
      PORT: String(port),
      ...(r === undefined
        ? {}
        : {
            PUBLIC_KEY: r.publicKey,
            COLLECTOR_URL: r.collector,
            RECEIVER: JSON.stringify({
              leaseMs: r.leaseMs,
              takeoverGraceMs: r.takeoverGraceMs,
              workMs: r.workMs,
            }),
          }),
    });
  }
  const url = `http://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  let out = '';
  const start = async () => {
    const c = spawn(runtime.bin, args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    child = c;
    c.stdout!.on('data', (b: Buffer) => (out = (out + b.toString()).slice(-20_000)));
    c.stderr!.on('data', (b: Buffer) => (out = (out + b.toString()).slice(-20_000)));
    await untilServing(url, c, () => out);
  };
  const kill = async () => {
    const c = child;
    child = undefined;
    if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await exited;
  };
  await start();
  return {
    name,
    url,
    start,
    stop: kill,
    kill,
    output: () => out,
    destroy: async () => {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function untilServing(url: string, child: ChildProcess, out: () => string): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`the runtime exited (${child.exitCode ?? child.signalCode}) before serving:\n${out()}`);
    if (Date.now() - t0 > 30_000) throw new Error(`the runtime did not serve within 30 s:\n${out()}`);
    const up = await new Promise<boolean>((resolve) => {
      const req = http.get(`${url}/`, { agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      });
      req.on('error', () => resolve(false));
    });
    if (up) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** A POST of JSON to the runtime; a connection refused or reset is the store being unavailable. */
export function postJson(url: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const bytes = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': bytes.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          try {
            resolve({ status: res.statusCode!, json: JSON.parse(Buffer.concat(chunks).toString()) });
          } catch (err) {
            reject(err);
          }
        });
        res.on('error', reject);
      },
    );
    req.on('error', (err) => reject(new StoreUnavailableError(`the runtime did not answer: ${err.message}`)));
    req.end(bytes);
  });
}

/**
 * The store inside the runtime, called from Node: each method is one POST /call, whose
 * store is made for that call (`scope`: the object name or key prefix; `now`: the test's
 * clock, read when the call is made). Its errors come back as TypeError or with their code.
 */
export class RemoteStore implements IdempotencyStore {
  constructor(
    private readonly server: { url: string },
    private readonly scope: string,
    private readonly options: { now?: () => number; shards?: number } = {},
  ) {}

  private async call(method: string, args: unknown[]): Promise<never> {
    const body = {
      scope: this.scope,
      method,
      args,
      ...(this.options.now === undefined ? {} : { now: this.options.now() }),
      ...(this.options.shards === undefined ? {} : { shards: this.options.shards }),
    };
    const { status, json } = await postJson(`${this.server.url}/call`, body);
    const answer = json as { value?: unknown; error?: { name?: string; message?: string; code?: string } };
    if (status !== 200) throw new StoreUnavailableError(`the runtime answered ${status}`);
    if (answer.error === undefined) return answer.value as never;
    const e = answer.error;
    if (e.name === 'TypeError') throw new TypeError(e.message);
    throw Object.assign(
      e.code === 'STORE_UNAVAILABLE' ? new StoreUnavailableError(e.message ?? '') : new Error(e.message),
      { name: e.name ?? 'Error' },
    );
  }

  claim: IdempotencyStore['claim'] = (...a) => this.call('claim', a);
  renew: NonNullable<IdempotencyStore['renew']> = (...a) => this.call('renew', a);
  complete: IdempotencyStore['complete'] = (...a) => this.call('complete', a);
  release: IdempotencyStore['release'] = (...a) => this.call('release', a);
  ping: NonNullable<IdempotencyStore['ping']> = () => this.call('ping', []);
  trackPending: NonNullable<IdempotencyStore['trackPending']> = (...a) => this.call('trackPending', a);
  listPending: NonNullable<IdempotencyStore['listPending']> = (...a) => this.call('listPending', a);
  forgetPending: NonNullable<IdempotencyStore['forgetPending']> = (...a) => this.call('forgetPending', a);
  deferPending: NonNullable<IdempotencyStore['deferPending']> = (...a) => this.call('deferPending', a);
  async close(): Promise<void> {}
}
