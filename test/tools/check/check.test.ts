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
import type { CheckAttempt } from '../../../src/tools/check/types.js';
import { freePort } from '../../helpers/servers.js';
import { DIALECTS } from '../../../src/lib/core/canonical/dialects.js';
import { parseWire, writeWire } from '../../../src/tools/deliveries/wire.js';
import {
  answering,
  answersFirstReceiver,
  bodyLimitReceiver,
  correctReceiver,
  failsFailedJobsReceiver,
  hangsUpOnRefusalsReceiver,
  noDecodingReceiver,
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

async function start<R extends TestReceiver>(make: () => Promise<R>): Promise<R> {
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

describe('checkReceiver tells the truth quickly', () => {
  /** The gateway's own policy (backoff from 1 s): the early verdict must come within 15 s with it. */
  const GATEWAY_POLICY = { timeLimitMs: 60_000 };
  const NOT_SENT = 47 - 3;

  it('nothing listens at the URL: it stops after the first 3 deliveries (their retries included) within 15 s, with that verdict', async () => {
    const url = `http://127.0.0.1:${await freePort()}/hook`;
    // The default check: its 25 MB delivery is not written before it is due.
    const report = await checkReceiver(url, { privateKey: PRIVATE_KEY, ...GATEWAY_POLICY });
    expect(report.durationMs).toBeLessThan(15_000);
    expect(report.stoppedEarly).toBe(
      `nothing answers at ${url} (ECONNREFUSED on every attempt of the first 3 deliveries (12 attempts)): is the receiver running, and is this its URL?`,
    );
    expect(byVerdict(report)).toEqual({
      lost: ['genuine/baseline', 'genuine/floats/orjson', 'genuine/big-integers/orjson'],
      'not-run': report.results.slice(3).map((r) => r.id),
    });
    expect(report.counts['not-run']).toBe(NOT_SENT);
    expect(report.ok).toBe(false);
    const text = formatCheckReport(report);
    expect(text).toContain(
      `\nStopped early: ${report.stoppedEarly} The other ${NOT_SENT} deliveries were not sent.\n`,
    );
    expect(text).not.toContain('Answer time by size'); // none of the sizes was sent
    expect(text).not.toContain('NOT RUN'); // counted, not listed
    expect(text).toMatch(/\nFAIL: 3 lost, 44 not run\.\n$/);
  }, 90_000);

  it('every answer a 5xx: it stops within 15 s, naming the answers', async () => {
    const r = await start(() => answering(503, 'STORE_UNAVAILABLE'));
    const report = await checkReceiver(r.url, { privateKey: PRIVATE_KEY, ...GATEWAY_POLICY });
    expect(report.durationMs).toBeLessThan(15_000);
    expect(report.stoppedEarly).toBe(
      'every attempt of the first 3 deliveries (12 attempts) was answered 5xx (HTTP 503 STORE_UNAVAILABLE): the endpoint fails before it takes any delivery',
    );
    expect(report.counts).toMatchObject({ lost: 3, 'not-run': NOT_SENT, passed: 0 });
  }, 90_000);

  it('does not stop early when only some deliveries fail (a handler that throws on failed jobs)', async () => {
    const report = await check(await start(failsFailedJobsReceiver), { dialects: ['orjson'], encodings: [] });
    expect(report.stoppedEarly).toBeUndefined();
    expect(result(report, 'genuine/baseline')).toMatchObject({ verdict: 'lost' });
    expect(result(report, 'genuine/floats/orjson').verdict).toBe('passed');
    expect(byVerdict(report)['not-run']).toBeUndefined();
  });

  it('a delivery that must be refused and gets no answer is never passed', async () => {
    const report = await check(await start(hangsUpOnRefusalsReceiver));
    expect(byVerdict(report)['no-answer']).toEqual(REFUSALS);
    expect(result(report, 'refuse/forged').meaning).toMatch(
      /^\S+: no answer, so whether it was refused is not known \(a 4xx says so\)$/,
    );
    expect(report.ok).toBe(false);
    expect(formatCheckReport(report)).toMatch(
      /\n {2}no answer +8 {2}\(not one attempt answered\)\n[^]*\nFAIL: 8 not answered\.\n$/,
    );
  });

  it('tells each attempt as it ends (onAttempt), in the order they are sent', async () => {
    const told: Array<CheckAttempt & { at: number }> = [];
    const r = await start(() => correctReceiver());
    const report = await check(r, {
      dialects: ['orjson'],
      encodings: [],
      onAttempt: (a) => void told.push({ ...a, at: Date.now() }),
    });
    const ids = report.results.map((x) => x.id);
    expect([...new Set(told.map((t) => t.id))].sort()).toEqual([...ids].sort());
    expect(told.every((t) => t.of === ids.length && ids[t.index - 1] === t.id)).toBe(true);
    // Sent twice: both copies told; cut once its body was sent: the cut attempt told too.
    expect(told.filter((t) => t.id === 'retry/twice').map((t) => [t.copy, t.attempt.attempt])).toEqual([
      [1, 1],
      [2, 1],
    ]);
    expect(
      told.filter((t) => t.id === 'retry/dropped').map((t) => [t.attempt.attempt, t.attempt.outcome]),
    ).toEqual([
      [1, 'retry'],
      [2, 'delivered'],
    ]);
    // As it goes: the first attempt was told before the last delivery was sent.
    expect(told[0]!.at).toBeLessThanOrEqual(told.at(-1)!.attempt.startedAt);
    await expect(check(r, { onAttempt: 'print' as never })).rejects.toThrow('onAttempt must be a function');
  });

  it('marks every delivery with X-Jobhook-Check (its case) and its User-Agent, so the receiver logs can tell them', async () => {
    const r = await start(() => answering(401, 'SIGNATURE_INVALID'));
    const report = await check(r, { effects: undefined, dialects: ['orjson'], encodings: [] });
    const marks = r.hits.map((h) => h['x-jobhook-check']);
    expect(new Set(marks)).toEqual(new Set(report.results.map((x) => x.id)));
    expect(marks.filter((m) => String(m).startsWith('refuse/'))).toEqual(REFUSALS);
    expect(r.hits.every((h) => /^jobhook-check\/\d+\.\d+\.\d+/.test(String(h['user-agent'])))).toBe(true);
  });
});

describe('checkReceiver attributes causes by evidence', () => {
  it('a body parser that decoded gzip is not blamed for it: the encoded deliveries fail as the same content unencoded does (floats)', async () => {
    const report = await check(await start(stringifyVerifierReceiver), { effects: undefined });
    const floats = result(report, 'genuine/floats/orjson').cause;
    expect(result(report, 'genuine/gzip')).toMatchObject({ verdict: 'lost', cause: floats });
    expect(result(report, 'genuine/br')).toMatchObject({ verdict: 'lost', cause: floats });
    expect(report.causes.map((c) => c.cause).join('\n')).not.toMatch(/Content-Encoding/);
  });

  it('a verifier that does not decode Content-Encoding is named, the same content unencoded being accepted', async () => {
    const report = await check(await start(noDecodingReceiver), { effects: undefined });
    expect(result(report, 'genuine/size-150000').verdict).toBe('passed');
    expect(result(report, 'genuine/gzip').cause).toBe(
      'a gzip-encoded delivery refused (HTTP 401 SIGNATURE_INVALID) where the same content unencoded is accepted: decode Content-Encoding before verifying, or answer 415',
    );
  });

  it('a receiver that answers 200 before verifying: named as such, with its danger (a failure after the 200 is never retried)', async () => {
    const r = await start(answersFirstReceiver);
    const report = await check(r);
    expect(byVerdict(report)['accepted-forged']).toEqual(REFUSALS);
    expect(result(report, 'refuse/forged')).toMatchObject({
      runs: 0,
      meaning: 'HTTP 200: accepted, though the job never ran (in the effects)',
    });
    expect(report.causes.filter((c) => c.verdict === 'accepted-forged')).toEqual([
      {
        cause:
          'answers 2xx to deliveries that do not verify, which then never run (it answers before verifying, or hides its refusals): the gateway takes a 2xx as delivered, so a genuine delivery that fails after it (its verification, the handler, a crash) is never retried, and is lost without a word',
        verdict: 'accepted-forged',
        ids: REFUSALS,
      },
    ]);
    // Without the effects, the answers alone cannot tell it from a receiver that does not verify: both are said.
    const blind = await check(r, { effects: undefined, dialects: ['orjson'], encodings: [] });
    expect(result(blind, 'refuse/forged').cause).toBe(
      'deliveries that do not verify are answered 2xx: the signature is not verified (anyone can post a delivery that runs), or it is verified after answering (then a genuine delivery that fails after the 2xx is never retried); counting the runs from the effects tells which',
    );
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
