/**
 * jobhook/nats on a real `nats-server -js` (a throwaway one of this file, file storage):
 * the handler checks the stream (subjects, duplicate_window), publishes with Nats-Msg-Id =
 * job_id and returns after the PubAck; JetStream paused → 5xx, never 2xx; the worker runs
 * the user's function through the job runner and acks only after it.
 */
import express from 'express';
import {
  AckPolicy,
  connect,
  headers as natsHeaders,
  RetentionPolicy,
  StorageType,
  type JetStreamManager,
  type NatsConnection,
} from 'nats';
import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobRunner, MemoryIdempotencyStore } from '../../src/index.js';
import { createReceiver } from '../../src/express.js';
import {
  createJetStreamHandler,
  createJetStreamWorker,
  subjectMatches,
  type QueuedEventContext,
} from '../../src/nats.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';
import type { FaultableServer } from '../helpers/servers.js';
import { natsAvailability, startNats } from './nats-server.js';

const nats = natsAvailability();
const publicKey = publicPem(2048);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const FIVE_MIN_NS = 300e9;

describe('subjectMatches', () => {
  it('matches NATS subjects: * one token, > one or more', () => {
    expect(subjectMatches('a.b', 'a.b')).toBe(true);
    expect(subjectMatches('a.*', 'a.b')).toBe(true);
    expect(subjectMatches('a.*', 'a.b.c')).toBe(false);
    expect(subjectMatches('a.>', 'a.b.c')).toBe(true);
    expect(subjectMatches('a.>', 'a')).toBe(false);
    expect(subjectMatches('a.b', 'a.c')).toBe(false);
    expect(subjectMatches('>', 'x')).toBe(true);
  });
});

describe.skipIf(nats.skip)('jobhook/nats on a real nats-server -js', () => {
  let server: FaultableServer;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let n = 0;
  const closers: Array<() => Promise<unknown>> = [];

  beforeAll(async () => {
    server = await startNats();
    nc = await connect({ servers: server.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    jsm = await nc.jetstreamManager();
  });
  afterAll(async () => {
    for (const close of closers) await close().catch(() => undefined);
    await nc?.close().catch(() => undefined);
    await server?.destroy();
  });

  /** A fresh stream on `subject`, file storage, duplicate window `windowNs` (default 5 min). */
  const stream = async (windowNs = FIVE_MIN_NS, retention = RetentionPolicy.Limits) => {
    const name = `S${n++}_${process.pid}`;
    const subject = `gateway.${name}`;
    await jsm.streams.add({
      name,
      subjects: [`${subject}.>`, subject],
      storage: StorageType.File,
      duplicate_window: windowNs,
      retention,
    });
    return { name, subject };
  };
  const messages = async (name: string) => {
    const info = await jsm.streams.info(name);
    const out: Array<{ id: string | undefined; jobId: string }> = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
      const m = await jsm.streams.getMessage(name, { seq });
      out.push({ id: m.header.get('Nats-Msg-Id'), jobId: (m.json() as { job_id: string }).job_id });
    }
    return out;
  };
  const app = (onEvent: ReturnType<typeof createJetStreamHandler>, onError?: (e: unknown) => void) => {
    const a = express();
    a.post('/hook', createReceiver({ publicKey, log: {}, onEvent, ...(onError ? { onError } : {}) }));
    return a;
  };
  const post = (a: express.Express, d: { body: string; headers: Record<string, string> }) =>
    supertest(a).post('/hook').set(d.headers).send(d.body);

  it('refuses bad options at once (TypeError)', () => {
    const js = nc.jetstream();
    expect(() => createJetStreamHandler(js, { subject: '', stream: 'S' })).toThrow(
      /subject must be a non-empty NATS name/,
    );
    expect(() => createJetStreamHandler(js, { subject: 'a', stream: 'S', retainMs: 120_000 })).toThrow(
      /retainMs must be at least 210000 ms/,
    );
    expect(() => createJetStreamHandler({} as never, { subject: 'a', stream: 'S' })).toThrow(
      /js must be a JetStream client/,
    );
  });

  it("checks the stream at construction: JetStream's default 2 min duplicate_window, a missing stream or an uncaptured subject is refused by name, and nothing is published", async () => {
    const js = nc.jetstream();
    const short = await stream(120e9);
    const h = createJetStreamHandler(js, { subject: short.subject, stream: short.name });
    await expect(h.ready).rejects.toThrow(TypeError);
    await expect(h.ready).rejects.toThrow(
      new RegExp(
        `"${short.name}" drops a repeated Nats-Msg-Id for 120 s \\(duplicate_window\\), less than the 300 s`,
      ),
    );
    await expect(h.ready).rejects.toThrow(/--dupe-window 5m/);
    await expect(createJetStreamHandler(js, { subject: 'x.y', stream: 'NO_SUCH' }).ready).rejects.toThrow(
      /JetStream has no stream "NO_SUCH" \(the stream option\)/,
    );
    // A stream in memory: its PubAck does not survive a restart of nats-server.
    const volatile = `M${n++}_${process.pid}`;
    await jsm.streams.add({
      name: volatile,
      subjects: [`gateway.${volatile}`],
      storage: StorageType.Memory,
      duplicate_window: FIVE_MIN_NS,
    });
    await expect(
      createJetStreamHandler(js, { subject: `gateway.${volatile}`, stream: volatile }).ready,
    ).rejects.toThrow(/keeps its messages in memory \(storage: memory\).*storage: file/);
    const ok = await stream();
    await expect(createJetStreamHandler(js, { subject: 'elsewhere', stream: ok.name }).ready).rejects.toThrow(
      /does not capture the subject "elsewhere"/,
    );
    await expect(
      createJetStreamHandler(js, { subject: ok.subject, stream: ok.name }).ready,
    ).resolves.toBeUndefined();
    // A retainMs the window covers passes too: 210 s ≤ 2 min? No; 120 s window stays refused.
    await expect(
      createJetStreamHandler(js, { subject: short.subject, stream: short.name, retainMs: 210_000 }).ready,
    ).rejects.toThrow(/duplicate_window/);
    // A delivery through a handler whose stream does not fit: 5xx, not published.
    const errors: unknown[] = [];
    const answer = await post(
      app(h, (e) => void errors.push(e)),
      signed(jobId('short')),
    );
    expect(answer.status).toBeGreaterThanOrEqual(500);
    expect(errors[0]).toBeInstanceOf(TypeError);
    expect((await jsm.streams.info(short.name)).state.messages).toBe(0);
    // Fixed at run time: the next delivery checks again and publishes.
    await jsm.streams.update(short.name, { duplicate_window: FIVE_MIN_NS });
    expect((await post(app(h), signed(jobId('fixed')))).status).toBe(200);
    expect((await jsm.streams.info(short.name)).state.messages).toBe(1);
  });

  it('publishes with Nats-Msg-Id = job_id and answers after the PubAck; a second publish of the job (another receiver) is a duplicate PubAck, counted done', async () => {
    const s = await stream();
    const handler = createJetStreamHandler(nc.jetstream(), { subject: s.subject, stream: s.name });
    await handler.ready;
    const [a, b] = [app(handler), app(handler)];
    const id = jobId('js');
    const d = signed(id);
    expect((await post(a, d)).status).toBe(200);
    expect(await messages(s.name)).toEqual([{ id, jobId: id }]);
    expect((await post(b, d)).body).toEqual({ status: 'processed', job_id: id });
    expect((await post(a, d)).body).toEqual({ status: 'duplicate', job_id: id });
    expect(await messages(s.name)).toEqual([{ id, jobId: id }]);
    const m = await jsm.streams.getMessage(s.name, { seq: 1 });
    expect((m.json() as { output: { text: string } }).output.text).toBe('Grüße');
  });

  it('JetStream paused: the receiver answers 5xx (no PubAck within timeoutMs), never 2xx; the retry after it resumes publishes once', async () => {
    const s = await stream();
    const errors: unknown[] = [];
    const handler = createJetStreamHandler(nc.jetstream(), {
      subject: s.subject,
      stream: s.name,
      timeoutMs: 300,
    });
    await handler.ready;
    const a = app(handler, (e) => void errors.push(e));
    const id = jobId('paused');
    const d = signed(id);
    await server.pause();
    let answer;
    try {
      answer = await post(a, d);
    } finally {
      await server.resume();
    }
    expect([500, 503]).toContain(answer.status);
    expect(errors[0]).toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect((await post(a, d)).status).toBe(200);
    await sleep(50);
    expect((await messages(s.name)).map((m) => m.jobId)).toEqual([id]);
  });

  it('the worker runs the function once per message through the runner and acks after it; a failing function is delivered again; a foreign message is terminated and reported', async () => {
    const s = await stream(FIVE_MIN_NS, RetentionPolicy.Workqueue);
    await jsm.consumers.add(s.name, {
      durable_name: 'workers',
      ack_policy: AckPolicy.Explicit,
      ack_wait: 5e9,
    });
    const handler = createJetStreamHandler(nc.jetstream(), { subject: s.subject, stream: s.name });
    const runs = new Map<string, number>();
    const contexts: QueuedEventContext[] = [];
    const reported: Array<{ stage: string }> = [];
    let failOnce = true;
    const store = new MemoryIdempotencyStore();
    const worker = createJetStreamWorker(nc.jetstream(), {
      stream: s.name,
      consumer: 'workers',
      runner: createJobRunner({ store, log: {}, onError: (_e, c) => void reported.push(c) }),
      onEvent: async (event, context) => {
        if (event.job_id.startsWith('js-flaky') && failOnce) {
          failOnce = false;
          throw new Error('transient');
        }
        contexts.push(context);
        runs.set(event.job_id, (runs.get(event.job_id) ?? 0) + 1);
      },
    });
    closers.push(() => worker.close());
    const ids = Array.from({ length: 20 }, (_, i) => jobId(i === 0 ? 'js-flaky' : 'js-w'));
    const a = app(handler);
    for (const id of ids) expect((await post(a, signed(id))).status).toBe(200);
    const h = natsHeaders();
    h.set('Nats-Msg-Id', 'foreign');
    await nc.jetstream().publish(s.subject, new TextEncoder().encode('{"hello":"world"}'), { headers: h });
    const deadline = Date.now() + 15_000;
    const settled = async () => {
      const c = await jsm.consumers.info(s.name, 'workers');
      return (
        runs.size === ids.length &&
        c.num_pending === 0 &&
        c.num_ack_pending === 0 &&
        reported.some((r) => r.stage === 'body')
      );
    };
    while (!(await settled()) && Date.now() < deadline) await sleep(50);
    expect(runs.size).toBe(ids.length);
    expect([...runs.values()].every((x) => x === 1)).toBe(true);
    // Work-queue retention: acked and terminated messages are gone (the report is what is left of the foreign one).
    expect(await messages(s.name)).toEqual([]);
    expect(contexts.find((c) => c.jobId === ids[0])).toMatchObject({ source: 'queue', delivery: 2 });
    expect(reported.filter((r) => r.stage === 'handler')).toHaveLength(1);
    expect(reported.filter((r) => r.stage === 'body')).toHaveLength(1);
    await worker.close();
    expect(worker.running).toBe(0);
  });
});
