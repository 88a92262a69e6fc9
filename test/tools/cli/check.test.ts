/**
 * `jobhook check URL --key PRIVATE.pem` in-process, against real receivers on loopback:
 * the scorecard, --json, the exit code (0 only when nothing is lost, accepted forged or
 * run twice) and the usage errors.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { fixture } from '../../helpers/paths.js';
import {
  bodyLimitReceiver,
  correctReceiver,
  noIdempotencyReceiver,
  noVerificationReceiver,
  type TestReceiver,
} from '../check/receivers.js';
import { freePort } from '../../helpers/servers.js';
import { cli } from './run.js';

const KEY = fixture('keys', 'test-2048-private.pem');
/** Sizes past body-parser's 100 kB default, short backoffs: a run of a second or two. */
const QUICK = [
  '--sizes',
  '1kB,150kB',
  '--backoff-ms',
  '20',
  '--max-backoff-ms',
  '100',
  '--effects-wait-ms',
  '1000',
];

const receivers: TestReceiver[] = [];
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

async function start(make: () => Promise<TestReceiver>): Promise<TestReceiver> {
  const r = await make();
  receivers.push(r);
  return r;
}

describe('jobhook check', () => {
  it('prints the scorecard of a correct receiver and exits 0', async () => {
    const r = await start(() => correctReceiver());
    const { code, stdout, stderr } = await cli([
      'check',
      r.url,
      '--key',
      KEY,
      '--effects',
      r.effectsUrl,
      ...QUICK,
    ]);
    expect(code).toBe(0);
    // Each attempt on stderr as it ends: the progress, apart from the scorecard.
    const progress = stderr.trimEnd().split('\n');
    expect(progress[0]).toMatch(
      /^\[ 1\/44\] genuine\/baseline: attempt 1: HTTP 200 after \d+ ms → processed$/,
    );
    for (const line of progress)
      expect(line).toMatch(/^\[[ \d]\d\/44\] (genuine|refuse|retry)\/\S+: (copy 2, )?attempt \d: .+ → .+$/);
    expect(
      progress.filter((l) => l.includes(' refuse/forged: attempt 1: HTTP 401 SIGNATURE_INVALID')),
    ).toHaveLength(1);
    expect(stdout).toMatch(
      new RegExp(
        `^jobhook check ${r.url}\\n44 deliveries in \\d+\\.\\d s · seed \\d+ · 3 retries, backoff 20 ms doubling to 100 ms, 30 s per attempt · runs counted from the effects\\n\\nGenuine deliveries`,
      ),
    );
    expect(stdout).toContain(
      '\n  passed  X-Service-Signature twice (merged as "a, b", as proxies and Node do) → refused: HTTP 401 SIGNATURE_MALFORMED\n',
    );
    expect(stdout).toMatch(
      /\n {2}passed {2}the same delivery twice at once \(a retry racing a slow attempt\) → at once: .*: ran once \(in the effects\)\n/,
    );
    expect(stdout).toMatch(
      /\nAnswer time by size \(first attempt; the gateway gives up on an attempt after 30 s\)\n {2}1 kB \d+ ms · 150 kB \d+ ms\n/,
    );
    expect(stdout.endsWith('\nPASS: nothing lost, nothing forged accepted, nothing run twice.\n')).toBe(true);
  });

  it('--json prints the report for CI; the same seed generates the same values', async () => {
    const r = await start(() => correctReceiver());
    const { code, stdout } = await cli([
      'check',
      r.url,
      '--key',
      KEY,
      '--json',
      '--seed',
      '42',
      '--dialect',
      'orjson',
      '--encodings',
      'none',
      ...QUICK,
    ]);
    const report = JSON.parse(stdout) as {
      ok: boolean;
      seed: number;
      countedFrom: string;
      counts: Record<string, number>;
      results: Array<{ id: string; verdict: string; sends: unknown[] }>;
    };
    expect({ code, ok: report.ok, seed: report.seed, countedFrom: report.countedFrom }).toEqual({
      code: 0,
      ok: true,
      seed: 42,
      countedFrom: 'answers',
    });
    expect(report.counts).toEqual({
      passed: 30,
      lost: 0,
      'accepted-forged': 0,
      'ran-twice': 0,
      slow: 0,
      skipped: 0,
      'no-answer': 0,
      'not-run': 0,
    });
    expect(report.results.map((x) => x.id).slice(0, 5)).toEqual([
      'genuine/baseline',
      'genuine/floats/orjson',
      'genuine/big-integers/orjson',
      'genuine/escapes/orjson',
      'genuine/unicode/orjson',
    ]);
  });

  it('exits 1 on a 100 kB body limit, with the deliveries lost and the cause', async () => {
    const r = await start(bodyLimitReceiver);
    const { code, stdout } = await cli(['check', r.url, '--key', KEY, '--effects', r.effectsUrl, ...QUICK]);
    expect(code).toBe(1);
    expect(stdout).toContain(
      '\n  LOST    150 kB OCR result → HTTP 413 HTTP_ERROR: the gateway does not retry a 4xx, the job is lost [1]\n',
    );
    expect(stdout).toMatch(/\nScorecard\n {2}passed {11}41\n {2}lost {14}3\n/);
    expect(stdout).toContain(
      "\n  [1] a body limit in front of the verifier (HTTP 413 from 150 kB on; 1 kB accepted): body-parser's default is 100 kB, Fastify's 1 MiB, nginx's 1 MB; the gateway sends up to 25 MB (3 deliveries)\n",
    );
    expect(stdout.endsWith('\nFAIL: 3 lost.\n')).toBe(true);
  });

  it('exits 1 when a job runs twice (from --effects) and when forged deliveries are accepted', async () => {
    const twice = await start(noIdempotencyReceiver);
    const a = await cli([
      'check',
      twice.url,
      '--key',
      KEY,
      '--effects',
      twice.effectsUrl,
      '--dialect',
      'orjson',
      ...QUICK,
    ]);
    expect(a.code).toBe(1);
    expect(a.stdout).toMatch(
      /\n {2}TWICE {3}the same delivery twice, one after the other → HTTP 200 processed in \d+ ms; then HTTP 200 processed in \d+ ms: the job ran 2 times \(in the effects\) \[\d\]\n/,
    );
    const forged = await start(noVerificationReceiver);
    const b = await cli(['check', forged.url, '--key', KEY, '--dialect', 'orjson', ...QUICK]);
    expect(b.code).toBe(1);
    expect(b.stdout).toContain(
      '\n  FORGED  tampered body (a field changed after signing) → HTTP 200: accepted [1]\n',
    );
    expect(b.stdout).toContain('\nFAIL: 8 accepted forged.\n');
  });

  it('stops early, within 15 s, when nothing listens at the URL, and says so first', async () => {
    const url = `http://127.0.0.1:${await freePort()}/hook`;
    const t0 = performance.now();
    const { code, stdout, stderr } = await cli(['check', url, '--key', KEY]);
    expect(performance.now() - t0).toBeLessThan(15_000);
    expect(code).toBe(1);
    expect(stdout).toMatch(
      new RegExp(
        `^jobhook check ${url}\\n.*\\n\\nStopped early: nothing answers at ${url} \\(ECONNREFUSED on every attempt of the first 3 deliveries \\(12 attempts\\)\\): is the receiver running, and is this its URL\\? The other 44 deliveries were not sent\\.\\n`,
      ),
    );
    expect(stdout.endsWith('\nFAIL: 3 lost, 44 not run.\n')).toBe(true);
    expect(stderr).toMatch(
      /^\[ 1\/47\] genuine\/baseline: attempt 1: ECONNREFUSED after \d+ ms → retry in 1000 ms$/m,
    );
  }, 60_000);

  it('refuses plain http to a host that is not loopback unless --allow-http', async () => {
    const r = await start(() => correctReceiver());
    const url = r.url.replace('127.0.0.1', '0.0.0.0');
    expect(await cli(['check', url, '--key', KEY])).toEqual({
      code: 2,
      stdout: '',
      stderr:
        'jobhook check: refusing to send over plain http:// to 0.0.0.0 (not loopback); use https:// or --allow-http\n',
    });
    const allowed = await cli([
      'check',
      url,
      '--key',
      KEY,
      '--allow-http',
      '--dialect',
      'orjson',
      '--encodings',
      'none',
      ...QUICK,
    ]);
    expect(allowed.code).toBe(0);
  });

  it('usage errors exit 2 with one line', async () => {
    const cases: Array<[string[], string]> = [
      [['check', '--key', KEY], 'jobhook check: the URL of the receiver is required\n'],
      [
        ['check', 'http://127.0.0.1:9/hook'],
        'jobhook check: --key PRIVATE.pem is required (the key whose public key the receiver trusts)\n',
      ],
      [['check', 'nowhere', '--key', KEY], 'jobhook check: the receiver URL is not a URL: nowhere\n'],
      [
        ['check', 'http://127.0.0.1:9/hook', '--key', KEY, '--sizes', '1kB,lots'],
        'jobhook check: --sizes: "lots" is not a size (e.g. 1kB, 150kB, 1.5MB, 25MB)\n',
      ],
      [
        ['check', 'http://127.0.0.1:9/hook', '--key', KEY, '--sizes', '10'],
        'jobhook check: sizes must be an integer from 1000 to 100000000; got 10\n',
      ],
      [
        ['check', 'http://127.0.0.1:9/hook', '--key', KEY, '--dialect', 'json'],
        'jobhook check: --dialect must be one of orjson, orjson-legacy, python-utf8, python; got "json"\n',
      ],
      [
        ['check', 'http://127.0.0.1:9/hook', '--key', KEY, '--effects', 'http://example.com/effects'],
        'jobhook check: refusing to send over plain http:// to example.com (not loopback); use https:// or --allow-http\n',
      ],
      [
        ['check', 'http://127.0.0.1:9/hook', '--key', KEY, '--backoff-ms=-1'],
        'jobhook check: --backoff-ms must be an integer ≥ 0; got -1\n',
      ],
      [
        ['check', 'http://127.0.0.1:9/hook', '--key', KEY, '--signature-header', 'X Sig'],
        'jobhook check: --signature-header must be an HTTP header name; got "X Sig"\n',
      ],
    ];
    for (const [argv, stderr] of cases)
      expect(await cli(argv), argv.join(' ')).toEqual({ code: 2, stdout: '', stderr });
  });

  it('--help shows usage and an example', async () => {
    const { code, stdout } = await cli(['check', '--help']);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^Usage: jobhook check URL --key PRIVATE\.pem \[options\]\n/);
    expect(stdout).toContain('\nExample:\n  jobhook keygen --out ./test-keys');
    expect((await cli(['--help'])).stdout).toContain(
      '\n  check         prove a deployed receiver takes what the gateway sends (a scorecard)\n',
    );
  });
});
