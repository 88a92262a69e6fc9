/**
 * jobhook/bullmq on a real Redis (a throwaway server of this file, so it can be paused):
 * the handler adds each verified event under a job id derived from job_id and returns
 * only after Redis acknowledged it; Redis paused → 5xx, never 2xx; the worker runs the
 * user's function through the job runner, once per job.
 */
import express from 'express';
import { Queue, QueueEvents, type Job } from 'bullmq';
import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobRunner, MemoryIdempotencyStore, type JobCompletedEvent } from '../../src/index.js';
import { createReceiver } from '../../src/express.js';
import {
  bullmqJobId,
  createBullMQHandler,
  createBullMQWorker,
  DEFAULT_QUEUE_RETAIN_MS,
  workKey,
  type QueuedEventContext,
} from '../../src/bullmq.js';
import { availability, startRedis, type FaultableServer } from '../helpers/servers.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';

const redis = availability('redis', 'queue tests');
if (redis.skip) console.warn(`\n[jobhook] ${redis.reason}\n`);
const publicKey = publicPem(2048);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Percent-decoding: what bullmqJobId must invert. */
const decode = (id: string) =>
  id.replace(/%([0-9A-F]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));

describe('bullmqJobId', () => {
  it('keeps a UUID and any id BullMQ accepts as it is; encodes % and :, and the first character of an integer-looking id', () => {
    expect(bullmqJobId('3f1c2b9e-6a1d-4e9b-9f1e-2a7c5d8e0b41')).toBe('3f1c2b9e-6a1d-4e9b-9f1e-2a7c5d8e0b41');
    expect(bullmqJobId('a:b')).toBe('a%3Ab');
    expect(bullmqJobId('100%')).toBe('100%25');
    expect(bullmqJobId('42')).toBe('%342');
    expect(bullmqJobId('-7')).toBe('%2D7');
    expect(bullmqJobId('0')).toBe('%30');
    expect(bullmqJobId('042')).toBe('042'); // parseInt gives "42": not what BullMQ refuses
    expect(bullmqJobId('Grüße')).toBe('Grüße');
  });

  it('is one-to-one: percent-decoding gives the job_id back, for ids made of the characters that matter', () => {
    const alphabet = ['%', ':', '0', '1', '-', 'a', '3', 'A', '2', 'é'];
    const seen = new Map<string, string>();
    const wrong: string[] = [];
    // Every id of up to 4 characters over the alphabet: 11,110 ids.
    const walk = (prefix: string) => {
      if (prefix.length > 0) {
        const id = bullmqJobId(prefix);
        if (
          decode(id) !== prefix ||
          id.includes(':') ||
          `${parseInt(id, 10)}` === id ||
          (seen.get(id) ?? prefix) !== prefix
        )
          wrong.push(`${prefix} → ${id}`);
        seen.set(id, prefix);
      }
      if (prefix.length < 4) for (const c of alphabet) walk(prefix + c);
    };
    walk('');
    expect(wrong).toEqual([]);
    expect(seen.size).toBe(11_110);
  });
});

describe('createBullMQHandler: options', () => {
  const queue = { name: 'q', add: async () => ({ id: 'x' }) };
  it('refuses a retention shorter than the gateway retries, a timeout of 30 s or more, jobId, and removeOnComplete that forgets jobs sooner', () => {
    expect(() => createBullMQHandler(queue, { retainMs: 60_000 })).toThrow(
      /retainMs must be at least 210000 ms/,
    );
    expect(() => createBullMQHandler(queue, { timeoutMs: 30_000 })).toThrow(
      /timeoutMs must be less than 30,000 ms/,
    );
    expect(() => createBullMQHandler(queue, { jobOptions: { jobId: 'x' } as never })).toThrow(
      /jobId is set by jobhook/,
    );
    expect(() => createBullMQHandler(queue, { jobOptions: { removeOnComplete: true } })).toThrow(
      /removeOnComplete is true .*Use \{ age: 300 \}/,
    );
    expect(() => createBullMQHandler(queue, { jobOptions: { removeOnComplete: 1000 } })).toThrow(
      /removeOnComplete is 1000 \(a count/,
    );
    expect(() => createBullMQHandler(queue, { jobOptions: { removeOnComplete: { age: 60 } } })).toThrow(
      /removeOnComplete is \{ age: 60 \}/,
    );
    expect(() =>
      createBullMQHandler(queue, { jobOptions: { removeOnComplete: { age: 600 } } }),
    ).not.toThrow();
    expect(() => createBullMQHandler({} as never)).toThrow(TypeError);
    expect(DEFAULT_QUEUE_RETAIN_MS).toBe(300_000);
  });
});

describe.skipIf(redis.skip)('jobhook/bullmq on a real Redis', () => {
  let server: FaultableServer;
  let connection: { host: string; port: number };
  const queues: Queue[] = [];
  const closers: Array<() => Promise<unknown>> = [];
  const newQueue = (name = `q-${jobId('bull')}`, extra: Record<string, unknown> = {}) => {
    const q = new Queue(name, { connection: { ...connection, ...extra } });
    q.on('error', () => undefined);
    queues.push(q);
    return q;
  };

  beforeAll(async () => {
    server = await startRedis({ appendOnly: true });
    const url = new URL(server.url);
    connection = { host: url.hostname, port: Number(url.port) };
  });
  afterAll(async () => {
    for (const close of closers) await close().catch(() => undefined);
    for (const q of queues) await q.close().catch(() => undefined);
    await server?.destroy();
  });

  const app = (
    onEvent: ReturnType<typeof createBullMQHandler>,
    options: { store?: MemoryIdempotencyStore; onError?: (e: unknown, c: { stage: string }) => void } = {},
  ) => {
    const a = express();
    a.post('/hook', createReceiver({ publicKey, log: {}, onEvent, ...options }));
    return a;
  };
  const post = (a: express.Express, d: { body: string; headers: Record<string, string> }) =>
    supertest(a).post('/hook').set(d.headers).send(d.body);

  it('adds the verified event under its job id, acknowledged before the 200; a second add of the job (another receiver) keeps one job', async () => {
    const queue = newQueue();
    const handler = createBullMQHandler(queue);
    // Two receivers with stores of their own: both call the handler, BullMQ keeps one job.
    const [a, b] = [app(handler), app(handler)];
    const id = jobId('bull:dedup');
    const d = signed(id);
    const first = await post(a, d);
    expect(first.status).toBe(200);
    // The 200 came after Redis took it: the job is there now.
    const job = await queue.getJob(bullmqJobId(id));
    expect(job?.id).toBe(bullmqJobId(id));
    expect(job?.name).toBe('async_job_completed');
    expect((job?.data as JobCompletedEvent).job_id).toBe(id);
    expect((job?.data as { output: { confidence: number } }).output.confidence).toBe(1);
    expect(job?.opts.removeOnComplete).toEqual({ age: 300 });
    expect(job?.opts.attempts).toBe(5);
    expect((await post(b, d)).status).toBe(200);
    expect((await post(a, d)).body).toEqual({ status: 'duplicate', job_id: id });
    expect(await queue.getJobCounts('waiting')).toEqual({ waiting: 1 });
  });

  it('job ids BullMQ refuses as they are (":", integers) are added under their encoded ids, each its own job', async () => {
    const queue = newQueue();
    const a = app(createBullMQHandler(queue));
    const ids = ['42', '0', '-1', 'a:b', 'a%3Ab', 'x:y:z', '%34%32'];
    for (const id of ids) expect((await post(a, signed(id))).status).toBe(200);
    const jobs = await queue.getJobs(['waiting']);
    expect(jobs.map((j) => (j.data as JobCompletedEvent).job_id).sort()).toEqual([...ids].sort());
    for (const j of jobs) expect(j.id).toBe(bullmqJobId((j.data as JobCompletedEvent).job_id));
  });

  it('Redis paused: the receiver answers 5xx (the add unacknowledged within timeoutMs), never 2xx; the retry after it resumes adds the job once', async () => {
    const queue = newQueue();
    const errors: unknown[] = [];
    const a = app(createBullMQHandler(queue, { timeoutMs: 300 }), { onError: (e) => void errors.push(e) });
    const id = jobId('paused');
    const d = signed(id);
    await server.pause();
    let answer;
    try {
      answer = await post(a, d);
    } finally {
      await server.resume();
    }
    // Today a throwing onEvent is answered 500 HANDLER_FAILED (retried by the gateway like a 503).
    expect([500, 503]).toContain(answer.status);
    expect(errors[0]).toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect(String((errors[0] as Error).message)).toMatch(/no acknowledgement within 300 ms/);
    // The add sent while Redis was paused lands when it resumes; the retry's add finds it.
    expect((await post(a, d)).status).toBe(200);
    await sleep(50);
    expect(await queue.getJobCounts('waiting')).toEqual({ waiting: 1 });
  });

  it('the worker runs the function once per job through the runner; a finished job added again is a duplicate for the worker', async () => {
    const queue = newQueue();
    const handler = createBullMQHandler(queue, { retainMs: 210_000 });
    const store = new MemoryIdempotencyStore();
    const runs = new Map<string, number>();
    const contexts: QueuedEventContext[] = [];
    let failOnce = true;
    const worker = createBullMQWorker(
      queue.name,
      {
        store,
        log: {},
        onEvent: async (event, context) => {
          if (event.job_id.startsWith('w-flaky') && failOnce) {
            failOnce = false;
            throw new Error('transient');
          }
          contexts.push(context);
          runs.set(event.job_id, (runs.get(event.job_id) ?? 0) + 1);
        },
      },
      { connection, concurrency: 4 },
    );
    closers.push(() => worker.close());
    const events = new QueueEvents(queue.name, { connection });
    closers.push(() => events.close());
    await events.waitUntilReady();
    const ids = Array.from({ length: 20 }, (_, i) => jobId(i === 0 ? 'w-flaky' : 'w'));
    const a = app(handler);
    for (const id of ids) expect((await post(a, signed(id))).status).toBe(200);
    const deadline = Date.now() + 15_000;
    while (((await queue.getJobCounts('completed')).completed ?? 0) < ids.length && Date.now() < deadline)
      await sleep(50);
    expect(await queue.getJobCounts('completed', 'failed')).toEqual({ completed: ids.length, failed: 0 });
    expect([...runs.values()].every((n) => n === 1) && runs.size === ids.length).toBe(true);
    const flaky = (await queue.getJob(bullmqJobId(ids[0]!))) as Job;
    expect(flaky.attemptsMade).toBe(2); // one failed, one completed
    expect(flaky.returnvalue).toBe('processed');
    expect(contexts.find((c) => c.jobId === ids[0])).toMatchObject({ source: 'queue', delivery: 2 });
    // The worker's completion is under work:<job_id>: the receivers' completion of <job_id> is another record.
    expect(await store.claim(workKey(ids[1]!), { leaseMs: 1000 })).toEqual({ status: 'completed' });
    // The finished job removed (as removeOnComplete does after retainMs) and added again: the worker answers it as a duplicate.
    await (await queue.getJob(bullmqJobId(ids[1]!)))!.remove();
    await handler(undefined as never, { jobId: ids[1]!, payload: JSON.parse(signed(ids[1]!).body) });
    while (((await queue.getJobCounts('completed')).completed ?? 0) < ids.length && Date.now() < deadline)
      await sleep(50);
    expect((await queue.getJob(bullmqJobId(ids[1]!)))?.returnvalue).toBe('duplicate');
    expect(runs.get(ids[1]!)).toBe(1);
  });

  it('a queued message that is not a jobhook event fails for good and is reported', async () => {
    const queue = newQueue();
    const reported: Array<{ stage: string }> = [];
    const worker = createBullMQWorker(
      queue.name,
      {
        runner: createJobRunner({ log: {}, onError: (_e, c) => void reported.push(c) }),
        onEvent: () => undefined,
      },
      { connection },
    );
    closers.push(() => worker.close());
    await queue.add('async_job_completed', { event: 'something_else', job_id: 'x' }, { jobId: 'x' });
    const deadline = Date.now() + 10_000;
    while (((await queue.getJobCounts('failed')).failed ?? 0) < 1 && Date.now() < deadline) await sleep(50);
    const job = await queue.getJob('x');
    expect(job?.failedReason).toMatch(
      /not a jobhook event: the queued message is not an async_job_completed event/,
    );
    expect(job?.attemptsMade).toBe(1);
    expect(reported).toEqual([{ stage: 'body', jobId: 'x' }]);
  });
});
