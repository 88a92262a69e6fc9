import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import express from 'express';
import { createVerifier } from '../../../src/index.js';
import { createReceiver } from '../../../src/express.js';
import { VERSION } from '../../../src/lib/base/version.js';
import { fixture, ROOT } from '../../helpers/paths.js';
import { cli } from './run.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'jobhook-tools-'));
});

describe('jobhook keygen and sign', () => {
  it('writes a labelled TEST-ONLY key pair, refuses to overwrite, and the keys sign and verify', async () => {
    const out = join(dir, 'keys');
    const r = await cli(['keygen', '--out', out]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('TEST-ONLY');
    const priv = join(out, 'test-only-private.pem');
    expect(readFileSync(priv, 'utf8')).toMatch(/^TEST-ONLY KEY/);
    const again = await cli(['keygen', '--out', out]);
    expect(again.code).toBe(2);
    expect(again.stderr).toBe(
      `jobhook keygen: ${join(out, 'test-only-private.pem')} exists; pass --force to overwrite\n`,
    );
    expect((await cli(['keygen', '--out', out, '--force'])).code).toBe(0);
    const bits = await cli(['keygen', '--out', join(dir, 'small'), '--bits', '1024']);
    expect(bits).toMatchObject({
      code: 2,
      stderr: 'jobhook keygen: --bits must be 2048, 3072 or 4096, got 1024\n',
    });
    expect(existsSync(join(dir, 'small'))).toBe(false);

    const signed = await cli([
      'sign',
      '--key',
      join(out, 'test-only-private.pem'),
      '--status',
      'fail',
      '--job-id',
      'job-7',
    ]);
    expect(signed.code).toBe(0);
    const capture = JSON.parse(signed.stdout) as { headers: Record<string, string>; body: string };
    const verifier = createVerifier({
      publicKey: readFileSync(join(out, 'test-only-public-pkcs1.pem'), 'utf8'),
    });
    const { event } = verifier.verify(capture.body, capture.headers);
    expect(event).toMatchObject({ job_id: 'job-7', status: 'fail', error: { message: 'provider timeout' } });
    // And the CLI verifies what the CLI signed.
    const f = join(dir, 'signed.json');
    writeFileSync(f, signed.stdout);
    expect((await cli(['verify', '--key', join(out, 'test-only-public.pem'), f])).stdout).toMatch(
      /^VALID job-7 orjson/,
    );
  });

  it('signs a FILE as it is, in the dialect asked', async () => {
    const body = join(dir, 'payload.json');
    writeFileSync(
      body,
      '{"event":"async_job_completed","job_id":"f-1","status":"success","output":{"v":1e16}}',
    );
    const r = await cli([
      'sign',
      '--key',
      fixture('keys', 'test-2048-private.pem'),
      '--dialect',
      'orjson-legacy',
      body,
    ]);
    const capture = JSON.parse(r.stdout) as { headers: Record<string, string>; body: string };
    expect(capture.body).toBe(readFileSync(body, 'utf8'));
    // This payload has no finished_at, so no replay window applies.
    expect(
      createVerifier({
        publicKey: readFileSync(fixture('keys', 'test-2048-public.pem'), 'utf8'),
        maxAgeSeconds: false,
      }).verify(capture.body, capture.headers).dialect,
    ).toBe('orjson-legacy');
    expect(
      (await cli(['sign', '--key', fixture('keys', 'test-2048-private.pem'), '--status', 'done'])).code,
    ).toBe(2);
    const publicAsPrivate = await cli(['sign', '--key', fixture('keys', 'test-2048-public.pem'), body]);
    expect(publicAsPrivate).toMatchObject({
      code: 2,
      stderr: 'jobhook sign: --key is not a private key (expected a PEM such as BEGIN PRIVATE KEY)\n',
    });
  });

  it('--size N signs a generated payload of N bytes (an OCR result with floats such as 1.0), in the dialect asked', async () => {
    const key = fixture('keys', 'test-2048-private.pem');
    const publicKey = readFileSync(fixture('keys', 'test-2048-public.pem'), 'utf8');
    for (const [size, bytes, dialect] of [
      ['150kB', 150_000, 'orjson'],
      ['2MB', 2_000_000, 'python'],
      ['1000', 1_000, 'python-utf8'],
    ] as const) {
      const r = await cli([
        'sign',
        '--key',
        key,
        '--size',
        size,
        '--dialect',
        dialect,
        '--job-id',
        `sized-${size}`,
      ]);
      expect(r.code, r.stderr).toBe(0);
      const capture = JSON.parse(r.stdout) as { headers: Record<string, string>; body: string };
      expect(Buffer.byteLength(capture.body)).toBe(bytes);
      expect(capture.body).toMatch(/"confidence": ?1\.0/);
      // Signed in that dialect: a verifier that tries it alone takes it.
      const verifier = createVerifier({ publicKey, dialects: [dialect] });
      expect(verifier.verify(capture.body, capture.headers).jobId).toBe(`sized-${size}`);
    }
    const usage: Array<[string[], string]> = [
      [['--size', 'lots'], '--size: "lots" is not a size (e.g. 150kB, 1.5MB, 25MB)'],
      [['--size', '10'], '--size must be an integer from 1000 to 100000000; got 10'],
      [
        ['--size', '1kB', '--status', 'fail'],
        "--size makes a successful job's payload (an OCR result), not one with --status fail",
      ],
      [['--size', '1kB', join(dir, 'payload.json')], 'give a FILE or --status/--job-id/--size, not both'],
    ];
    for (const [argv, message] of usage)
      expect(await cli(['sign', '--key', key, ...argv])).toEqual({
        code: 2,
        stdout: '',
        stderr: `jobhook sign: ${message}\n`,
      });
  });
});

describe('jobhook send', () => {
  let server: Server | undefined;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r) ?? r(undefined));
    server = undefined;
  });
  async function serve(answers: Array<number | 'hang'>): Promise<{ url: string; hits: number[] }> {
    const hits: number[] = [];
    let k = 0;
    server = createServer((req, res) => {
      hits.push(performance.now());
      req.resume();
      const a = answers[Math.min(k++, answers.length - 1)]!;
      if (a === 'hang') return;
      res.writeHead(a, { 'content-type': 'application/json' }).end('{}');
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    return { url: `http://127.0.0.1:${(server!.address() as AddressInfo).port}/hook`, hits };
  }
  const key = fixture('keys', 'test-2048-private.pem');

  it('503, 503, 200 → three attempts with growing delays, exit 0', async () => {
    const { url, hits } = await serve([503, 503, 200]);
    const r = await cli(['send', '--to', url, '--key', key, '--backoff-ms', '40']);
    expect(r.code).toBe(0);
    expect(hits).toHaveLength(3);
    expect(r.stdout).toMatch(
      /attempt 1: HTTP 503 after \d+ ms → retry in 40 ms\nattempt 2: HTTP 503 after \d+ ms → retry in 80 ms\nattempt 3: HTTP 200 after \d+ ms → delivered\n$/,
    );
    // Timers never fire early (load only makes them late): lower bounds, less a millisecond of rounding.
    expect(hits[1]! - hits[0]!).toBeGreaterThanOrEqual(39);
    expect(hits[2]! - hits[1]!).toBeGreaterThanOrEqual(79);
  });

  it('400 → one attempt, not retried, exit 1', async () => {
    const { url, hits } = await serve([400]);
    const r = await cli(['send', '--to', url, '--key', key, '--backoff-ms', '10']);
    expect(r.code).toBe(1);
    expect(hits).toHaveLength(1);
    expect(r.stdout).toMatch(/attempt 1: HTTP 400 .*rejected/);
  });

  it('a redirect is not followed and not retried, exit 1', async () => {
    const { url, hits } = await serve([307, 200]);
    const r = await cli(['send', '--to', url, '--key', key, '--backoff-ms', '10']);
    expect(r.code).toBe(1);
    expect(hits).toHaveLength(1);
    expect(r.stdout).toMatch(/attempt 1: HTTP 307 .*rejected \(redirects are not followed\)/);
  });

  it('a server that never answers → the timeout is retried, then it gives up', async () => {
    const { url, hits } = await serve(['hang']);
    const r = await cli([
      'send',
      '--to',
      url,
      '--key',
      key,
      '--timeout-ms',
      '150',
      '--retries',
      '2',
      '--backoff-ms',
      '10',
    ]);
    expect(r.code).toBe(1);
    expect(hits).toHaveLength(3);
    // The limit is said once (not "timed out after 150 ms after 152 ms").
    expect(r.stdout).toBe(
      'attempt 1: timed out after 150 ms → retry in 10 ms\nattempt 2: timed out after 150 ms → retry in 20 ms\nattempt 3: timed out after 150 ms → gave up\n',
    );
  });

  it('caps the backoff and sends a capture object as it is', async () => {
    const { url, hits } = await serve([500, 500, 500, 200]);
    const f = join(dir, 'capture.json');
    writeFileSync(f, (await cli(['sign', '--key', key, '--job-id', 'as-is'])).stdout);
    const r = await cli(['send', '--to', url, '--backoff-ms', '30', '--max-backoff-ms', '50', f]);
    expect(r.code).toBe(0);
    expect(hits).toHaveLength(4);
    expect(r.stdout).toMatch(/retry in 30 ms[\s\S]*retry in 50 ms[\s\S]*retry in 50 ms/);
  });

  it("says what a jobhook receiver answered: processed, then duplicate; a refusal's code", async () => {
    const runs: string[] = [];
    const app = express();
    app.post(
      '/hook',
      createReceiver({
        publicKey: readFileSync(fixture('keys', 'test-2048-public.pem'), 'utf8'),
        onEvent: (e) => void runs.push(e.job_id),
        log: {},
      }),
    );
    server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server!.once('listening', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    const id = `send-${process.pid}-${Date.now()}`;
    const first = await cli(['send', '--to', url, '--key', key, '--job-id', id]);
    expect(first).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(/^attempt 1: HTTP 200 after \d+ ms → processed\n$/),
    });
    const again = await cli(['send', '--to', url, '--key', key, '--job-id', id]);
    expect(again).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(/^attempt 1: HTTP 200 after \d+ ms → duplicate\n$/),
    });
    expect(runs).toEqual([id]);
    const otherKey = join(dir, 'other-keys');
    await cli(['keygen', '--out', otherKey]);
    const forged = await cli(['send', '--to', url, '--key', join(otherKey, 'test-only-private.pem')]);
    expect(forged).toMatchObject({
      code: 1,
      stdout: expect.stringMatching(
        /^attempt 1: HTTP 401 SIGNATURE_INVALID after \d+ ms → rejected \(4xx: not retried\)\n$/,
      ),
    });
  });

  it('refuses plain http:// to a host that is not loopback (nothing is sent)', async () => {
    const r = await cli(['send', '--to', 'http://example.com/hook', '--key', key]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/refusing to send over plain http:\/\/ to example\.com/);
    expect(r.stderr).toBe(
      'jobhook send: refusing to send over plain http:// to example.com (not loopback); use https:// or --allow-insecure\n',
    );
    const notUrl = await cli(['send', '--to', 'nowhere', '--key', key]);
    expect(notUrl).toMatchObject({ code: 2, stderr: 'jobhook send: --to is not a URL: nowhere\n' });
  });
});

describe('jobhook send --gzip, --br, --twice against a jobhook receiver', () => {
  const key = fixture('keys', 'test-2048-private.pem');
  let server: Server;
  let url: string;
  const runs: string[] = [];
  const seen: Array<Record<string, string | string[] | undefined>> = [];
  beforeAll(async () => {
    const app = express();
    const receiver = createReceiver({
      publicKey: readFileSync(fixture('keys', 'test-2048-public.pem'), 'utf8'),
      log: {},
      // A job id ending in -slow holds its claim 500 ms: a copy racing it gets 503 IN_PROGRESS.
      onEvent: async (e) => {
        if (e.job_id.endsWith('-slow')) await new Promise((r) => setTimeout(r, 500));
        runs.push(e.job_id);
      },
    });
    app.post('/hook', (req, _res, next) => (seen.push(req.headers), next()), receiver);
    server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  const id = (name: string) => `${name}-${process.pid}-${Date.now()}`;

  it('--gzip --twice: both copies compressed; processed, then duplicate; the job runs once; exit 0', async () => {
    const job = id('gzip-twice');
    const r = await cli(['send', '--to', url, '--key', key, '--job-id', job, '--gzip', '--twice']);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toMatch(
      /^copy 1, attempt 1: HTTP 200 after \d+ ms → processed\ncopy 2, attempt 1: HTTP 200 after \d+ ms → duplicate\n$/,
    );
    expect(seen.slice(-2).map((h) => h['content-encoding'])).toEqual(['gzip', 'gzip']);
    expect(runs.filter((r) => r === job)).toHaveLength(1);
  });

  it('--br --twice at-once against a slow handler: one copy processed, the other 503 IN_PROGRESS until its retry finds it done; runs once', async () => {
    const job = id('br-at-once') + '-slow';
    const r = await cli([
      'send',
      '--to',
      url,
      '--key',
      key,
      '--job-id',
      job,
      '--br',
      '--twice',
      'at-once',
      '--backoff-ms',
      '300',
    ]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines.filter((l) => / → processed$/.test(l))).toHaveLength(1);
    expect(lines).toContainEqual(
      expect.stringMatching(/^copy [12], attempt 1: HTTP 503 IN_PROGRESS after \d+ ms → retry in 300 ms$/),
    );
    expect(lines.at(-1)).toMatch(/^copy [12], attempt \d: HTTP 200 after \d+ ms → duplicate$/);
    expect(seen.slice(-lines.length).every((h) => h['content-encoding'] === 'br')).toBe(true);
    expect(runs.filter((r) => r === job)).toHaveLength(1);
  });

  it('a capture FILE compressed with --gzip verifies; one that already says Content-Encoding is refused; --gzip with --br is a usage error', async () => {
    const job = id('capture-gzip');
    const f = join(dir, 'capture-gzip.json');
    writeFileSync(f, (await cli(['sign', '--key', key, '--job-id', job])).stdout);
    const r = await cli(['send', '--to', url, '--gzip', f]);
    expect(r).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(/^attempt 1: HTTP 200 after \d+ ms → processed\n$/),
    });
    const encoded = join(dir, 'capture-encoded.json');
    const capture = JSON.parse(readFileSync(f, 'utf8')) as { headers: Record<string, string> };
    writeFileSync(
      encoded,
      JSON.stringify({ ...capture, headers: { ...capture.headers, 'content-encoding': 'gzip' } }),
    );
    expect(await cli(['send', '--to', url, '--br', encoded])).toMatchObject({
      code: 2,
      stdout: '',
      stderr:
        'jobhook send: the capture already has Content-Encoding: gzip; send it as it is, without --br\n',
    });
    expect(await cli(['send', '--to', url, '--key', key, '--gzip', '--br'])).toMatchObject({
      code: 2,
      stderr: 'jobhook send: give --gzip or --br, not both\n',
    });
    expect(await cli(['send', '--to', url, '--key', key, '--twice=thrice'])).toMatchObject({
      code: 2,
      stderr: 'jobhook send: --twice takes at-once or in-a-row (or nothing: in a row), got "thrice"\n',
    });
  });

  it('--twice: exit 1 when a copy is not delivered', async () => {
    // Signed with another key: both copies refused.
    const other = join(dir, 'twice-other-keys');
    await cli(['keygen', '--out', other]);
    const r = await cli(['send', '--to', url, '--key', join(other, 'test-only-private.pem'), '--twice']);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(
      /^copy 1, attempt 1: HTTP 401 SIGNATURE_INVALID .*\ncopy 2, attempt 1: HTTP 401 SIGNATURE_INVALID .*\n$/,
    );
  });
});

describe('help, version, unknown commands', () => {
  it.each(['verify', 'explain', 'canonicalize', 'keygen', 'sign', 'send', 'simulate'])(
    '%s --help shows usage and an example',
    async (command) => {
      const r = await cli([command, '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^Usage: jobhook ${command}`));
      expect(r.stdout).toContain('Example:');
    },
  );

  it('--version, --help and unknown commands', async () => {
    expect((await cli(['--version'])).stdout).toBe(`${VERSION}\n`);
    expect((await cli(['--help'])).stdout).toContain('Commands:');
    const unknown = await cli(['frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe("jobhook: unknown command 'frobnicate' (try 'jobhook --help')\n");
  });

  it('an unknown option or command names the nearest known one', async () => {
    const cases: Array<[string[], string]> = [
      [['verify', '--kye', 'k.pem', 'x.json'], 'jobhook verify: unknown option --kye; did you mean --key?\n'],
      [['explain', '--idnex=2', 'x.har'], 'jobhook explain: unknown option --idnex; did you mean --index?\n'],
      [['sign', '--stauts', 'fail'], 'jobhook sign: unknown option --stauts; did you mean --status?\n'],
      [['send', '--retry', '2'], 'jobhook send: unknown option --retry; did you mean --retries?\n'],
      [
        ['check', 'http://127.0.0.1:9/', '--effect', 'x'],
        'jobhook check: unknown option --effect; did you mean --effects?\n',
      ],
      [['simulate', '--prot', '8080'], 'jobhook simulate: unknown option --prot; did you mean --port?\n'],
      [
        ['keygen', '--frobnicate'],
        "jobhook keygen: unknown option --frobnicate; 'jobhook keygen --help' lists the options\n",
      ],
      [['verfiy', '--key', 'k.pem'], "jobhook: unknown command 'verfiy' (did you mean verify?)\n"],
    ];
    for (const [argv, stderr] of cases)
      expect(await cli(argv), argv.join(' ')).toEqual({ code: 2, stdout: '', stderr });
  });

  it('canonicalize prints the text or the digest; malformed input exits 2 with one line', async () => {
    expect((await cli(['canonicalize', '-'], { stdin: '{"b":1.0,"a":1e16}' })).stdout).toBe(
      '{\n  "a": 1e+16,\n  "b": 1.0\n}\n',
    );
    expect(
      (await cli(['canonicalize', '--digest', '--dialect', 'python', '-'], { stdin: '{}' })).stdout,
    ).toBe('44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a\n');
    const bad = await cli(['canonicalize', '-'], { stdin: '{"a":' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^jobhook canonicalize: BODY_MALFORMED: Malformed JSON at byte 5/);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('canonicalize is bounded as the verifier is: body size, nesting and canonical size refused before anything is built', async () => {
    // ~1 MB of nested arrays: a canonical form of gigabytes (2 spaces per level per line), refused from its parsed layout.
    const nested = `[${Array(560)
      .fill('['.repeat(900) + ']'.repeat(900))
      .join(',')}]`;
    const deep = await cli(['canonicalize', '-'], { stdin: nested });
    expect({ code: deep.code, out: deep.stdout }).toEqual({ code: 2, out: '' });
    expect(deep.stderr).toMatch(/^jobhook canonicalize: CANONICAL_TOO_LARGE: /);
    // An endless input (/dev/zero) stops at --max-body-bytes.
    let given = 0;
    async function* zeros() {
      for (;;) {
        given += 65_536;
        yield new Uint8Array(65_536);
      }
    }
    const endless = await cli(['canonicalize', '--max-body-bytes', '1000000', '-'], { stdin: zeros() });
    expect(endless.code).toBe(2);
    expect(endless.stderr).toMatch(/larger than 1000000 bytes \(--max-body-bytes\)/);
    expect(given).toBeLessThan(1_200_000);
    expect((await cli(['canonicalize', '--max-depth', '3', '-'], { stdin: '[[[[1]]]]' })).stderr).toMatch(
      /BODY_MALFORMED: .*nesting deeper than the limit of 3/,
    );
    expect(
      (await cli(['canonicalize', '--max-canonical-bytes', '10', '-'], { stdin: '{"a":[1,2,3]}' })).stderr,
    ).toMatch(/CANONICAL_TOO_LARGE/);
    // Within the limits: the same text as before, written as it is made.
    const text = await cli(['canonicalize', '--dialect', 'python', '-'], { stdin: '{"é":[1.5,{"b":null}]}' });
    expect(text.stdout).toBe('{\n  "\\u00e9": [\n    1.5,\n    {\n      "b": null\n    }\n  ]\n}\n');
  });
});
