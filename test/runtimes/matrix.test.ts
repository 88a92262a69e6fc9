/**
 * The runtime matrix: the packed package on the real Bun, Deno and workerd binaries (npm
 * devDependencies), each app a child process. `jobhook/web` on each runtime's own server
 * (the example apps of examples/bun, examples/deno, examples/workers, run as they are);
 * the Node entries (`jobhook`, `jobhook/express`) on Bun's and Deno's node:http. Node's
 * row is measured the same way (the Node-entries app as a process; `jobhook/web`
 * in-process: Node has no Fetch server of its own). The README's table is held equal to
 * what this file measures.
 */
import { execSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signPayload } from '../../src/testing.js';
import { jobId, payloadText } from '../helpers/deliveries.js';
import { privatePem, publicPem } from '../helpers/keys.js';
import { allDocsText } from '../helpers/docs.js';
import { ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/servers.js';
import {
  findRuntime,
  forgedLarge,
  makeApp,
  packPackage,
  post,
  runtimeEnv,
  serve,
  type Answer,
  type Runtime,
  type RuntimeName,
  type Served,
} from './harness.js';

const KEY = publicPem(2048);
const FORGED_TOTAL = 5 * 1024 * 1024;
const FORGED_SENT = 64 * 1024;
/**
 * Whether jobhook/web decodes brotli there: Bun and Deno with their DecompressionStream
 * ('brotli'); workerd's knows only gzip and deflate and it has no node:zlib to fall back
 * on; Node with node:zlib from process.getBuiltinModule (≥ 20.16) or its own stream.
 */
const BROTLI: Record<RuntimeName | 'Node', boolean> = {
  Bun: true,
  Deno: true,
  workerd: false,
  Node: nodeDecodesBrotli(),
};

function nodeDecodesBrotli(): boolean {
  if (typeof (process as { getBuiltinModule?: unknown }).getBuiltinModule === 'function') return true;
  return ['brotli', 'br'].some((format) => {
    try {
      new DecompressionStream(format as CompressionFormat);
      return true;
    } catch {
      return false;
    }
  });
}
const NODE_MAJOR = process.versions.node.split('.')[0]!;

const runtimes = Object.fromEntries(
  (['Bun', 'Deno', 'workerd'] as const).map((n) => [n, findRuntime(n)]),
) as Record<RuntimeName, Runtime>;
const scratch = mkdtempSync(join(tmpdir(), 'jobhook-runtimes-'));
const app = join(scratch, 'app');
const started: Served[] = [];
const servers: Partial<Record<string, Served>> = {};
const startErrors: Partial<Record<string, Error>> = {};
/** What was measured, for the README's table: runtime → its cells. */
interface Row {
  web?: string;
  br?: string;
  root?: string;
  express?: string;
  rsa?: string;
}
const measured: Partial<Record<RuntimeName | 'Node', Row>> = {};

const sign = (id: string, extra = '') => signPayload(payloadText(id, extra), privatePem(2048));

async function start(key: string, bin: string, args: string[], port?: number): Promise<void> {
  try {
    const s = await serve(bin, args, {
      cwd: app,
      env: runtimeEnv(scratch, { GATEWAY_PUBLIC_KEY: KEY, HOST: '127.0.0.1', PORT: String(port ?? 0) }),
      port,
    });
    started.push(s);
    servers[key] = s;
  } catch (err) {
    startErrors[key] = err as Error;
  }
}

function server(key: string): Served {
  const s = servers[key];
  if (s === undefined) throw startErrors[key] ?? new Error(`${key} was not started`);
  return s;
}

/** Runs checks against an app; a failure carries what the app printed. */
async function against<T>(key: string, checks: (s: Served) => Promise<T>): Promise<T> {
  const s = server(key);
  try {
    return await checks(s);
  } catch (err) {
    if (err instanceof Error) err.message += `\n--- what ${key} printed:\n${s.output()}`;
    throw err;
  }
}

beforeAll(async () => {
  const t0 = performance.now();
  const tarball = packPackage(scratch);
  const packed = performance.now();
  makeApp(app, tarball, {
    'bun/server.ts': join(ROOT, 'examples', 'bun', 'server.ts'),
    'deno/server.ts': join(ROOT, 'examples', 'deno', 'server.ts'),
    'workers/worker.js': join(ROOT, 'examples', 'workers', 'worker.js'),
    'workers/workerd.capnp': join(ROOT, 'examples', 'workers', 'workerd.capnp'),
    'node-entries.mjs': join(ROOT, 'test', 'runtimes', 'apps', 'node-entries.mjs'),
  });
  const { Bun, Deno, workerd } = runtimes;
  const starts: Promise<void>[] = [start('Node node', process.execPath, ['node-entries.mjs'])];
  if (Bun.ok)
    starts.push(
      start('Bun web', Bun.bin, ['bun/server.ts']),
      start('Bun node', Bun.bin, ['node-entries.mjs']),
    );
  if (Deno.ok) {
    starts.push(
      start('Deno web', Deno.bin, ['run', '--unstable-kv', '--allow-net', '--allow-env', 'deno/server.ts']),
      start('Deno node', Deno.bin, ['run', '--allow-all', 'node-entries.mjs']),
    );
  }
  if (workerd.ok) {
    // examples/workers/run.sh as written, in the Worker's directory; its npm installs are what this
    // app has (the packed jobhook; esbuild and workerd from this repository, where npm puts their bins).
    const dir = join(app, 'workers');
    const bin = join(app, 'node_modules', '.bin');
    mkdirSync(bin, { recursive: true });
    symlinkSync(join(ROOT, 'node_modules', 'esbuild', 'bin', 'esbuild'), join(bin, 'esbuild'));
    symlinkSync(workerd.bin, join(bin, 'workerd'));
    symlinkSync(join(app, 'node_modules'), join(dir, 'node_modules'), 'dir');
    writeFileSync(join(dir, 'gateway-public.pem'), KEY);
    const commands = readFileSync(join(ROOT, 'examples', 'workers', 'run.sh'), 'utf8')
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('#') && !line.startsWith('npm install'));
    const serveCommand = commands.pop()!;
    for (const command of commands) execSync(command, { cwd: dir, stdio: 'pipe' });
    // The one change: a free port instead of the config's 8787.
    const port = await freePort();
    starts.push(
      start(
        'workerd web',
        'sh',
        ['-c', `cd workers && ${serveCommand} --socket-addr http=127.0.0.1:${port}`],
        port,
      ),
    );
  }
  await Promise.all(starts);
  console.log(
    `[jobhook] runtime matrix: package built and packed in ${Math.round(packed - t0)} ms, ${started.length} apps started in ${Math.round(performance.now() - packed)} ms`,
  );
}, 90_000);

afterAll(async () => {
  await Promise.all(started.map((s) => s.stop()));
  rmSync(scratch, { recursive: true, force: true });
});

interface Target {
  post(body: Uint8Array | string, headers: Record<string, string>): Promise<Answer>;
  forged(): Promise<Answer & { sent: number }>;
}

const WEB_SERVER: Record<RuntimeName, string> = {
  Bun: '`Bun.serve`',
  Deno: '`Deno.serve`',
  workerd: 'module Worker, key from `env`',
};

const httpTarget = (url: string): Target => ({
  post: (b, h) => post(url, b, h),
  forged: () => forgedLarge(url, FORGED_TOTAL, FORGED_SENT),
});

/** The `jobhook/web` checks; returns the README cells. */
async function webChecks(label: string, target: Target, brotli: boolean): Promise<Pick<Row, 'br'>> {
  const id = jobId(label.replace(/\W/g, ''));
  const d = sign(id);
  expect(await target.post(d.body, d.headers)).toEqual({
    status: 200,
    body: { status: 'processed', job_id: id },
  });
  expect(await target.post(d.body, d.headers)).toEqual({
    status: 200,
    body: { status: 'duplicate', job_id: id },
  });
  const tampered = await target.post(d.body.replace('Grüße', 'Gruesse'), d.headers);
  expect({ status: tampered.status, code: tampered.body.error?.code }).toEqual({
    status: 401,
    code: 'SIGNATURE_INVALID',
  });

  // Over HTTP an answer comes back at all only because the server gave it after the first
  // 64 kB (forgedLarge sends nothing more until then); in-process, `sent` counts what was pulled.
  const forged = await target.forged();
  expect({ status: forged.status, code: forged.body.error?.code }).toEqual({
    status: 401,
    code: 'SIGNATURE_INVALID',
  });
  expect(forged.sent).toBeLessThanOrEqual(FORGED_SENT);

  const codings: Array<[string, (b: Buffer) => Buffer]> = [
    ['gzip', gzipSync],
    ['deflate', deflateSync],
    ['br', brotliCompressSync],
  ];
  for (const [coding, compress] of codings) {
    const c = sign(`${id}-${coding}`);
    const answer = await target.post(new Uint8Array(compress(Buffer.from(c.body))), {
      ...c.headers,
      'content-encoding': coding,
    });
    if (coding !== 'br' || brotli)
      expect(answer, coding).toEqual({
        status: 200,
        body: { status: 'processed', job_id: `${id}-${coding}` },
      });
    else
      expect({ status: answer.status, code: answer.body.error?.code }, coding).toEqual({
        status: 415,
        code: 'ENCODING_UNSUPPORTED',
      });
  }
  return { br: brotli ? '200' : '415 (no brotli decoder: no `DecompressionStream` for it, no node:zlib)' };
}

/** The Node entries' checks on the app of apps/node-entries.mjs; returns the README cells. */
async function nodeChecks(label: string, s: Served): Promise<Pick<Row, 'root' | 'express' | 'rsa'>> {
  const { refused, rawRsa } = JSON.parse(s.info) as { refused: Record<string, string>; rawRsa: string };
  const cells: Record<string, string> = {};
  for (const [path, name] of [
    ['/verifier', 'createVerifier'],
    ['/receiver', 'createReceiver'],
    ['/express', 'jobhook/express'],
  ] as const) {
    if (refused[path] !== undefined) {
      // The one other answer allowed: refused at construction, naming the entry that works.
      expect(refused[path], name).toMatch(/^TypeError: .*jobhook\/web/);
      cells[path] = 'refused at construction (names `jobhook/web`)';
      continue;
    }
    const url = `${s.url}${path}`;
    const id = jobId(`${label}${path}`.replace(/\W/g, ''));
    const d = sign(id);
    // About 1.5 MB: the receivers verify it on a worker thread (over workerThresholdBytes).
    const large = sign(`${id}-large`, `,"padding":"${'x'.repeat(1_500_000)}"`);
    const tampered = await post(url, d.body.replace('Grüße', 'Gruesse'), d.headers);
    if (path === '/verifier') {
      expect(await post(url, d.body, d.headers), name).toEqual({
        status: 200,
        body: { status: 'verified', job_id: id },
      });
      expect(await post(url, large.body, large.headers), name).toEqual({
        status: 200,
        body: { status: 'verified', job_id: `${id}-large` },
      });
      expect({ status: tampered.status, code: tampered.body.error?.code }, name).toEqual({
        status: 422,
        code: 'SIGNATURE_INVALID',
      });
    } else {
      expect(await post(url, d.body, d.headers), name).toEqual({
        status: 200,
        body: { status: 'processed', job_id: id },
      });
      expect(await post(url, d.body, d.headers), name).toEqual({
        status: 200,
        body: { status: 'duplicate', job_id: id },
      });
      expect(await post(url, large.body, large.headers), name).toEqual({
        status: 200,
        body: { status: 'processed', job_id: `${id}-large` },
      });
      expect({ status: tampered.status, code: tampered.body.error?.code }, name).toEqual({
        status: 401,
        code: 'SIGNATURE_INVALID',
      });
    }
    cells[path] = '✓';
  }
  const root =
    cells['/verifier'] === cells['/receiver']
      ? cells['/verifier']!
      : `createVerifier ${cells['/verifier']}, createReceiver ${cells['/receiver']}`;
  const rsa =
    rawRsa === 'works'
      ? 'node:crypto `publicDecrypt`'
      : `WebAssembly fallback (node:crypto \`publicDecrypt\` without padding: "${rawRsa}")`;
  return { root, express: cells['/express']!, rsa };
}

for (const name of ['Bun', 'Deno', 'workerd'] as const) {
  const rt = runtimes[name];
  describe.skipIf(!rt.ok)(`${name}${rt.ok ? ` ${rt.version}` : ` (SKIPPED: ${rt.reason})`}`, () => {
    it(`jobhook/web on ${WEB_SERVER[name]} (examples/${name === 'workerd' ? 'workers' : name.toLowerCase()}): genuine 200, duplicate, tampered 401, forged 5 MB 401 unread, gzip and deflate 200, br ${BROTLI[name] ? '200' : '415'}`, async () => {
      const cells = await against(`${name} web`, (s) =>
        webChecks(`${name}web`, httpTarget(`${s.url}/webhooks/gateway`), BROTLI[name]),
      );
      measured[name] = { ...measured[name], web: `✓ (${WEB_SERVER[name]})`, ...cells };
    });
    if (name !== 'workerd') {
      it(`jobhook and jobhook/express on ${name}'s node:http: they verify genuine deliveries, or refuse at construction naming jobhook/web`, async () => {
        measured[name] = {
          ...measured[name],
          ...(await against(`${name} node`, (s) => nodeChecks(`${name}node`, s))),
        };
      });
    }
  });
}

describe(`Node ${process.version}`, () => {
  it('jobhook/web from the packed package, in-process (Request objects): the same answers; br as the runtime can', async () => {
    const web = (await import(
      pathToFileURL(join(app, 'node_modules', 'jobhook', 'dist', 'web.js')).href
    )) as typeof import('../../src/web.js');
    const handler = web.createReceiver({ publicKey: KEY, onEvent: () => undefined, log: {} });
    const answer = async (res: Response): Promise<Answer> => ({
      status: res.status,
      body: (await res.json()) as Answer['body'],
    });
    const target: Target = {
      post: async (body, headers) =>
        answer(
          await handler(
            new Request('http://127.0.0.1/webhooks/gateway', {
              method: 'POST',
              headers,
              body: body as BodyInit,
            }),
          ),
        ),
      async forged() {
        let sent = 0;
        const stream = new ReadableStream<Uint8Array>({
          pull(controller) {
            if (sent >= FORGED_TOTAL) return controller.close();
            sent += FORGED_SENT;
            controller.enqueue(new Uint8Array(FORGED_SENT).fill(0x20));
          },
        });
        const headers = {
          'content-type': 'application/json',
          'content-length': String(FORGED_TOTAL),
          'x-service-signature': 'ab'.repeat(256),
        };
        const res = await handler(
          new Request('http://127.0.0.1/webhooks/gateway', {
            method: 'POST',
            headers,
            body: stream,
            duplex: 'half',
          } as RequestInit),
        );
        // A stream's first chunk may be pulled as the Request is made; no more is read.
        return { ...(await answer(res)), sent };
      },
    };
    measured.Node = {
      ...measured.Node,
      web: '✓ (in-process `Request`s)',
      ...(await webChecks('Nodeweb', target, BROTLI.Node)),
    };
  });

  it("jobhook and jobhook/express on Node's node:http (the same app as on Bun and Deno)", async () => {
    measured.Node = { ...measured.Node, ...(await against('Node node', (s) => nodeChecks('Nodenode', s))) };
  });
});

/** The README table of runtime × entry × result, as measured above. */
function table(): string {
  const version = (name: RuntimeName) => {
    const r = runtimes[name];
    return r.ok ? r.version : '?';
  };
  const rows: Array<[string, Row | undefined]> = [
    [`Node ${NODE_MAJOR}`, measured.Node],
    [`Bun ${version('Bun')}`, measured.Bun],
    [`Deno ${version('Deno')}`, measured.Deno],
    [
      `workerd ${version('workerd')} (Cloudflare Workers)`,
      { root: 'not run (no `node:http`)', express: 'not run', rsa: '—', ...measured.workerd },
    ],
  ];
  const lines = [
    '| runtime | `jobhook/web` | `Content-Encoding: br` | `jobhook` createVerifier, createReceiver | `jobhook/express` | RSA operation of the Node entries |',
    '| --- | --- | --- | --- | --- | --- |',
  ];
  for (const [label, r] of rows)
    lines.push(
      `| ${label} | ${r?.web ?? '?'} | ${r?.br ?? '?'} | ${r?.root ?? '?'} | ${r?.express ?? '?'} | ${r?.rsa ?? '?'} |`,
    );
  return lines.join('\n');
}

describe('README', () => {
  // The table was measured on Node 20 (the oldest Node jobhook supports, and CI's).
  const all = Object.values(runtimes).every((r) => r.ok) && NODE_MAJOR === '20';
  if (!all)
    console.warn(
      `\n[jobhook] README runtime table NOT checked: it is measured with every runtime and Node 20 (this is Node ${process.version})\n`,
    );
  it.skipIf(!all)('its runtime table is what this file measured', () => {
    // The table is on docs/receiving.md ("Runtimes, as tested"); whichever page holds the markers.
    const m = /<!-- runtime-matrix:start[^>]*-->\n([\s\S]*?)\n<!-- runtime-matrix:end -->/.exec(
      allDocsText(),
    );
    const expected = table();
    expect(m?.[1], `docs/receiving.md should hold, between the runtime-matrix markers:\n${expected}`).toBe(
      expected,
    );
  });
});
