/**
 * Issue 12 §2: the gateway client, and the reconciler recovering completions whose
 * webhook never came, through the same claim as the webhook path. Real simulator,
 * real HTTP, real receivers; the memory store in-process, Redis across processes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import express from 'express';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createReceiver } from '../../src/express.js';
import { MemoryIdempotencyStore, type EventContext, type JobCompletedEvent } from '../../src/index.js';
import {
  createGatewayClient,
  createReconciler,
  GatewayNotFoundError,
  GatewayRejectedError,
  GatewayUnauthorizedError,
  GatewayUnavailableError,
} from '../../src/gateway.js';
import { RedisIdempotencyStore } from '../../src/redis.js';
import { startGatewaySimulator, type GatewaySimulator } from '../../src/testing.js';
import { privatePem } from '../helpers/keys.js';
import { ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/servers.js';
import { listen, type Listening } from '../tools/helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const quiet = { log: {} };

/** Counts handler runs per job, whichever path ran them. */
function tally() {
  const runs = new Map<string, Array<EventContext['source']>>();
  return {
    runs,
    onEvent: (event: JobCompletedEvent, context: EventContext) => {
      runs.set(event.job_id, [...(runs.get(event.job_id) ?? []), context.source]);
    },
    total: () => [...runs.values()].reduce((n, r) => n + r.length, 0),
  };
}

async function receiverOn(
  sim: GatewaySimulator,
  options: Omit<Parameters<typeof createReceiver>[0], 'publicKey'>,
): Promise<Listening & { hook: string }> {
  const app = express();
  app.post('/hook', createReceiver({ publicKey: sim.publicKey, ...quiet, ...options }));
  const l = await listen(app);
  return { ...l, hook: `${l.url}/hook` };
}

describe('gateway client', () => {
  let sim: GatewaySimulator;
  beforeAll(async () => {
    sim = await startGatewaySimulator({ privateKey: privatePem(2048), delayMs: 300 });
  });
  afterAll(() => sim.close());

  it('creates a job, records it as pending with its parameters, and reads it: processing, then success', async () => {
    const store = new MemoryIdempotencyStore();
    const client = createGatewayClient({ baseUrl: sim.url, token: sim.token, store });
    const job = await client.createJob({
      model: 'ocr/ocr_async/amazon',
      input: { file_url: 'https://example.com/a.pdf' },
      user_webhook_parameters: { order: 'A-17' },
    });
    expect(job).toMatchObject({
      status: 'processing',
      feature: 'ocr',
      subfeature: 'ocr_async',
      provider: 'amazon',
    });
    expect(await store.listPending({ before: Date.now() })).toEqual([
      { jobId: job.public_id, since: Date.parse(job.created_at!), userParameters: { order: 'A-17' } },
    ]);
    expect((await client.getJob(job.public_id)).status).toBe('processing');
    await sleep(400);
    expect(await client.getJob(job.public_id)).toMatchObject({
      public_id: job.public_id,
      status: 'success',
      output: { confidence: 1 },
    });
  });

  it('errors are coded, with the HTTP status', async () => {
    const client = createGatewayClient({ baseUrl: sim.url, token: sim.token });
    await expect(createGatewayClient({ baseUrl: sim.url, token: 'wrong' }).getJob('x')).rejects.toMatchObject(
      { code: 'GATEWAY_UNAUTHORIZED', status: 401 },
    );
    await expect(
      createGatewayClient({ baseUrl: sim.url, token: 'wrong' }).getJob('x'),
    ).rejects.toBeInstanceOf(GatewayUnauthorizedError);
    const rejected = client.createJob({ model: 'ocr', input: {} });
    await expect(rejected).rejects.toBeInstanceOf(GatewayRejectedError);
    await expect(rejected).rejects.toMatchObject({ code: 'GATEWAY_REJECTED', status: 422, field: 'model' });
    await expect(client.getJob('00000000-0000-4000-8000-000000000000')).rejects.toBeInstanceOf(
      GatewayNotFoundError,
    );
    const down = createGatewayClient({
      baseUrl: `http://127.0.0.1:${await freePort()}`,
      token: 't',
      timeoutMs: 1000,
    });
    await expect(down.getJob('x')).rejects.toBeInstanceOf(GatewayUnavailableError);
    expect(() => createGatewayClient({ baseUrl: 'not a url', token: 't' })).toThrow(TypeError);
  });
});

describe('reconciler', () => {
  it('100 jobs created while the receiver is down for longer than the retry window: runOnce() processes each exactly once', async () => {
    const sim = await startGatewaySimulator({
      privateKey: privatePem(2048),
      delayMs: 10,
      backoffMs: 10,
      maxBackoffMs: 40,
    });
    const store = new MemoryIdempotencyStore();
    const client = createGatewayClient({ baseUrl: sim.url, token: sim.token, store });
    const t = tally();
    // The receiver's address, with nothing listening yet.
    const port = await freePort();
    const ids: string[] = [];
    for (let k = 0; k < 100; k++) {
      const job = await client.createJob({
        model: 'ocr/ocr_async/amazon',
        input: { n: k },
        webhook_receiver: `http://127.0.0.1:${port}/hook`,
        user_webhook_parameters: { k },
      });
      ids.push(job.public_id);
    }
    const results = await Promise.all(ids.map((id) => sim.waitForDelivery(id)));
    expect(results.every((r) => r.outcome === 'gave-up' && r.attempts.length === 4)).toBe(true);
    expect(t.total()).toBe(0);

    // The receiver comes back (too late for the gateway), and the reconciler polls.
    const app = express();
    app.post('/hook', createReceiver({ publicKey: sim.publicKey, store, onEvent: t.onEvent, ...quiet }));
    const server = app.listen(port, '127.0.0.1');
    await once(server, 'listening');
    const reconciler = createReconciler({
      client,
      store,
      onEvent: t.onEvent,
      graceMs: 0,
      batchSize: 200,
      ...quiet,
    });
    const report = await reconciler.runOnce();
    expect(report).toMatchObject({ checked: 100, processed: 100, pending: 0, failed: 0, forgotten: [] });
    expect([...t.runs.keys()].sort()).toEqual([...ids].sort());
    expect([...t.runs.values()].every((r) => r.length === 1 && r[0] === 'poll')).toBe(true);
    // Nothing is left to poll.
    expect(await reconciler.runOnce()).toMatchObject({ checked: 0 });
    expect(await store.listPending({ before: Date.now() })).toEqual([]);
    expect(t.total()).toBe(100);
    await reconciler.stop();
    server.close();
    await sim.close();
  });

  it('hands the handler the same event the webhook would, user_parameters included, marked as polled', async () => {
    const sim = await startGatewaySimulator({ privateKey: privatePem(2048), delayMs: 10 });
    const store = new MemoryIdempotencyStore();
    const client = createGatewayClient({ baseUrl: sim.url, token: sim.token, store });
    const seen: Array<[JobCompletedEvent, EventContext]> = [];
    const ok = await client.createJob({
      model: 'ocr/ocr_async/amazon',
      input: {},
      user_webhook_parameters: { order: 'A-1' },
    });
    const failed = await client.createJob({ model: 'ocr/ocr_async/amazon', input: { simulate: 'fail' } });
    await sleep(80);
    const reconciler = createReconciler({
      client,
      store,
      onEvent: (e, c) => void seen.push([e, c]),
      graceMs: 0,
      ...quiet,
    });
    expect(await reconciler.runOnce()).toMatchObject({ processed: 2 });
    const byId = new Map(seen.map(([e, c]) => [e.job_id, { e, c }]));
    const s = byId.get(ok.public_id)!;
    expect(s.c.source).toBe('poll');
    expect(s.e).toMatchObject({
      event: 'async_job_completed',
      status: 'success',
      feature: 'ocr',
      user_parameters: { order: 'A-1' },
    });
    const f = byId.get(failed.public_id)!;
    expect(f.e.status === 'fail' && f.e.error.message).toMatch(/\w/);
    await reconciler.stop();
    await sim.close();
  });

  it('jobs still processing stay pending; jobs the gateway does not know (404 in three rounds) are reported and dropped; a failing handler is retried next round', async () => {
    const sim = await startGatewaySimulator({ privateKey: privatePem(2048), delayMs: 60_000 });
    const store = new MemoryIdempotencyStore();
    const client = createGatewayClient({ baseUrl: sim.url, token: sim.token, store });
    const slow = await client.createJob({ model: 'ocr/ocr_async/amazon', input: {} });
    const dead = '00000000-0000-4000-8000-00000000dead';
    await store.trackPending(dead, { since: 1 });
    const errors: string[] = [];
    const reconciler = createReconciler({
      client,
      store,
      onEvent: () => undefined,
      graceMs: 0,
      log: { warn: (m) => void errors.push(m) },
    });
    // A job just created may not be visible everywhere yet: two 404s keep it.
    expect(await reconciler.runOnce()).toMatchObject({ checked: 2, processed: 0, pending: 2, forgotten: [] });
    expect(await reconciler.runOnce()).toMatchObject({ checked: 2, processed: 0, pending: 2, forgotten: [] });
    expect(await reconciler.runOnce()).toMatchObject({
      checked: 2,
      processed: 0,
      pending: 1,
      forgotten: [dead],
    });
    expect(errors.join('\n')).toContain(`does not know pending job ${dead} (404 in 3 rounds)`);
    expect((await store.listPending({ before: Date.now() })).map((p) => p.jobId)).toEqual([slow.public_id]);
    await reconciler.stop();
    await sim.close();

    // A handler that throws: the job stays pending, and the next round runs it again.
    const quick = await startGatewaySimulator({ privateKey: privatePem(2048), delayMs: 5 });
    const client2 = createGatewayClient({ baseUrl: quick.url, token: quick.token, store });
    const job = await client2.createJob({ model: 'ocr/ocr_async/amazon', input: {} });
    await sleep(50);
    let calls = 0;
    const flaky = createReconciler({
      client: client2,
      store,
      graceMs: 0,
      ...quiet,
      onEvent: (e) => {
        if (e.job_id !== job.public_id) return;
        calls++;
        if (calls === 1) throw new Error('database down');
      },
    });
    await store.forgetPending(slow.public_id);
    expect(await flaky.runOnce()).toMatchObject({ processed: 0, failed: 1 });
    expect(await flaky.runOnce()).toMatchObject({ processed: 1, failed: 0 });
    expect(calls).toBe(2);
    await flaky.stop();
    await quick.close();
  });

  it('more unfinished jobs than batchSize do not keep a finished one from being polled: each polled job goes back behind the others', async () => {
    const slowSim = await startGatewaySimulator({ privateKey: privatePem(2048), delayMs: 60_000 });
    const quickSim = await startGatewaySimulator({ privateKey: privatePem(2048), delayMs: 5 });
    const store = new MemoryIdempotencyStore();
    const slowClient = createGatewayClient({ baseUrl: slowSim.url, token: slowSim.token, store });
    const quickClient = createGatewayClient({ baseUrl: quickSim.url, token: quickSim.token, store });
    const slowIds = new Set<string>();
    for (let k = 1; k <= 5; k++) {
      const job = await slowClient.createJob({ model: 'ocr/ocr_async/amazon', input: {} });
      slowIds.add(job.public_id);
      await store.trackPending(job.public_id, { since: k }); // the oldest
    }
    const finished = await quickClient.createJob({ model: 'ocr/ocr_async/amazon', input: {} });
    await store.trackPending(finished.public_id, { since: 100 });
    await sleep(50);
    // Both simulators are real gateways; each job is read from the one that made it.
    const client = { getJob: (id: string) => (slowIds.has(id) ? slowClient : quickClient).getJob(id) };
    const t = tally();
    const reconciler = createReconciler({
      client,
      store,
      graceMs: 0,
      batchSize: 2,
      ...quiet,
      onEvent: t.onEvent,
    });
    const reports = [];
    for (let round = 0; round < 3; round++) reports.push(await reconciler.runOnce());
    expect(reports.map((r) => [r.checked, r.pending, r.processed])).toEqual([
      [2, 2, 0],
      [2, 2, 0],
      [2, 1, 1],
    ]);
    expect(t.runs.get(finished.public_id)).toEqual(['poll']);
    // The five still processing are all still pending, none forgotten.
    expect((await store.listPending({ before: Date.now() })).map((p) => p.jobId).sort()).toEqual(
      [...slowIds].sort(),
    );
    await reconciler.stop();
    await slowSim.close();
    await quickSim.close();
  });

  it('webhook and poll racing for 50 jobs: 50 handler runs, one per job', async () => {
    const sim = await startGatewaySimulator({ privateKey: privatePem(2048), delayMs: 20, backoffMs: 20 });
    const store = new MemoryIdempotencyStore();
    const client = createGatewayClient({ baseUrl: sim.url, token: sim.token, store });
    const t = tally();
    const slowHandler = async (e: JobCompletedEvent, c: EventContext) => {
      await sleep(Math.random() * 20);
      t.onEvent(e, c);
    };
    const receiver = await receiverOn(sim, { store, onEvent: slowHandler });
    const reconciler = createReconciler({
      client,
      store,
      onEvent: slowHandler,
      graceMs: 0,
      concurrency: 8,
      batchSize: 100,
      ...quiet,
    });
    const ids = await Promise.all(
      Array.from(
        { length: 50 },
        async () =>
          (
            await client.createJob({
              model: 'ocr/ocr_async/amazon',
              input: {},
              webhook_receiver: receiver.hook,
            })
          ).public_id,
      ),
    );
    // Poll hard while the webhooks arrive.
    let polling = true;
    const poller = (async () => {
      while (polling) {
        await reconciler.runOnce();
        await sleep(5);
      }
    })();
    await Promise.all(ids.map((id) => sim.waitForDelivery(id)));
    await sleep(100);
    polling = false;
    await poller;
    await reconciler.runOnce();
    expect(t.total()).toBe(50);
    expect(ids.every((id) => t.runs.get(id)?.length === 1)).toBe(true);
    expect(await store.listPending({ before: Date.now() })).toEqual([]);
    await reconciler.stop();
    await receiver.close();
    await sim.close();
  });
});

describe.skipIf(inject('redisUrl') === '')('a receiver process killed in the middle of a handler', () => {
  const children: ChildProcess[] = [];
  afterAll(() => {
    for (const c of children) c.kill('SIGKILL');
  });

  /** A receiver in its own process (Redis store), printing "start <id>" and "done <id>"; it hangs on `hang`. */
  function receiverProcess(
    port: number,
    publicKeyPem: string,
    hang: string,
  ): { child: ChildProcess; lines: string[]; ready: Promise<void> } {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(ROOT, 'test', 'helpers', 'receiver-process.ts')],
      {
        env: {
          ...process.env,
          PORT: String(port),
          REDIS_URL: inject('redisUrl'),
          PUBLIC_KEY: publicKeyPem,
          HANG_JOB: hang,
          KEY_PREFIX: `killed-${process.pid}:`,
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    children.push(child);
    const lines: string[] = [];
    let readyResolve!: () => void;
    const ready = new Promise<void>((r) => (readyResolve = r));
    let buffer = '';
    child.stdout!.on('data', (c: Buffer) => {
      buffer += c.toString();
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        lines.push(line);
        if (line === 'listening') readyResolve();
      }
    });
    return { child, lines, ready };
  }

  it('the gateway retries into the restarted receiver once the lease runs out: processed exactly once', async () => {
    const sim = await startGatewaySimulator({
      privateKey: privatePem(2048),
      delayMs: 50,
      backoffMs: 500,
      maxBackoffMs: 2000,
    });
    const store = new RedisIdempotencyStore({
      url: inject('redisUrl'),
      keyPrefix: `killed-${process.pid}:`,
      pendingKey: `killed-pending-${process.pid}`,
      ...quiet,
    });
    const client = createGatewayClient({ baseUrl: sim.url, token: sim.token, store });
    const port = await freePort();
    // The first process hangs in the handler of the first job it gets.
    const first = receiverProcess(port, sim.publicKey, '*');
    await first.ready;
    const job = await client.createJob({
      model: 'ocr/ocr_async/amazon',
      input: {},
      webhook_receiver: `http://127.0.0.1:${port}/hook`,
    });
    while (!first.lines.includes(`start ${job.public_id}`)) await sleep(10);
    first.child.kill('SIGKILL');
    await once(first.child, 'exit');
    const second = receiverProcess(port, sim.publicKey, '');
    await second.ready;
    const delivered = await sim.waitForDelivery(job.public_id);
    // Then, whatever the gateway managed, the reconciler finishes the job if it is still pending.
    const reconciler = createReconciler({ client, store, onEvent: () => undefined, graceMs: 0, ...quiet });
    const report = await reconciler.runOnce();
    const done =
      [...first.lines, ...second.lines].filter((l) => l === `done ${job.public_id}`).length +
      report.processed;
    expect(first.lines).not.toContain(`done ${job.public_id}`);
    expect(done).toBe(1);
    // Usually the gateway's own retry got it (the lease is 1 s, its retries come 0.5, 1.5 and 3.5 s later).
    expect(['delivered', 'gave-up']).toContain(delivered.outcome);
    await reconciler.stop();
    await store.close();
    await sim.close();
  }, 30_000);
});
