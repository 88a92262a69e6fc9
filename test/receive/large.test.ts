/**
 * Large deliveries are verified on worker threads and their event built in slices:
 * the same answers and the same event as on the calling thread, bounded by a queue.
 * (How long the event loop is held is measured by bench/event-loop.mjs, not here.)
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createReceiver, signDelivery, type JobCompletedEvent } from '../../src/index.js';
import { splitPlan, buildValue } from '../../src/lib/core/verify/split.js';
import { privatePem, publicPem } from '../helpers/keys.js';
import { jobId } from '../helpers/deliveries.js';

const key = privatePem(2048);
const publicKey = publicPem(2048);
const finished = () => new Date().toISOString();

/** A large OCR-like body: many words with float tokens, some non-ASCII, a long base64 string. */
function largeBody(id: string, words: number, extra = ''): string {
  const w = Array.from(
    { length: words },
    (_, k) =>
      `{"text":"Wört ${k}","confidence":${k % 7 === 0 ? '1.0' : '0.' + (k % 97)},"box":{"x":0.0,"y":${k}.5}}`,
  );
  return `{"event":"async_job_completed","job_id":"${id}","status":"success","finished_at":"${finished()}","output":{"pages":[{"words":[${w.join(',')}]}],"image":"${'QUJD'.repeat(50_000)}"${extra}}}`;
}

describe('verification on worker threads', () => {
  it('gives the same event as the calling thread, and the same answers', async () => {
    const seen: JobCompletedEvent[] = [];
    const inWorker = createReceiver({
      publicKey,
      onEvent: (e) => void seen.push(e),
      workerThresholdBytes: 64 * 1024,
      log: {},
    });
    const onThread = createReceiver({
      publicKey,
      onEvent: (e) => void seen.push(e),
      workerThresholdBytes: false,
      log: {},
    });
    const body = largeBody(
      jobId('large'),
      20_000,
      ',"__proto__":{"polluted":true},"big":18446744073709551615',
    );
    expect(body.length).toBeGreaterThan(1_000_000);
    const d = signDelivery(body, key);
    const a = await inWorker({ body: new TextEncoder().encode(d.body), headers: d.headers });
    const b = await onThread({ body: d.body, headers: d.headers });
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(seen[0]).toEqual(seen[1]);
    expect(seen[0]).toEqual(JSON.parse(body));
    // "__proto__" stays an own property, as JSON.parse leaves it.
    expect(Object.getPrototypeOf((seen[0] as { output: object }).output)).toBe(Object.prototype);
    expect(Object.hasOwn((seen[0] as { output: object }).output, '__proto__')).toBe(true);
    await inWorker.close();

    // Refusals come back with their codes and messages.
    const forged = await createReceiver({
      publicKey,
      onEvent: () => undefined,
      workerThresholdBytes: 1024,
      log: {},
    })({ body: d.body, headers: { 'X-Service-Signature': 'ab'.repeat(256) } });
    expect(JSON.parse(forged.body)).toMatchObject({ error: { code: 'SIGNATURE_INVALID' } });
    const broken = body.slice(0, 500_000);
    const sigOfBroken = signDelivery(body, key).headers;
    const r1 = await createReceiver({
      publicKey,
      onEvent: () => undefined,
      workerThresholdBytes: 1024,
      log: {},
    })({ body: broken, headers: sigOfBroken });
    const r2 = await createReceiver({
      publicKey,
      onEvent: () => undefined,
      workerThresholdBytes: false,
      log: {},
    })({ body: broken, headers: sigOfBroken });
    expect(r1).toEqual(r2);
    expect(JSON.parse(r1.body)).toMatchObject({ error: { code: 'BODY_MALFORMED' } });
  });

  it('integers that need the exact tree (bigint mode) are built on the calling thread, still right', async () => {
    const seen: JobCompletedEvent[] = [];
    const receive = createReceiver({
      publicKey,
      integers: 'bigint',
      dialects: ['python-utf8'],
      onEvent: (e) => void seen.push(e),
      workerThresholdBytes: 1024,
      log: {},
    });
    const d = signDelivery(largeBody(jobId('exact'), 2_000, ',"n":123456789012345678901234567890'), key, {
      dialect: 'python-utf8',
    });
    expect((await receive({ body: d.body, headers: d.headers })).status).toBe(200);
    expect((seen[0] as unknown as { output: { n: unknown } }).output.n).toBe(123456789012345678901234567890n);
    await receive.close();
  });

  it('a full queue answers 503 RECEIVER_BUSY, never drops or doubles a job', async () => {
    let runs = 0;
    const receive = createReceiver({
      publicKey,
      onEvent: () => void runs++,
      workerThresholdBytes: 1024,
      workerPoolSize: 1,
      log: {},
    });
    const deliveries = Array.from({ length: 20 }, () => signDelivery(largeBody(jobId('busy'), 5_000), key));
    const answers = await Promise.all(deliveries.map((d) => receive({ body: d.body, headers: d.headers })));
    const codes = answers.map(
      (a) =>
        `${a.status} ${(JSON.parse(a.body) as { status?: string; error?: { code: string } }).status ?? (JSON.parse(a.body) as { error: { code: string } }).error.code}`,
    );
    // One in the worker, eight waiting; the rest are told to come back.
    expect(codes.filter((c) => c === '200 processed')).toHaveLength(9);
    expect(codes.filter((c) => c === '503 RECEIVER_BUSY')).toHaveLength(11);
    expect(runs).toBe(9);
    await receive.close();
  });

  it('close() while deliveries wait for the worker: each is answered 503 (the gateway retries), none hangs or runs', async () => {
    let runs = 0;
    const receive = createReceiver({
      publicKey,
      onEvent: () => void runs++,
      workerThresholdBytes: 1024,
      workerPoolSize: 1,
      log: {},
    });
    const deliveries = Array.from({ length: 5 }, () => signDelivery(largeBody(jobId('closing'), 5_000), key));
    const answers = Promise.all(deliveries.map((d) => receive({ body: d.body, headers: d.headers })));
    await receive.close();
    const codes = (await answers).map(
      (a) => `${a.status} ${(JSON.parse(a.body) as { error?: { code: string } }).error?.code ?? 'ok'}`,
    );
    expect(codes).toEqual(Array(5).fill('503 RECEIVER_BUSY'));
    expect(runs).toBe(0);
  });
});

describe('building a value from a plan', () => {
  it('equals JSON.parse for any JSON, whatever the piece size (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.json({ depthSize: 'medium' }),
        fc.integer({ min: 1, max: 200 }),
        async (text, maxPiece) => {
          for (const t of [text, JSON.stringify(JSON.parse(text), null, 2)]) {
            const bytes = new TextEncoder().encode(t);
            const v = await buildValue(bytes, splitPlan(bytes, maxPiece));
            expect(v).toEqual(JSON.parse(t));
            // Key order too.
            expect(JSON.stringify(v)).toBe(JSON.stringify(JSON.parse(t)));
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('an object of many small members is parsed in runs, not member by member', async () => {
    const text = `{${Array.from({ length: 10_000 }, (_, k) => `"k${k}":${k}`).join(',')},"__proto__":{"polluted":true}}`;
    const bytes = new TextEncoder().encode(text);
    const plan = splitPlan(bytes, 4096);
    if (plan.kind !== 'object') throw new Error(plan.kind);
    // ~110 KB in pieces of at most 4 KB: a few dozen runs, not 10,001 members.
    expect(plan.parts.length).toBeLessThan(60);
    expect(plan.parts.every((p) => p.kind === 'run')).toBe(true);
    const v = (await buildValue(bytes, plan)) as Record<string, unknown>;
    expect(JSON.stringify(v)).toBe(JSON.stringify(JSON.parse(text)));
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
    expect(Object.hasOwn(v, '__proto__')).toBe(true);
  });

  it('keeps "__proto__" as an own property in split objects', async () => {
    const text = `{"__proto__":{"a":1},"b":[${'1,'.repeat(100)}1],"c":"${'x'.repeat(200)}"}`;
    const bytes = new TextEncoder().encode(text);
    const v = (await buildValue(bytes, splitPlan(bytes, 32))) as Record<string, unknown>;
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
    expect(v).toEqual(JSON.parse(text));
  });
});
