/**
 * The simulator's deliveries other than once (`delivery`), and job requests as large as
 * the deliveries a receiver must take, sent over real sockets to a real jobhook Express
 * receiver: what it answers to each, and how many times its handler ran.
 */
import { gunzipSync } from 'node:zlib';
import express from 'express';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createReceiver } from '../../../src/express.js';
import { createVerifier } from '../../../src/index.js';
import {
  startGatewaySimulator,
  type DeliveryResult,
  type GatewaySimulator,
  type SimulatedDelivery,
} from '../../../src/testing.js';
import { privatePem, publicPem } from '../../helpers/keys.js';
import { createJob, listen, scripted, type Hit } from '../helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A jobhook Express receiver trusting the fixture key: the jobs its handler ran, and the headers of every request. */
async function jobhookReceiver(options: { slowMs?: number; maxAgeSeconds?: number } = {}) {
  const runs: string[] = [];
  const seen: Hit[] = [];
  const receiver = createReceiver({
    publicKey: publicPem(2048),
    log: {},
    ...(options.maxAgeSeconds === undefined ? {} : { maxAgeSeconds: options.maxAgeSeconds }),
    onEvent: async (event) => {
      if ((event.user_parameters as { slow?: boolean } | undefined)?.slow === true)
        await sleep(options.slowMs ?? 0);
      runs.push(event.job_id);
    },
  });
  const app = express();
  app.post(
    '/hook',
    (req, _res, next) => (seen.push({ at: performance.now(), headers: req.headers, body: '' }), next()),
    receiver,
  );
  const server = await listen(app);
  return {
    url: `${server.url}/hook`,
    runs,
    seen,
    close: async () => (await server.close(), await receiver.close()),
  };
}

type Receiver = Awaited<ReturnType<typeof jobhookReceiver>>;

/** What each sending's attempts were answered, in order: `200 processed`, `503 IN_PROGRESS`… */
function answers(d: DeliveryResult): string[][] {
  return d.sendings.map((s) => s.attempts.map((a) => `${a.status} ${a.answer}`));
}

describe('delivery: each way a webhook can arrive, against a jobhook receiver', () => {
  let receiver: Receiver;
  let sim: GatewaySimulator;
  const ways: Record<string, SimulatedDelivery> = {
    'in-a-row': { twice: 'in-a-row' },
    'at-once': { twice: 'at-once' },
    tampered: { tampered: true },
    gzip: { encoding: 'gzip' },
    br: { encoding: 'br' },
    replay: { replayAfterMs: 300 },
    'gzip-at-once': { encoding: 'gzip', twice: 'at-once' },
  };

  beforeAll(async () => {
    // The slow jobs hold their claim 600 ms; the retries of a racing copy come 250 and 750 ms after its first attempt.
    receiver = await jobhookReceiver({ slowMs: 600 });
    sim = await startGatewaySimulator({
      privateKey: privatePem(2048),
      delayMs: 0,
      backoffMs: 250,
      delivery: (job) => ways[(job.userParameters as { way?: string } | undefined)?.way ?? ''],
    });
  });
  afterAll(async () => {
    await sim.close();
    await receiver.close();
  });

  async function deliver(way: string, extra: object = {}): Promise<DeliveryResult> {
    const created = await createJob(sim, {
      model: 'ocr/ocr_async/amazon',
      input: {},
      webhook_receiver: receiver.url,
      user_webhook_parameters: { way, ...extra },
    });
    expect(created.status).toBe(202);
    return sim.waitForDelivery(created.json.public_id as string);
  }
  const ranTimes = (id: string) => receiver.runs.filter((r) => r === id).length;

  it('twice in a row: processed, then duplicate; the job runs once', async () => {
    const d = await deliver('in-a-row');
    expect(d.sendings.map((s) => [s.sending, s.kind, s.outcome])).toEqual([
      [1, 'first', 'delivered'],
      [2, 'second', 'delivered'],
    ]);
    expect(answers(d)).toEqual([['200 processed'], ['200 duplicate']]);
    expect(d.sendings[1]!.attempts[0]!.startedAt).toBeGreaterThanOrEqual(
      d.sendings[0]!.attempts[0]!.startedAt + d.sendings[0]!.attempts[0]!.elapsedMs - 1,
    );
    expect(d.attempts.map((a) => a.sending)).toEqual([1, 2]);
    expect(ranTimes(d.jobId)).toBe(1);
  });

  it('twice at once, the handler slow: one copy is processed, the other gets 503 IN_PROGRESS with Retry-After until its retry finds it done; the job runs once', async () => {
    const d = await deliver('at-once', { slow: true });
    expect(d.sendings.map((s) => s.outcome)).toEqual(['delivered', 'delivered']);
    const [won, raced] =
      d.sendings[0]!.attempts[0]!.answer === 'processed' ? d.sendings : [d.sendings[1]!, d.sendings[0]!];
    expect(won!.attempts.map((a) => `${a.status} ${a.answer}`)).toEqual(['200 processed']);
    expect(raced!.attempts[0]).toMatchObject({
      status: 503,
      answer: 'IN_PROGRESS',
      retryAfter: expect.stringMatching(/^\d+$/),
      outcome: 'retry',
    });
    expect(raced!.attempts.at(-1)).toMatchObject({ status: 200, answer: 'duplicate', outcome: 'delivered' });
    // Both started together, before the first was answered.
    expect(
      Math.abs(d.sendings[0]!.attempts[0]!.startedAt - d.sendings[1]!.attempts[0]!.startedAt),
    ).toBeLessThan(won!.attempts[0]!.elapsedMs);
    expect(ranTimes(d.jobId)).toBe(1);
  });

  it('tampered after signing: 401 SIGNATURE_INVALID, not retried, never run; the body sent is not the one signed', async () => {
    const d = await deliver('tampered');
    expect(d).toMatchObject({ outcome: 'rejected', sendings: [{ outcome: 'rejected' }] });
    expect(answers(d)).toEqual([['401 SIGNATURE_INVALID']]);
    expect(JSON.parse(d.body!)).toMatchObject({ job_id: d.jobId, output: { text: 'changed on the way' } });
    expect(ranTimes(d.jobId)).toBe(0);
  });

  it.each(['gzip', 'br'])('%s-encoded: Content-Encoding on the wire, 200 processed', async (coding) => {
    const d = await deliver(coding);
    expect(answers(d)).toEqual([['200 processed']]);
    expect(d.headers).toMatchObject({ 'Content-Encoding': coding });
    const hit = receiver.seen.at(-1)!;
    expect(hit.headers['content-encoding']).toBe(coding);
    expect(Number(hit.headers['content-length'])).toBeLessThan(Buffer.byteLength(d.body!));
    expect(ranTimes(d.jobId)).toBe(1);
  });

  it('replayed later: the same signature after the delay, answered duplicate; the job runs once', async () => {
    const d = await deliver('replay');
    expect(d.sendings.map((s) => [s.kind, s.outcome])).toEqual([
      ['first', 'delivered'],
      ['replay', 'delivered'],
    ]);
    expect(answers(d)).toEqual([['200 processed'], ['200 duplicate']]);
    const [first, replay] = d.attempts as [DeliveryResult['attempts'][0], DeliveryResult['attempts'][0]];
    expect(replay.startedAt - (first.startedAt + first.elapsedMs)).toBeGreaterThanOrEqual(299);
    const [a, b] = receiver.seen.slice(-2);
    expect(b!.headers['x-service-signature']).toBe(a!.headers['x-service-signature']);
    expect(b!.headers['content-length']).toBe(a!.headers['content-length']);
    expect(ranTimes(d.jobId)).toBe(1);
  });

  it('gzip twice at once: both copies decoded, one processed, the job runs once', async () => {
    const d = await deliver('gzip-at-once', { slow: true });
    expect(d.sendings.map((s) => s.outcome)).toEqual(['delivered', 'delivered']);
    expect(d.attempts.filter((a) => a.answer === 'processed')).toHaveLength(1);
    expect(d.attempts.every((a) => ['processed', 'duplicate', 'IN_PROGRESS'].includes(a.answer!))).toBe(true);
    expect(
      receiver.seen.slice(-d.attempts.length).every((h) => h.headers['content-encoding'] === 'gzip'),
    ).toBe(true);
    expect(ranTimes(d.jobId)).toBe(1);
  });

  it('a job the function leaves alone is sent once', async () => {
    const d = await deliver('none');
    expect(answers(d)).toEqual([['200 processed']]);
    expect(d.sendings).toHaveLength(1);
  });
});

describe('delivery: options and close()', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0)) await c();
  });

  it('refuses a delivery it cannot send, naming the field', async () => {
    const start = (delivery: unknown) =>
      startGatewaySimulator({ privateKey: privatePem(2048), delivery: delivery as SimulatedDelivery });
    await expect(start({ twice: 'sometimes' })).rejects.toThrow(
      `delivery.twice must be 'in-a-row' or 'at-once', got "sometimes"`,
    );
    await expect(start({ encoding: 'deflate' })).rejects.toThrow(
      `delivery.encoding must be 'gzip' or 'br', got "deflate"`,
    );
    await expect(start({ replayAfterMs: -1 })).rejects.toThrow(
      'delivery.replayAfterMs must be a whole number from 0 to 2147483647, got -1',
    );
    await expect(start({ tampered: 'yes' })).rejects.toThrow('delivery.tampered must be true or false');
    await expect(start({ twise: 'at-once' })).rejects.toThrow(/twise/);
    await expect(start('twice')).rejects.toThrow('delivery must be an object');
  });

  it("a function's bad value ends that job's delivery as gave-up with the error, nothing sent", async () => {
    const receiver = await jobhookReceiver();
    const sim = await startGatewaySimulator({
      privateKey: privatePem(2048),
      delayMs: 0,
      delivery: () => ({ twice: 'thrice' }) as unknown as SimulatedDelivery,
    });
    cleanup.push(
      () => sim.close(),
      () => receiver.close(),
    );
    const id = (
      await createJob(sim, { model: 'ocr/ocr_async/amazon', input: {}, webhook_receiver: receiver.url })
    ).json.public_id as string;
    const d = await sim.waitForDelivery(id);
    expect(d).toMatchObject({
      outcome: 'gave-up',
      attempts: [{ error: expect.stringContaining('delivery.twice must be') }],
    });
    expect(receiver.seen).toHaveLength(0);
  });

  it('close() while the second copy waits to retry: the first stays delivered, the second is cancelled', async () => {
    const target = await scripted([200, 503]);
    const sim = await startGatewaySimulator({
      privateKey: privatePem(2048),
      delayMs: 0,
      backoffMs: 60_000,
      delivery: { twice: 'in-a-row' },
    });
    cleanup.push(() => target.close());
    const id = (
      await createJob(sim, {
        model: 'ocr/ocr_async/amazon',
        input: {},
        webhook_receiver: `${target.url}/hook`,
      })
    ).json.public_id as string;
    await expect.poll(() => sim.deliveries.length).toBe(2);
    await sim.close();
    const d = await sim.waitForDelivery(id);
    expect(d.sendings.map((s) => [s.kind, s.outcome, s.attempts.map((a) => a.status)])).toEqual([
      ['first', 'delivered', [200]],
      ['second', 'cancelled', [503]],
    ]);
    expect(d.outcome).toBe('delivered');
  });

  it('close() during the wait before a replay cancels the replay, promptly', async () => {
    const receiver = await jobhookReceiver();
    const sim = await startGatewaySimulator({
      privateKey: privatePem(2048),
      delayMs: 0,
      delivery: { replayAfterMs: 60_000 },
    });
    cleanup.push(() => receiver.close());
    const id = (
      await createJob(sim, { model: 'ocr/ocr_async/amazon', input: {}, webhook_receiver: receiver.url })
    ).json.public_id as string;
    await expect.poll(() => sim.deliveries.length).toBe(1);
    const t0 = performance.now();
    await sim.close();
    const d = await sim.waitForDelivery(id);
    expect(d.sendings.map((s) => [s.kind, s.outcome])).toEqual([
      ['first', 'delivered'],
      ['replay', 'cancelled'],
    ]);
    expect(d.outcome).toBe('delivered');
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(receiver.seen).toHaveLength(1);
  });
});

describe('job requests as large as the deliveries', () => {
  let receiver: Receiver;
  let sim: GatewaySimulator;
  beforeAll(async () => {
    receiver = await jobhookReceiver();
    sim = await startGatewaySimulator({ privateKey: privatePem(2048), delayMs: 0 });
  });
  afterAll(async () => {
    await sim.close();
    await receiver.close();
  });

  /** A job whose user_webhook_parameters make its delivery about `bytes` long. */
  async function sized(bytes: number, target: GatewaySimulator = sim) {
    const lines = Array.from({ length: Math.ceil(bytes / 100) }, (_, k) => ({
      n: k,
      text: 'Grüße aus Köln '.repeat(4),
      confidence: 1.0,
    }));
    // Written by hand to keep 1.0 (JSON.stringify writes 1).
    const parameters = JSON.stringify({ lines }).replace(/"confidence":1/g, '"confidence":1.0');
    const request = `{"model":"ocr/ocr_async/amazon","input":{},"webhook_receiver":${JSON.stringify(receiver.url)},"user_webhook_parameters":${parameters}}`;
    return { request, created: await createJob(target, request) };
  }

  it.each([2_000_000, 20_000_000])(
    'a %i-byte delivery: the request is taken (202) and the receiver processes the delivery',
    async (bytes) => {
      const { request, created } = await sized(bytes);
      expect(Buffer.byteLength(request)).toBeGreaterThan(1024 * 1024); // what the simulator refused before (413 past 1 MiB)
      expect(created.status).toBe(202);
      const d = await sim.waitForDelivery(created.json.public_id as string);
      expect(Buffer.byteLength(d.body!)).toBeGreaterThanOrEqual(bytes);
      expect(d.body).toContain('"confidence":1.0');
      expect(answers(d)).toEqual([['200 processed']]);
      expect(receiver.runs).toContain(d.jobId);
    },
    120_000,
  );

  it('past maxRequestBytes: 413, no job', async () => {
    const small = await startGatewaySimulator({
      privateKey: privatePem(2048),
      delayMs: 0,
      maxRequestBytes: 1_000_000,
    });
    try {
      const { created } = await sized(1_100_000, small);
      expect(created).toMatchObject({
        status: 413,
        json: { error: { message: 'The body is larger than 1000000 bytes' } },
      });
    } finally {
      await small.close();
    }
    await expect(startGatewaySimulator({ maxRequestBytes: 0 })).rejects.toThrow(
      'maxRequestBytes must be a whole number from 1',
    );
  });

  it('the wire bytes of a compressed delivery decode to the body reported, which verifies with the headers sent', async () => {
    const wire: Array<{ headers: Record<string, string | string[] | undefined>; bytes: Buffer }> = [];
    const target = await listen((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        wire.push({ headers: req.headers, bytes: Buffer.concat(chunks) });
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    const gz = await startGatewaySimulator({
      privateKey: privatePem(2048),
      delayMs: 0,
      delivery: { encoding: 'gzip' },
    });
    try {
      const id = (
        await createJob(gz, {
          model: 'ocr/ocr_async/amazon',
          input: {},
          webhook_receiver: `${target.url}/hook`,
        })
      ).json.public_id as string;
      const d = await gz.waitForDelivery(id);
      expect(d.outcome).toBe('delivered');
      expect(wire).toHaveLength(1);
      const decoded = gunzipSync(wire[0]!.bytes).toString('utf8');
      expect(decoded).toBe(d.body);
      expect(
        createVerifier({ publicKey: publicPem(2048) }).verify(
          decoded,
          wire[0]!.headers as Record<string, string>,
        ),
      ).toMatchObject({ jobId: id });
    } finally {
      await gz.close();
      await target.close();
    }
  });
});
