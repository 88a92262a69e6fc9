import express from 'express';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createReceiver, type ExpressReceiverOptions, type NodeHandler } from '../../../src/express.js';
import { canonicalize, createVerifier, DIALECTS, type JobCompletedEvent } from '../../../src/index.js';
import { startGatewaySimulator, SIMULATOR_USER_AGENT, type GatewaySimulator } from '../../../src/testing.js';
import { privatePem } from '../../helpers/keys.js';
import { createJob, getJob, listen, pollUntilDone, scripted, type Hit, type Listening } from '../helpers.js';

// The end-to-end block lets the simulator make its own key; the others take a fixture key (faster).
const privateKey = privatePem(2048);

/** The one place receivers are made. */
function makeReceiver(options: ExpressReceiverOptions): NodeHandler {
  return createReceiver({ log: {}, ...options });
}

describe('simulator → jobhook Express receiver, end to end', () => {
  let sim: GatewaySimulator;
  let app: Listening;
  const events: JobCompletedEvent[] = [];
  const seen: Hit[] = [];

  beforeAll(async () => {
    // 300 ms: long enough for the first poll to find the job still processing on a busy machine.
    sim = await startGatewaySimulator({ delayMs: 300, backoffMs: 20 });
    const server = express();
    server.post(
      '/webhooks/gateway',
      (req, _res, next) => {
        seen.push({ at: performance.now(), headers: req.headers, body: '' });
        next();
      },
      makeReceiver({ publicKey: sim.publicKey, onEvent: (event) => void events.push(event) }),
    );
    app = await listen(server);
  });
  afterAll(async () => {
    await sim.close();
    await app.close();
  });

  const receiver = () => `${app.url}/webhooks/gateway`;
  const eventFor = (id: string) => events.find((e) => e.job_id === id);

  it('creates a job (202), polls processing then success, and the receiver gets the verified event with user_parameters', async () => {
    // A raw request body: 1.0 in user_webhook_parameters must come back as 1.0.
    const created = await createJob(
      sim,
      `{"model":"ocr/ocr_async/amazon","input":{"file_url":"https://example.com/a.pdf"},"webhook_receiver":${JSON.stringify(receiver())},"user_webhook_parameters":{"order":"A-17","weight":1.0,"tags":["ü"]}}`,
    );
    expect(created.status).toBe(202);
    expect(created.json).toMatchObject({
      status: 'processing',
      feature: 'ocr',
      subfeature: 'ocr_async',
      provider: 'amazon',
      model: null,
      cost: '0.0015',
    });
    const id = created.json.public_id as string;
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(Date.parse(created.json.created_at as string)).not.toBeNaN();
    expect((await getJob(sim, id)).json.status).toBe('processing');

    const done = await pollUntilDone(sim, id);
    expect(done.status).toBe(200);
    expect(done.json).toMatchObject({ public_id: id, status: 'success', output: { confidence: 1 } });
    expect(done.text).toContain('"confidence":1.0');
    expect(done.json).not.toHaveProperty('error');
    expect(done.json).not.toHaveProperty('original_response');

    const delivery = await sim.waitForDelivery(id);
    expect(delivery).toMatchObject({
      jobId: id,
      url: receiver(),
      outcome: 'delivered',
      attempts: [{ attempt: 1, status: 200, outcome: 'delivered', answer: 'processed' }],
    });
    const event = eventFor(id)!;
    expect(event).toMatchObject({
      event: 'async_job_completed',
      job_id: id,
      status: 'success',
      feature: 'ocr',
      subfeature: 'ocr_async',
      provider: 'amazon',
      model: null,
      created_at: created.json.created_at,
      user_parameters: { order: 'A-17', weight: 1, tags: ['ü'] },
    });
    expect(Date.parse(event.finished_at!)).toBeGreaterThanOrEqual(Date.parse(event.created_at!));
    expect(event).not.toHaveProperty('original_response');
    expect(event).not.toHaveProperty('error');
  });

  it("sends the gateway's headers and a body whose floats are written as Python writes them", async () => {
    const id = (
      await createJob(sim, {
        model: 'ocr/ocr_async/google/document-ai',
        input: {},
        webhook_receiver: receiver(),
      })
    ).json.public_id as string;
    const delivery = await sim.waitForDelivery(id);
    const hit = seen.at(-1)!;
    expect(hit.headers).toMatchObject({
      'content-type': 'application/json',
      'user-agent': SIMULATOR_USER_AGENT,
      'x-service-webhook': 'true',
      'x-service-hash-algorithm': 'SHA256',
    });
    expect(hit.headers['x-service-signature']).toMatch(/^[0-9a-f]{512}$/);
    const body = delivery.body!;
    expect(body).toContain('"confidence":1.0');
    expect(body).toContain('"left":0.0');
    expect(body).toMatch(/東京|📄/);
    expect(JSON.parse(body)).toMatchObject({ model: 'document-ai' });
    // What a naive receiver rebuilds is not what was signed.
    expect(canonicalize(JSON.stringify(JSON.parse(body)))).not.toBe(canonicalize(body));
    expect(eventFor(id)).not.toHaveProperty('user_parameters');
  });

  it('input.simulate "fail" → the job fails: polling shows fail with error.message, the event has no output', async () => {
    const id = (
      await createJob(sim, {
        model: 'audio/speech_to_text_async/deepgram',
        input: { simulate: 'fail' },
        webhook_receiver: receiver(),
      })
    ).json.public_id as string;
    const done = await pollUntilDone(sim, id);
    expect(done.json).toMatchObject({
      status: 'fail',
      error: { message: expect.stringContaining('simulated failure') },
      cost: '0',
    });
    expect(done.json).not.toHaveProperty('output');
    await sim.waitForDelivery(id);
    const event = eventFor(id)!;
    expect(event).toMatchObject({
      status: 'fail',
      error: { message: done.json.error && (done.json.error as { message: string }).message },
    });
    expect(event).not.toHaveProperty('output');
  });

  it('original_response only when show_original_response is true', async () => {
    const asked = (
      await createJob(sim, {
        model: 'image/object_detection/amazon',
        input: {},
        show_original_response: true,
        webhook_receiver: receiver(),
      })
    ).json.public_id as string;
    const notAsked = (
      await createJob(sim, {
        model: 'image/object_detection/amazon',
        input: {},
        show_original_response: false,
        webhook_receiver: receiver(),
      })
    ).json.public_id as string;
    await Promise.all([sim.waitForDelivery(asked), sim.waitForDelivery(notAsked)]);
    expect(eventFor(asked)).toMatchObject({
      status: 'success',
      original_response: { Labels: expect.any(Array) },
    });
    expect(eventFor(notAsked)).not.toHaveProperty('original_response');
    expect((await getJob(sim, asked)).json).toHaveProperty('original_response');
    expect((await getJob(sim, notAsked)).json).not.toHaveProperty('original_response');
  });

  it('gives every feature a realistic output that verifies', async () => {
    for (const model of [
      'ocr/ocr_async/amazon',
      'audio/speech_to_text_async/deepgram',
      'image/object_detection/google',
      'video/label_detection_async/google',
      'translation/automatic_translation/deepl',
    ]) {
      const id = (await createJob(sim, { model, input: { text: 'Hello' }, webhook_receiver: receiver() }))
        .json.public_id as string;
      expect((await sim.waitForDelivery(id)).outcome, model).toBe('delivered');
      expect(eventFor(id), model).toMatchObject({ status: 'success', feature: model.split('/')[0] });
    }
  });

  it('a job without webhook_receiver completes and is not delivered', async () => {
    const id = (await createJob(sim, { model: 'ocr/ocr_async/amazon', input: {} })).json.public_id as string;
    expect((await pollUntilDone(sim, id)).json.status).toBe('success');
    await expect(sim.waitForDelivery(id)).rejects.toThrow(/no webhook_receiver/);
    await expect(sim.waitForDelivery('no-such-job')).rejects.toThrow(/No job/);
  });
});

describe('dialects and header names', () => {
  it.each(DIALECTS)('signs in the %s dialect and writes the body in that sender’s style', async (dialect) => {
    const sim = await startGatewaySimulator({
      dialect,
      privateKey,
      delayMs: 0,
      signatureHeader: 'X-Acme-Signature',
      algorithmHeader: 'X-Acme-Hash-Algorithm',
      webhookHeader: 'X-Acme-Webhook',
    });
    const target = await scripted([200]);
    try {
      const id = (
        await createJob(sim, {
          model: 'ocr/ocr_async/amazon',
          input: {},
          webhook_receiver: `${target.url}/hook`,
          user_webhook_parameters: { n: 1 },
        })
      ).json.public_id as string;
      const d = await sim.waitForDelivery(id);
      expect(target.hits[0]!.headers).toMatchObject({
        'x-acme-webhook': 'true',
        'x-acme-hash-algorithm': 'SHA256',
      });
      expect(target.hits[0]!.body).toBe(d.body);
      const verifier = createVerifier({
        publicKey: sim.publicKey,
        dialects: [dialect],
        signatureHeader: 'X-Acme-Signature',
        algorithmHeader: 'X-Acme-Hash-Algorithm',
      });
      expect(verifier.verify(d.body!, target.hits[0]!.headers)).toMatchObject({ dialect, jobId: id });
      if (dialect === 'python') expect(d.body).toMatch(/"confidence": 1\.0, .*\\u00df/);
      else if (dialect === 'python-utf8') expect(d.body).toMatch(/"confidence": 1\.0, .*ß/);
      else expect(d.body).toMatch(/"confidence":1\.0,.*ß/);
    } finally {
      await sim.close();
      await target.close();
    }
  });
});

describe('delivery retries follow the gateway policy', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0)) await c();
  });
  async function setUp(
    answers: ReadonlyArray<number | 'hang'>,
    options: Parameters<typeof startGatewaySimulator>[0] = {},
  ) {
    const target = await scripted(answers);
    const sim = await startGatewaySimulator({ privateKey, delayMs: 0, backoffMs: 40, ...options });
    cleanup.push(
      () => sim.close(),
      () => target.close(),
    );
    const id = (
      await createJob(sim, {
        model: 'ocr/ocr_async/amazon',
        input: {},
        webhook_receiver: `${target.url}/hook`,
      })
    ).json.public_id as string;
    return { sim, target, id };
  }

  it('503, 503, 200 → 3 attempts with growing delays, delivered', async () => {
    const { sim, target, id } = await setUp([503, 503, 200]);
    const d = await sim.waitForDelivery(id);
    expect(d.outcome).toBe('delivered');
    expect(d.attempts.map((a) => [a.attempt, a.status, a.outcome, a.delayMs])).toEqual([
      [1, 503, 'retry', 40],
      [2, 503, 'retry', 80],
      [3, 200, 'delivered', undefined],
    ]);
    expect(target.hits).toHaveLength(3);
    const [a, b, c] = target.hits.map((h) => h.at) as [number, number, number];
    expect(b - a).toBeGreaterThanOrEqual(35);
    expect(c - b).toBeGreaterThan(b - a);
    expect(sim.deliveries.filter((x) => x.jobId === id)).toEqual(d.attempts);
    // Every attempt carries the same signed bytes.
    expect(new Set(target.hits.map((h) => h.body + h.headers['x-service-signature'])).size).toBe(1);
  });

  it('400 → one attempt, not retried', async () => {
    const { sim, target, id } = await setUp([400, 200]);
    const d = await sim.waitForDelivery(id);
    expect(d).toMatchObject({
      outcome: 'rejected',
      attempts: [{ attempt: 1, status: 400, outcome: 'rejected' }],
    });
    expect(target.hits).toHaveLength(1);
  });

  it('a receiver that never answers is timed out and retried, then the simulator gives up', async () => {
    const { sim, target, id } = await setUp(['hang'], { attemptTimeoutMs: 100, backoffMs: 10, retries: 2 });
    const d = await sim.waitForDelivery(id);
    expect(d.outcome).toBe('gave-up');
    expect(d.attempts.map((a) => [a.error, a.outcome, a.delayMs])).toEqual([
      ['timed out after 100 ms', 'retry', 10],
      ['timed out after 100 ms', 'retry', 20],
      ['timed out after 100 ms', 'gave-up', undefined],
    ]);
    for (const a of d.attempts) expect(a.elapsedMs).toBeGreaterThanOrEqual(95);
    expect(target.hits).toHaveLength(3);
  });

  it('a connection error is retried; the backoff is capped', async () => {
    const gone = await listen(() => undefined);
    await gone.close(); // nothing listens on this port any more
    const sim = await startGatewaySimulator({ privateKey, delayMs: 0, backoffMs: 10, maxBackoffMs: 25 });
    cleanup.push(() => sim.close());
    const id = (
      await createJob(sim, { model: 'ocr/ocr_async/amazon', input: {}, webhook_receiver: `${gone.url}/hook` })
    ).json.public_id as string;
    const d = await sim.waitForDelivery(id);
    expect(d.outcome).toBe('gave-up');
    expect(d.attempts.map((a) => [a.error, a.delayMs])).toEqual([
      ['ECONNREFUSED', 10],
      ['ECONNREFUSED', 20],
      ['ECONNREFUSED', 25],
      ['ECONNREFUSED', undefined],
    ]);
  });

  it('close() cancels a pending completion and a delivery waiting to retry, promptly', async () => {
    const target = await scripted([503]);
    const sim = await startGatewaySimulator({ privateKey, delayMs: 0, backoffMs: 60_000 });
    cleanup.push(() => target.close());
    const retrying = (
      await createJob(sim, {
        model: 'ocr/ocr_async/amazon',
        input: {},
        webhook_receiver: `${target.url}/hook`,
      })
    ).json.public_id as string;
    await expect.poll(() => sim.deliveries.length).toBe(1);
    const slow = await startGatewaySimulator({ privateKey, delayMs: 60_000 });
    const pending = (
      await createJob(slow, {
        model: 'ocr/ocr_async/amazon',
        input: {},
        webhook_receiver: `${target.url}/hook`,
      })
    ).json.public_id as string;

    const t0 = performance.now();
    await Promise.all([sim.close(), slow.close()]);
    expect(await sim.waitForDelivery(retrying)).toMatchObject({
      outcome: 'cancelled',
      attempts: [{ status: 503, outcome: 'retry' }],
    });
    expect(await slow.waitForDelivery(pending)).toMatchObject({ outcome: 'cancelled', attempts: [] });
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(target.hits).toHaveLength(1);
    await sim.close(); // idempotent
    await expect(fetch(sim.jobsUrl)).rejects.toThrow();
  });
});
