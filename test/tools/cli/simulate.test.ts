import { execFile, execFileSync, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createPublicKey } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import express from 'express';
import { describe, expect, it } from 'vitest';
import { createReceiver, type ExpressReceiverOptions, type NodeHandler } from '../../../src/express.js';
import type { JobCompletedEvent } from '../../../src/index.js';
import type { LongRunningIo } from '../../../src/tools/cli/simulate.js';
import { runCli } from '../../../src/tools/cli/main.js';
import { fixture, ROOT } from '../../helpers/paths.js';
import { cli } from './run.js';
import { listen } from '../helpers.js';

/** The one place receivers are made. */
function makeReceiver(options: ExpressReceiverOptions): NodeHandler {
  return createReceiver({ log: {}, ...options });
}

/** Runs `jobhook simulate` in-process; `output()` is what it printed so far. */
function simulate(argv: string[], signal?: AbortSignal) {
  let stdout = '';
  let stderr = '';
  const io: LongRunningIo = {
    stdout: (t) => void (stdout += t),
    stderr: (t) => void (stderr += t),
    readStdin: async () => new Uint8Array(),
    isTTY: false,
    signal,
  };
  const done = runCli(['simulate', ...argv], io);
  return {
    done,
    output: () => stdout,
    errors: () => stderr,
    /** Resolves with the banner once the simulator is up (or rejects with what it printed, if it exited). */
    started: async (): Promise<{ url: string; token: string; keyFile: string; createCurl: string }> => {
      await expect
        .poll(() => stdout.includes('Ctrl+C stops it.') || stderr !== '', { timeout: 10_000 })
        .toBe(true);
      if (!stdout.includes('Ctrl+C')) throw new Error(`simulate exited: ${stderr}`);
      const field = (name: string) => new RegExp(`^  ${name}:\\s+(\\S+)$`, 'm').exec(stdout)?.[1] ?? '';
      const createCurl = /^  (curl -sS -X POST .*)$/m.exec(stdout)?.[1] ?? '';
      return { url: field('URL'), token: field('token'), keyFile: field('public key'), createCurl };
    },
  };
}

describe('jobhook simulate', () => {
  it('--help shows usage, the failure switch and an example', async () => {
    const r = await cli(['simulate', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Usage: jobhook simulate/);
    expect(r.stdout).toContain('"simulate": "fail"');
    expect(r.stdout).toContain('Example:');
    expect((await cli(['--help'])).stdout).toMatch(/simulate\s+run a local gateway/);
  });

  it('prints URL, token and key path and a curl that creates a job; the key file verifies the delivery; stops on abort', async () => {
    const events: JobCompletedEvent[] = [];
    let keyFile = '';
    const app = express();
    // The key is read per request: the receiver exists before the simulator has written it.
    let handler: NodeHandler | undefined;
    app.post('/webhooks/gateway', (req, res, next) => {
      handler ??= makeReceiver({
        publicKey: readFileSync(keyFile, 'utf8'),
        onEvent: (e) => void events.push(e),
      });
      handler(req, res, next);
    });
    const receiver = await listen(app);
    const out = mkdtempSync(join(tmpdir(), 'jobhook-simulate-test-'));
    const stop = new AbortController();
    const run = simulate(
      ['--delay-ms', '20', '--out', out, '--receiver', `${receiver.url}/webhooks/gateway`],
      stop.signal,
    );
    try {
      const banner = await run.started();
      expect(banner.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(banner.token).toMatch(/^sim_[0-9a-f]{32}$/);
      expect(banner.keyFile).toBe(join(out, 'gateway-public.pem'));
      keyFile = banner.keyFile;
      expect(readFileSync(keyFile, 'utf8')).toMatch(/^TEST-ONLY KEY[^\n]*\n-----BEGIN PUBLIC KEY-----/);

      // Paste the printed curl into a shell, as a user would.
      const { stdout } = await promisify(execFile)('sh', ['-c', banner.createCurl]);
      const job = JSON.parse(stdout) as { public_id: string; status: string };
      expect(job.status).toBe('processing');
      await expect.poll(() => events.length, { timeout: 5000 }).toBe(1);
      expect(events[0]).toMatchObject({
        job_id: job.public_id,
        status: 'success',
        user_parameters: { order_id: '42' },
      });
      // The attempt is logged once the receiver has answered, which is after onEvent ran.
      await expect
        .poll(run.output)
        .toMatch(
          new RegExp(
            `job ${job.public_id} attempt 1 → ${receiver.url}/webhooks/gateway: HTTP 200 after \\d+ ms → processed`,
          ),
        );

      // The poll example works with the printed token.
      const polled = await fetch(`${banner.url}/v3/universal-ai/async/${job.public_id}`, {
        headers: { authorization: `Bearer ${banner.token}` },
      });
      expect(((await polled.json()) as { status: string }).status).toBe('success');
    } finally {
      stop.abort();
      expect(await run.done).toBe(0);
      await receiver.close();
    }
    expect(run.output()).toContain('stopping (abort)');
    expect(run.errors()).toBe('');
    const url = /URL:\s+(\S+)/.exec(run.output())![1]!;
    await expect(fetch(url)).rejects.toThrow(); // the server is closed
  });

  it('stops on SIGTERM and removes its signal listeners', async () => {
    const listeners = () => ['SIGINT', 'SIGTERM', 'SIGHUP'].map((name) => process.listenerCount(name));
    const before = listeners();
    const run = simulate([
      '--key',
      fixture('keys', 'test-2048-private.pem'),
      '--dialect',
      'python',
      '--token',
      'fixed-token',
    ]);
    try {
      const banner = await run.started();
      expect(banner.token).toBe('fixed-token');
      // With --key the public key is that private key's, so a receiver keeps its key across runs.
      const der = (pem: string) => createPublicKey(pem).export({ type: 'spki', format: 'der' });
      expect(der(readFileSync(banner.keyFile, 'utf8'))).toEqual(
        der(readFileSync(fixture('keys', 'test-2048-public.pem'), 'utf8')),
      );
      expect(run.output()).toContain('dialect:     python;');
    } finally {
      process.emit('SIGTERM');
    }
    expect(await run.done).toBe(0);
    expect(run.output()).toContain('stopping (SIGTERM)');
    expect(listeners()).toEqual(before);
  });

  it('--twice at-once --gzip and --replay-after-ms: each webhook sent as asked, every attempt logged with its copy; --tampered is refused (401)', async () => {
    const runs: string[] = [];
    const app = express();
    const receiver = makeReceiver({
      publicKey: readFileSync(fixture('keys', 'test-2048-public.pem'), 'utf8'),
      onEvent: (e) => void runs.push(e.job_id),
    });
    const encodings: Array<string | undefined> = [];
    app.post(
      '/hook',
      (req, _res, next) => (encodings.push(req.headers['content-encoding']), next()),
      receiver,
    );
    const target = await listen(app);
    const key = [
      '--key',
      fixture('keys', 'test-2048-private.pem'),
      '--delay-ms',
      '0',
      '--receiver',
      `${target.url}/hook`,
    ];
    const create = async (banner: { url: string; token: string }) => {
      const res = await fetch(`${banner.url}/v3/universal-ai/async`, {
        method: 'POST',
        headers: { authorization: `Bearer ${banner.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'ocr/ocr_async/amazon',
          input: {},
          webhook_receiver: `${target.url}/hook`,
        }),
      });
      return ((await res.json()) as { public_id: string }).public_id;
    };
    const stop = new AbortController();
    const running: Array<Promise<number>> = [];
    try {
      const a = simulate([...key, '--twice', 'at-once', '--gzip', '--replay-after-ms', '50'], stop.signal);
      running.push(a.done);
      const banner = await a.started();
      expect(a.output()).toContain('webhooks sent gzip, twice at once, replayed 50 ms later');
      const id = await create(banner);
      // The replay comes last, once both copies ended (a copy that raced the first may have been retried).
      await expect
        .poll(a.output, { timeout: 10_000 })
        .toMatch(new RegExp(`job ${id} replay, attempt 1 → .*: HTTP 200 after \\d+ ms → duplicate`));
      expect(
        a
          .output()
          .match(
            new RegExp(`job ${id} copy [12], attempt \\d → .*: HTTP 200 after \\d+ ms → processed`, 'g'),
          ),
      ).toHaveLength(1);
      expect(a.output()).toMatch(new RegExp(`job ${id} copy 1, attempt 1 → `));
      expect(a.output()).toMatch(new RegExp(`job ${id} copy 2, attempt 1 → `));
      expect(encodings.length).toBeGreaterThanOrEqual(3);
      expect(encodings.every((e) => e === 'gzip')).toBe(true);
      expect(runs).toEqual([id]);

      const t = simulate([...key, '--tampered'], stop.signal);
      running.push(t.done);
      const other = await create(await t.started());
      await expect
        .poll(t.output)
        .toMatch(
          new RegExp(`job ${other} attempt 1 → .*: HTTP 401 SIGNATURE_INVALID after \\d+ ms → rejected`),
        );
      expect(runs).toEqual([id]);
    } finally {
      stop.abort();
      expect(await Promise.all(running)).toEqual(running.map(() => 0));
      await target.close();
    }
  });

  it('usage errors exit 2 with one line in flag terms', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['--port', 'abc'], /--port must be a whole number from 0 to 65535/],
      [['--port', '70000'], /--port must be a whole number/],
      [['--delay-ms=-1'], /--delay-ms must be a whole number ≥ 0/],
      [['--dialect', 'yaml'], /--dialect must be one of/],
      [['--key', fixture('keys', 'test-2048-public.pem')], /^jobhook simulate: --key is not a private key/],
      [['extra'], /takes no FILE/],
      [['--gzip', '--br'], /give --gzip or --br, not both/],
      [['--twice=sometimes'], /--twice takes at-once or in-a-row/],
      [['--replay-after-ms', 'soon'], /--replay-after-ms must be a whole number/],
    ];
    for (const [argv, why] of cases) {
      const r = await cli(['simulate', ...argv]);
      expect({ code: r.code, lines: r.stderr.trim().split('\n').length }, argv.join(' ')).toEqual({
        code: 2,
        lines: 1,
      });
      expect(r.stderr, argv.join(' ')).toMatch(why);
    }
  });

  it('a port in use is an error, not a hang', async () => {
    const busy = await listen(() => undefined);
    try {
      const r = await cli([
        'simulate',
        '--port',
        String(busy.port),
        '--out',
        mkdtempSync(join(tmpdir(), 'jobhook-simulate-test-')),
      ]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/EADDRINUSE/);
    } finally {
      await busy.close();
    }
  });
});

describe('jobhook simulate in a process of its own', () => {
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  /** `node src/cli.ts simulate` (through tsx), or `shell` running it as its child. */
  function start(shell: boolean): {
    child: ChildProcessWithoutNullStreams;
    output: () => string;
    closed: Promise<void>;
  } {
    const command = [process.execPath, '--import', 'tsx', join(ROOT, 'src', 'cli.ts'), 'simulate'];
    // `; :` keeps the shell from exec'ing node: it stays its parent, as npm's does under npx.
    const child = shell
      ? spawn('sh', ['-c', `${command.map((a) => `'${a}'`).join(' ')}; :`])
      : spawn(command[0]!, command.slice(1));
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c));
    child.stderr.on('data', (c: Buffer) => (output += c));
    // The pipe closes once every process holding it has exited: the simulator included.
    const closed = new Promise<void>((resolve) => child.stdout.on('close', resolve));
    return { child, output: () => output, closed };
  }

  async function started(run: { output: () => string }): Promise<void> {
    await expect.poll(() => run.output(), { timeout: 30_000 }).toContain('Ctrl+C stops it.');
  }

  it('stops when the wrapper that started it is stopped and does not pass the signal on (npx: npm, then sh)', async () => {
    const run = start(true);
    await started(run);
    const simulator = Number(
      execFileSync('ps', ['-o', 'pid=', '--ppid', String(run.child.pid)], { encoding: 'utf8' }),
    );
    const t0 = performance.now();
    run.child.kill('SIGTERM'); // the shell dies; the simulator is adopted by another process
    const stopped = await Promise.race([run.closed.then(() => true), sleep(10_000).then(() => false)]);
    if (!stopped) process.kill(simulator); // left running: stopped here, and the test fails
    expect({ stopped, within5s: performance.now() - t0 < 5_000 }).toEqual({ stopped: true, within5s: true });
    expect(run.output()).toMatch(/\nstopping \(its parent process \d+ went away\)\n/);
  }, 60_000);

  it('stops cleanly on SIGHUP (the terminal closed)', async () => {
    const run = start(false);
    await started(run);
    const exited = new Promise<number | null>((resolve) => run.child.on('exit', (code) => resolve(code)));
    run.child.kill('SIGHUP');
    expect(await exited).toBe(0);
    expect(run.output()).toContain('\nstopping (SIGHUP)\n');
  }, 60_000);
});
