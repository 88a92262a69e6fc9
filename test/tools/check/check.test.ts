/**
 * checkReceiver against real receivers on loopback: jobhook's own passes; each way a
 * deployment loses or forges deliveries is caught under its class with its cause.
 */
import { createServer, type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  checkReceiver,
  type CheckOptions,
  type CheckReport,
  type Verdict,
} from '../../../src/tools/check/index.js';
import { parseEffects, readEffects } from '../../../src/tools/check/effects.js';
import { sizedBody } from '../../../src/tools/check/large.js';
import { Random } from '../../../src/tools/check/random.js';
import { formatCheckReport } from '../../../src/tools/check/report.js';
import { generatedValues, VALUE_KINDS } from '../../../src/tools/check/values.js';
import { DIALECTS } from '../../../src/lib/core/canonical/dialects.js';
import { parseWire, writeWire } from '../../../src/tools/deliveries/wire.js';
import {
  bodyLimitReceiver,
  correctReceiver,
  headerDroppingProxy,
  neverRunsReceiver,
  noIdempotencyReceiver,
  noVerificationReceiver,
  PRIVATE_KEY,
  stringifyVerifierReceiver,
  type TestReceiver,
} from './receivers.js';

const receivers: TestReceiver[] = [];
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

async function start(make: () => Promise<TestReceiver>): Promise<TestReceiver> {
  const r = await make();
  receivers.push(r);
  return r;
}

/** A short run: sizes past body-parser's 100 kB default, short backoffs. */
const QUICK: Omit<CheckOptions, 'privateKey'> = {
  sizes: [1_000, 150_000],
  backoffMs: 20,
  maxBackoffMs: 100,
  effectsWaitMs: 1_000,
};

function check(r: TestReceiver, options: Partial<CheckOptions> = {}): Promise<CheckReport> {
  return checkReceiver(r.url, { privateKey: PRIVATE_KEY, effects: r.effectsUrl, ...QUICK, ...options });
}

/** Result ids by verdict, verdicts with none left out. */
function byVerdict(report: CheckReport): Partial<Record<Verdict, string[]>> {
  const out: Partial<Record<Verdict, string[]>> = {};
  for (const r of report.results) (out[r.verdict] ??= []).push(r.id);
  return out;
}

function result(report: CheckReport, id: string) {
  const found = report.results.find((r) => r.id === id);
  if (found === undefined) throw new Error(`no result ${id}`);
  return found;
}

const REFUSALS = [
  'refuse/tampered',
  'refuse/forged',
  'refuse/other-key',
  'refuse/header-missing',
  'refuse/header-renamed',
  'refuse/header-doubled',
  'refuse/too-old',
  'refuse/future',
];

describe('checkReceiver against a correct receiver', () => {
  it('jobhook/express passes every delivery, every job run once (from the effects)', async () => {
    const r = await start(() => correctReceiver());
    const report = await check(r);
    expect(byVerdict(report)).toEqual({ passed: report.results.map((x) => x.id) });
    expect(report).toMatchObject({ ok: true, countedFrom: 'effects', causes: [], notes: [] });
    expect(report.results).toHaveLength(1 + 4 * DIALECTS.length + 12 + 2 + 2 + 8 + 3);
    // Each genuine and retried job ran exactly once; no refused one ran.
    for (const x of report.results) expect(x.runs, x.id).toBe(x.group === 'refuse' ? 0 : 1);
    expect(result(report, 'refuse/header-missing').meaning).toBe('refused: HTTP 401 SIGNATURE_MISSING');
    expect(result(report, 'retry/twice').meaning).toMatch(
      /^HTTP 200 processed in \d+ ms; then HTTP 200 duplicate in \d+ ms: ran once \(in the effects\)$/,
    );
    expect(formatCheckReport(report)).toMatch(
      /\nScorecard\n {2}passed {11}44\n {2}lost {14}0\n {2}accepted forged {3}0\n {2}ran twice {9}0\n {2}slow {14}0\n\nPASS/,
    );
  });

  it('the default sizes, up to 25 MB, get through; without effects the runs are read from the answers', async () => {
    const r = await start(() => correctReceiver());
    const report = await checkReceiver(r.url, {
      privateKey: PRIVATE_KEY,
      backoffMs: 20,
      dialects: ['orjson'],
      encodings: [],
    });
    expect(report.timing.map((t) => [t.bytes, t.status])).toEqual(
      [1_000, 150_000, 1_500_000, 7_000_000, 25_000_000].map((b) => [b, 200]),
    );
    expect(report).toMatchObject({ ok: true, countedFrom: 'answers' });
    expect(result(report, 'retry/twice').meaning).toMatch(/ran once \(as the answers say\)$/);
    expect(r.ran).toHaveLength(report.results.filter((x) => x.group !== 'refuse').length);
  }, 120_000);
});

describe('checkReceiver catches each broken receiver under its class', () => {
  it('a 100 kB body-parser limit: the deliveries past it are lost, 413, the limit located', async () => {
    const report = await check(await start(bodyLimitReceiver));
    expect(byVerdict(report).lost).toEqual(['genuine/size-150000', 'genuine/gzip', 'genuine/br']);
    expect(report.ok).toBe(false);
    expect(report.causes).toEqual([
      {
        cause:
          "a body limit in front of the verifier (HTTP 413 from 150 kB on; 1 kB accepted): body-parser's default is 100 kB, Fastify's 1 MiB, nginx's 1 MB; the gateway sends up to 25 MB",
        verdict: 'lost',
        ids: ['genuine/size-150000', 'genuine/gzip', 'genuine/br'],
      },
    ]);
    expect(result(report, 'genuine/size-150000').meaning).toBe(
      'HTTP 413 HTTP_ERROR: the gateway does not retry a 4xx, the job is lost',
    );
  });

  it('a verifier that uses JSON.parse and a sorted JSON.stringify: lost on floats, big integers and Unicode, the escapes it writes alike pass', async () => {
    const report = await check(await start(stringifyVerifierReceiver), { effects: undefined });
    const cause = (id: string) => result(report, id).cause;
    expect(result(report, 'genuine/baseline').verdict).toBe('passed');
    expect(result(report, 'genuine/escapes/orjson').verdict).toBe('passed');
    for (const id of [
      'genuine/floats/orjson',
      'genuine/big-integers/orjson',
      'genuine/unicode/orjson',
      'genuine/shape-1',
      'genuine/size-1000',
    ])
      expect(result(report, id).verdict, id).toBe('lost');
    expect(cause('genuine/floats/orjson')).toBe(
      'a non-canonical verifier: floats the gateway writes as 1.0 or 0.0 come out as 1 or 0 (JSON.parse, then JSON.stringify)',
    );
    expect(cause('genuine/shape-1')).toBe(cause('genuine/floats/orjson'));
    expect(cause('genuine/size-150000')).toBe(cause('genuine/floats/orjson')); // not "large only": the 1 kB one failed too
    expect(cause('genuine/big-integers/orjson')).toBe(
      'a non-canonical verifier: integers beyond 2^53 lose digits (JSON.parse)',
    );
    expect(cause('genuine/unicode/orjson')).toMatch(/^a non-canonical verifier: keys sorted by UTF-16 units/);
    expect(cause('genuine/escapes/python')).toBe(
      "the verifier does not try the python canonical form (senders writing with Python's json.dumps)",
    );
    expect(result(report, 'genuine/floats/orjson').meaning).toBe(
      'HTTP 401: the gateway does not retry a 4xx, the job is lost',
    );
    // It verifies signatures, but keeps no replay window.
    expect(byVerdict(report)['accepted-forged']).toEqual(['refuse/too-old', 'refuse/future']);
    expect(result(report, 'refuse/too-old').cause).toBe(
      'no replay window: a captured delivery can be replayed once its job id is forgotten',
    );
  });

  it('a proxy that drops the signature header: every genuine delivery lost with 401, the header named as the cause', async () => {
    const report = await check(await start(headerDroppingProxy));
    const { passed, lost, ...rest } = byVerdict(report);
    expect(rest).toEqual({});
    expect(passed).toEqual(REFUSALS);
    expect(lost).toEqual(report.results.filter((x) => x.group !== 'refuse').map((x) => x.id));
    expect(report.causes).toEqual([
      {
        cause:
          'every delivery refused: the signature header does not reach the verifier (a proxy drops or renames X-Service-Signature, or the endpoint expects another name)',
        verdict: 'lost',
        ids: lost,
      },
    ]);
    expect(result(report, 'retry/twice').meaning).toBe(
      'HTTP 401 SIGNATURE_MISSING: the gateway does not retry a 4xx, the job is lost',
    );
  });

  it('a receiver without idempotency: ran twice, counted from the effects', async () => {
    const r = await start(noIdempotencyReceiver);
    const report = await check(r);
    expect(result(report, 'retry/twice')).toMatchObject({
      verdict: 'ran-twice',
      runs: 2,
      cause: "no idempotency on job_id: the gateway's retry ran the job again",
    });
    expect(result(report, 'retry/concurrent')).toMatchObject({
      verdict: 'ran-twice',
      runs: 2,
      cause: 'no claim on job_id: two deliveries at once both ran it',
    });
    // The attempt cut once its body was sent may or may not have reached the handler.
    expect(['passed', 'ran-twice']).toContain(result(report, 'retry/dropped').verdict);
    expect(report.results.filter((x) => x.group !== 'retry').every((x) => x.verdict === 'passed')).toBe(true);
    expect(report.ok).toBe(false);
  });

  it('without effects, the answers of a receiver that says "processed" twice count it as ran twice', async () => {
    const report = await check(await start(noIdempotencyReceiver), { effects: undefined });
    expect(result(report, 'retry/twice')).toMatchObject({
      verdict: 'ran-twice',
      meaning: expect.stringMatching(/: the job ran 2 times \(as the answers say\)$/),
    });
    expect(result(report, 'retry/twice').runs).toBeUndefined();
  });

  it('a receiver that answers 200 without verifying: every delivery that must be refused is accepted forged', async () => {
    const report = await check(await start(noVerificationReceiver));
    expect(byVerdict(report)['accepted-forged']).toEqual(REFUSALS);
    expect(report.causes.filter((c) => c.verdict === 'accepted-forged').map((c) => [c.cause, c.ids])).toEqual(
      [
        ['the signature is not verified: anyone can post a delivery that is accepted', REFUSALS.slice(0, 6)],
        [
          'no replay window: a captured delivery can be replayed once its job id is forgotten',
          ['refuse/too-old'],
        ],
        [
          'future-dated events are accepted: their completion mark can expire before the replay window closes',
          ['refuse/future'],
        ],
      ],
    );
    expect(result(report, 'refuse/tampered').meaning).toBe('HTTP 200: accepted, and the job ran');
  });

  it('a receiver that answers 2xx and never runs the job: lost, counted from the effects', async () => {
    const report = await check(await start(neverRunsReceiver), { effectsWaitMs: 200 });
    expect(result(report, 'genuine/baseline')).toMatchObject({
      verdict: 'lost',
      runs: 0,
      cause:
        'answered 2xx, but the effects never showed the job: the handler did not run, or its effect was lost',
    });
    expect(byVerdict(report).passed).toEqual(REFUSALS);
  });

  it('an answer slower than the per-attempt timeout is slow: the gateway retries it', async () => {
    const r = await start(() => correctReceiver({ slowFirstMs: 600 }));
    const report = await check(r, {
      timeoutMs: 300,
      backoffMs: 200,
      maxBackoffMs: 1_000,
      dialects: ['orjson'],
    });
    expect(byVerdict(report).slow).toEqual(['genuine/size-150000', 'genuine/gzip', 'genuine/br']);
    expect(result(report, 'genuine/size-150000').meaning).toMatch(
      /^timed out after 300 ms → .*HTTP 200 duplicate in \d+ ms, but an attempt got no answer within the per-attempt timeout/,
    );
    expect(report.ok).toBe(true);
    expect(formatCheckReport(report)).toMatch(
      /\nPASS: nothing lost, nothing forged accepted, nothing run twice \(3 slow\)\.\n$/,
    );
  });
});

describe('checkReceiver bounds and options', () => {
  it('stops at its time limit: what was not sent is not run, and the check fails', async () => {
    const r = await start(() => correctReceiver({ slowFirstMs: 2_000 }));
    const report = await check(r, { timeLimitMs: 1_500, timeoutMs: 5_000, dialects: ['orjson'] });
    expect(report.counts['not-run']).toBeGreaterThan(0);
    expect(report.notes[0]).toMatch(
      /^stopped before the end: the check's time limit \(1500 ms\) was reached$/,
    );
    expect(report.durationMs).toBeLessThan(5_000);
    expect(report.ok).toBe(false);
  });

  it('refuses plain http to a host that is not loopback, unknown options and sizes out of range', async () => {
    await expect(checkReceiver('http://example.com/hook', { privateKey: PRIVATE_KEY })).rejects.toThrow(
      'refusing to send over plain http:// to example.com (not loopback); use https:// or allowInsecure: true',
    );
    await expect(
      checkReceiver('https://example.com/hook', {
        privateKey: PRIVATE_KEY,
        effects: 'http://example.com/effects',
      }),
    ).rejects.toThrow('refusing to send over plain http:// to example.com');
    await expect(
      checkReceiver('https://example.com/hook', { privateKey: PRIVATE_KEY, size: [1000] } as CheckOptions),
    ).rejects.toThrow('unknown option size; did you mean sizes?');
    await expect(
      checkReceiver('https://example.com/hook', { privateKey: PRIVATE_KEY, sizes: [999] }),
    ).rejects.toThrow(TypeError);
    await expect(checkReceiver('https://example.com/hook', { privateKey: 'not a key' })).rejects.toThrow(
      'privateKey is not a private key',
    );
  });

  it('takes effects from a function, and from an answer of one id per line', async () => {
    const r = await start(() => correctReceiver());
    const report = await check(r, { effects: () => r.ran, dialects: ['orjson'], encodings: [] });
    expect(report).toMatchObject({ ok: true, countedFrom: 'effects' });
    expect(parseEffects('a\nb\r\na\n')).toEqual(['a', 'b', 'a']);
    expect(parseEffects('{"jobs":["a"]}')).toEqual(['a']);
    expect(() => parseEffects('[1]')).toThrow('not an array of job ids');
  });
});

describe('the effects answer', () => {
  it('is read no further than 16 MiB when it declares no length (delimited by the close of the connection)', async () => {
    const MiB = 1024 * 1024;
    let written = 0;
    let closed!: () => void;
    const done = new Promise<void>((resolve) => (closed = resolve));
    // Streams job ids for 128 MiB, as fast as the reader takes them, then closes.
    const server = createServer((socket) => {
      socket.on('error', () => undefined).on('close', closed);
      socket.once('data', () => {
        socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n[');
        const chunk = Buffer.from('"job",'.repeat(10_000));
        const pump = () => {
          while (written < 128 * MiB && !socket.destroyed) {
            written += chunk.length;
            if (!socket.write(chunk)) return void socket.once('drain', pump);
          }
          socket.end();
        };
        pump();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/effects`;
    try {
      await expect(readEffects(url, AbortSignal.timeout(60_000))).rejects.toThrow(
        'the effects answer is larger than 16777216 bytes',
      );
      await done;
      // What was read, and what the sockets' buffers held when the reader let go.
      expect(written).toBeLessThan(40 * MiB);
    } finally {
      server.close();
    }
  }, 90_000);
});

describe('the generated deliveries', () => {
  it('are generated from the seed: the same seed, the same values; another seed, others', () => {
    for (const kind of VALUE_KINDS) {
      expect(generatedValues(kind, new Random(7), 'python')).toEqual(
        generatedValues(kind, new Random(7), 'python'),
      );
      expect(writeWire(generatedValues(kind, new Random(7), 'orjson'))).not.toBe(
        writeWire(generatedValues(kind, new Random(8), 'orjson')),
      );
    }
  });

  it('are exactly the size asked for, and JSON', () => {
    for (const bytes of [1_000, 150_001, 2_000_000]) {
      for (const dialect of DIALECTS) {
        const body = sizedBody('job-1', bytes, new Random(bytes), dialect)!;
        expect(Buffer.byteLength(body), `${bytes} ${dialect}`).toBe(bytes);
        expect(parseWire(body)).toMatchObject({ job_id: 'job-1', status: 'success' });
      }
    }
    expect(sizedBody('job-1', 100, new Random(1), 'orjson')).toBeUndefined();
  });
});
