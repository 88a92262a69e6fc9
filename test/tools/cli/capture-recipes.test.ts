/**
 * The README's "Capture a delivery that failed", run as written: each block marked
 * `<!-- capture/NAME -->` is taken from the README (the listener one-liner on a free port
 * instead of 8080, the mitmproxy line with its ports and, before mitmproxy 10, its script),
 * real deliveries go to it, and its `jobhook` lines run on what it captured.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import express, { type RequestHandler } from 'express';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createReceiver, keepRawBody } from '../../../src/express.js';
import { allDocsText } from '../../helpers/docs.js';
import { fixture, ROOT } from '../../helpers/paths.js';
import { listen } from '../helpers.js';
import { cli, type CliResult } from './run.js';

// "Capture a delivery that failed" is on docs/cli.md: read every page, wherever it is.
const readme = allDocsText();
const block = (name: string): string => {
  const m = new RegExp(
    `<!-- capture/${name.replace('.', '\\.')} -->\\n\`\`\`[a-z]*\\n([\\s\\S]*?)\`\`\``,
  ).exec(readme);
  if (m === null) throw new Error(`no block <!-- capture/${name} --> in README.md or docs/`);
  return m[1]!;
};
const commands = (text: string, first: string) => text.split('\n').filter((l) => l.startsWith(first));

const PRIVATE = fixture('keys', 'test-2048-private.pem');
let dir: string;
const children: ChildProcess[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'jobhook-capture-'));
  copyFileSync(fixture('keys', 'test-2048-public.pem'), join(dir, 'gateway.pem'));
});
afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGINT');
    await exited;
  }
});

/** A `jobhook …` line of the README run in-process, its file arguments in `dir`, its comment left out. */
function jobhook(line: string): Promise<CliResult> {
  const argv = line
    .replace(/\s+#.*$/, '')
    .trim()
    .split(/\s+/)
    .slice(1);
  return cli(argv.map((a) => (/\.(pem|http|jsonl|har)$/.test(a) ? join(dir, a) : a)));
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

/** Starts a shell command of the README in `dir`; resolves once `ready()` says it is up. */
async function started(command: string, ready: () => Promise<boolean>): Promise<ChildProcess> {
  const child = spawn('sh', ['-c', `exec ${command}`], { cwd: dir, stdio: 'ignore' });
  children.push(child);
  for (let k = 0; k < 200; k++) {
    if (await ready()) return child;
    if (child.exitCode !== null) throw new Error(`${command} exited with ${child.exitCode}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${command} did not start`);
}

/** True once something listens on `port` (a connection opened and closed without a byte). */
const listening = (port: number) => async () =>
  spawnSync(process.execPath, [
    '-e',
    `require('net').connect(${port},'127.0.0.1').on('connect',()=>process.exit(0)).on('error',()=>process.exit(1))`,
  ]).status === 0;

/** Waits until `file` exists and has stopped growing. */
async function settled(file: string): Promise<void> {
  let size = -1;
  for (let k = 0; k < 200; k++) {
    const now = existsSync(file) ? statSync(file).size : -1;
    if (now > 0 && now === size) return;
    size = now;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${file} was not written`);
}

describe('README: a raw HTTP dump', () => {
  it('the listener keeps each request byte for byte and answers 503; verify and explain read the dumps, gzip included', async () => {
    const text = block('raw-dump.sh');
    const [listener] = commands(text, 'node -e');
    expect(listener).toContain('listen(8080,"127.0.0.1")');
    const port = await freePort();
    const to = `http://127.0.0.1:${port}/webhooks/gateway`;
    // The first delivery is the probe (a probing connection would be a dump of its own): sent until the listener answers.
    let plain: CliResult | undefined;
    await started(listener!.replace('listen(8080,', `listen(${port},`), async () => {
      plain = await cli(['send', '--to', to, '--key', PRIVATE, '--job-id', 'dump-plain', '--retries', '0']);
      return !plain.stdout.includes('ECONNREFUSED');
    });
    expect(plain!.stdout).toMatch(/^attempt 1: HTTP 503 after \d+ ms → gave up\n$/);
    await cli(['send', '--to', to, '--key', PRIVATE, '--job-id', 'dump-gzip', '--retries', '0', '--gzip']);
    await settled(join(dir, 'delivery-2.http'));
    expect(
      readFileSync(join(dir, 'delivery-2.http')).includes(Buffer.from('Content-Encoding: gzip\r\n')),
    ).toBe(true);

    const [verify, explain] = commands(text, 'jobhook ');
    expect(await jobhook(verify!)).toMatchObject({
      code: 0,
      stdout: `VALID dump-plain orjson ${join(dir, 'gateway.pem')}\n`,
    });
    expect((await jobhook(explain!)).stdout).toMatch(/^VALID\n/);
    expect((await jobhook(verify!.replace('delivery-1', 'delivery-2'))).stdout).toMatch(
      /^VALID dump-gzip orjson /,
    );
  });
});

const netcat = spawnSync('nc', ['-h'], { encoding: 'utf8' });
const openbsdNetcat = /OpenBSD netcat/.test(netcat.stdout + netcat.stderr);

describe('README: a raw HTTP dump with netcat', () => {
  it.skipIf(!openbsdNetcat)(
    'nc -l writes the one request it gets, never answers (the attempt times out); verify reads the dump',
    async () => {
      const line = /`(nc -l 8080 > delivery\.http)`/.exec(readme)?.[1];
      expect(line).toBe('nc -l 8080 > delivery.http');
      const port = await freePort();
      const to = `http://127.0.0.1:${port}/webhooks/gateway`;
      let sent: CliResult | undefined;
      const child = await started(line!.replace('8080', String(port)), async () => {
        sent = await cli([
          'send',
          '--to',
          to,
          '--key',
          PRIVATE,
          '--job-id',
          'dump-netcat',
          '--retries',
          '0',
          '--timeout-ms',
          '1000',
        ]);
        return !sent.stdout.includes('ECONNREFUSED');
      });
      expect(sent!.stdout).toBe('attempt 1: timed out after 1000 ms → gave up\n');
      await new Promise((r) => (child.exitCode === null ? child.once('exit', r) : r(undefined)));
      expect(
        await cli(['verify', '--key', join(dir, 'gateway.pem'), join(dir, 'delivery.http')]),
      ).toMatchObject({ code: 0, stdout: `VALID dump-netcat orjson ${join(dir, 'gateway.pem')}\n` });
    },
  );
});

describe('README: capture objects of the deliveries an Express app refused', () => {
  it('keepRefused writes the refused ones (a wrong key, gzip too) and not the processed one; verify --json and explain --index read them', async () => {
    const source = block('keep-refused.mjs');
    const module = join(dir, 'keep-refused.mjs');
    writeFileSync(module, source);
    const { keepRefused } = (await import(pathToFileURL(module).href)) as {
      keepRefused: (file: string) => RequestHandler;
    };
    // The two lines the block shows as comments, as written there.
    expect(source).toContain(
      `// app.use(express.json({ limit: '25mb', verify: keepRawBody }));\n// app.post('/webhooks/gateway', keepRefused('refused.jsonl'), receiver);`,
    );
    const runs: string[] = [];
    const receiver = createReceiver({
      publicKey: readFileSync(join(dir, 'gateway.pem'), 'utf8'),
      log: {},
      onEvent: (e) => void runs.push(e.job_id),
    });
    const app = express();
    app.use(express.json({ limit: '25mb', verify: keepRawBody }));
    app.post('/webhooks/gateway', keepRefused(join(dir, 'refused.jsonl')), receiver);
    const server = await listen(app);
    try {
      const to = `${server.url}/webhooks/gateway`;
      const other = join(dir, 'other');
      await cli(['keygen', '--out', other]);
      const wrongKey = join(other, 'test-only-private.pem');
      expect((await cli(['send', '--to', to, '--key', PRIVATE, '--job-id', 'kept-ok'])).code).toBe(0);
      expect(
        (await cli(['send', '--to', to, '--key', wrongKey, '--job-id', 'kept-wrong-key'])).stdout,
      ).toMatch(/HTTP 401 SIGNATURE_INVALID/);
      expect(
        (await cli(['send', '--to', to, '--key', wrongKey, '--job-id', 'kept-gzip', '--gzip'])).stdout,
      ).toMatch(/HTTP 401 SIGNATURE_INVALID/);
    } finally {
      await server.close();
      await receiver.close();
    }
    expect(runs).toEqual(['kept-ok']);
    const lines = readFileSync(join(dir, 'refused.jsonl'), 'utf8').trim().split('\n');
    expect(
      lines
        .map((l) => JSON.parse(l) as { headers: Record<string, string> })
        .map((c) => c.headers['content-encoding']),
    ).toEqual([undefined, 'gzip']);

    const [verify, explain] = commands(block('refused.sh'), 'jobhook ');
    const v = await jobhook(verify!);
    expect(v.code).toBe(1);
    expect(
      v.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { index: number; code: string }),
    ).toEqual([
      expect.objectContaining({ index: 0, code: 'SIGNATURE_INVALID' }),
      expect.objectContaining({ index: 1, code: 'SIGNATURE_INVALID' }),
    ]);
    const e = await jobhook(explain!);
    expect(e.code).toBe(1);
    expect(e.stdout).toMatch(/^INVALID\n/);
    expect(e.stdout).toMatch(/does not open the signature/);
  });
});

const mitmdump = spawnSync('mitmdump', ['--version'], { encoding: 'utf8' });
const mitmproxyMajor =
  mitmdump.status === 0 ? Number(/Mitmproxy: (\d+)/.exec(mitmdump.stdout)?.[1]) : undefined;
/** Before mitmproxy 10, hardump comes from this script (where Debian's package puts it). */
const HAR_DUMP_SCRIPT = '/usr/share/doc/mitmproxy/examples/contrib/har_dump.py';
const canRunMitmdump = mitmproxyMajor !== undefined && (mitmproxyMajor >= 10 || existsSync(HAR_DUMP_SCRIPT));

describe('README: a HAR file from mitmproxy', () => {
  it('the verify and explain lines on the HAR file mitmproxy 8.1.1 wrote (fixtures/har)', async () => {
    copyFileSync(fixture('har', 'mitmproxy-8.1.1.har'), join(dir, 'deliveries.har'));
    const [verify, explain] = commands(block('mitmproxy.sh'), 'jobhook ');
    const v = await jobhook(verify!);
    expect(v.code).toBe(0);
    expect(
      v.stdout
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { index: number }).index),
    ).toEqual([1, 2, 4]);
    expect((await jobhook(explain!)).stdout).toMatch(/^VALID\n/);
  });

  // mitmproxy is not a dependency: where it is installed, the README's command runs as written.
  it.skipIf(!canRunMitmdump)(
    'the mitmdump line, run in front of a jobhook receiver, writes a HAR file verify reads',
    async () => {
      const [line] = commands(block('mitmproxy.sh'), 'mitmdump ');
      expect(line).toBe(
        'mitmdump --mode reverse:http://127.0.0.1:3000 -p 8080 --set hardump=./deliveries.har',
      );
      const receiver = createReceiver({
        publicKey: readFileSync(join(dir, 'gateway.pem'), 'utf8'),
        log: {},
        onEvent: () => undefined,
      });
      const app = express();
      app.post('/webhooks/gateway', receiver);
      const server = await listen(app);
      try {
        const port = await freePort();
        const script = mitmproxyMajor! < 10 ? ` -s ${HAR_DUMP_SCRIPT}` : '';
        const command = line!
          .replace('127.0.0.1:3000', `127.0.0.1:${server.port}`)
          .replace('-p 8080', `--listen-host 127.0.0.1 -p ${port}${script}`);
        const child = await started(command, listening(port));
        expect(
          (
            await cli([
              'send',
              '--to',
              `http://127.0.0.1:${port}/webhooks/gateway`,
              '--key',
              PRIVATE,
              '--job-id',
              'via-mitmproxy',
              '--br',
            ])
          ).code,
        ).toBe(0);
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGINT');
        await exited;
      } finally {
        await server.close();
        await receiver.close();
      }
      const v = await cli(['verify', '--key', join(dir, 'gateway.pem'), join(dir, 'deliveries.har')]);
      expect(v).toMatchObject({
        code: 0,
        stdout: `VALID via-mitmproxy orjson ${join(dir, 'gateway.pem')}\n`,
      });
    },
    60_000,
  );
});
