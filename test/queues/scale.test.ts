/**
 * Issue 21, shown: two Express receivers on real HTTP (loopback) share a Redis store and
 * hand every verified delivery to the broker (BullMQ on Redis with AOF; JetStream with
 * file storage); a gateway-like sender delivers every job, 20 % of them twice (half at
 * the same time as the original, half later, to either receiver), under the gateway's
 * retry policy (backoff 1, 2, 4 s; 30 s per attempt). Afterwards every job must be in
 * the queue or stream exactly once, and every job answered 2xx must be there.
 *
 *   npx vitest run test/queues/scale.test.ts                          1,000 deliveries, no fault (part of npm test)
 *   JOBHOOK_QUEUES=short npx vitest run test/queues/scale.test.ts     1,000 deliveries, also with the broker paused 3 s and restarted
 *   JOBHOOK_QUEUES=full npx vitest run test/queues/scale.test.ts      10,000 deliveries, the same cases (RELIABILITY.md)
 *
 * The faulted case pauses the broker (SIGSTOP) for 3 s when 30 % of the deliveries have
 * started, and once 65 % have (the pause over), kills it (SIGKILL) and starts it again
 * on its data (Redis's append-only file; JetStream's file store). Figures are printed
 * and written to .tmp/queues-results.json.
 */
import express from 'express';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { connect, StorageType, type NatsConnection } from 'nats';
import { mkdirSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createReceiver } from '../../src/express.js';
import { RedisIdempotencyStore } from '../../src/redis.js';
import { bullmqJobId, createBullMQHandler } from '../../src/bullmq.js';
import { createJetStreamHandler } from '../../src/nats.js';
import { buildCorpus, type Corpus } from '../faults/harness/corpus.js';
import { machineAndGit } from '../faults/harness/report.js';
import { GATEWAY_POLICY, sendAll } from '../faults/harness/sender.js';
import { publicPem } from '../helpers/keys.js';
import { ROOT } from '../helpers/paths.js';
import { availability, startRedis, type FaultableServer } from '../helpers/servers.js';
import { natsAvailability, startNats } from './nats-server.js';

const mode =
  process.env.JOBHOOK_QUEUES === 'full' ? 'full' : process.env.JOBHOOK_QUEUES === 'short' ? 'short' : 'quick';
// JOBHOOK_QUEUES_DELIVERIES overrides the count (for trying a case; not for recorded figures).
const DELIVERIES = Number(process.env.JOBHOOK_QUEUES_DELIVERIES) || (mode === 'full' ? 10_000 : 1_000);
const FAULTS = mode !== 'quick';
const CONCURRENCY = 64;
const publicKey = publicPem(2048);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const redis = availability('redis', 'queue scale tests');
if (redis.skip) console.warn(`\n[jobhook] ${redis.reason}\n`);
const nats = natsAvailability();

/** One broker under test: a handler per receiver, and what it holds afterwards. */
interface Broker {
  server: FaultableServer;
  /** A fresh queue/stream for one case; returns the per-receiver handler factory and a reader of its contents. */
  prepare(name: string): Promise<{
    handler(): Promise<{ onEvent: ReturnType<typeof createBullMQHandler>; close(): Promise<unknown> }>;
    /** job_id → how many times the queue/stream holds it. */
    contents(): Promise<Map<string, number>>;
  }>;
  close(): Promise<void>;
}

async function bullmqBroker(): Promise<Broker> {
  const server = await startRedis({ appendOnly: true });
  const url = new URL(server.url);
  const connection = { host: url.hostname, port: Number(url.port) };
  const reader = new Redis({ ...connection, lazyConnect: true, maxRetriesPerRequest: null });
  reader.on('error', () => undefined);
  return {
    server,
    async prepare(name) {
      return {
        async handler() {
          const queue = new Queue(name, { connection });
          queue.on('error', () => undefined);
          return { onEvent: createBullMQHandler(queue), close: () => queue.close() };
        },
        async contents() {
          // No worker runs: every job the queue holds is waiting. BullMQ keeps one job per id,
          // so the count per job_id comes from the ids; each job's data must name its job_id too.
          const ids = await reader.lrange(`bull:${name}:wait`, 0, -1);
          const counts = new Map<string, number>();
          for (let i = 0; i < ids.length; i += 500) {
            const batch = ids.slice(i, i + 500);
            const pipeline = reader.pipeline();
            for (const id of batch) pipeline.hget(`bull:${name}:${id}`, 'data');
            const rows = (await pipeline.exec()) ?? [];
            rows.forEach(([, data], k) => {
              const jobId = (JSON.parse(String(data)) as { job_id: string }).job_id;
              if (bullmqJobId(jobId) !== batch[k]) throw new Error(`job ${batch[k]} holds job_id ${jobId}`);
              counts.set(jobId, (counts.get(jobId) ?? 0) + 1);
            });
          }
          return counts;
        },
      };
    },
    async close() {
      reader.disconnect();
      await server.destroy();
    },
  };
}

async function jetstreamBroker(): Promise<Broker> {
  const server = await startNats();
  const connections: NatsConnection[] = [];
  const client = async () => {
    const nc = await connect({ servers: server.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    connections.push(nc);
    return nc;
  };
  const admin = await client();
  return {
    server,
    async prepare(name) {
      const jsm = await admin.jetstreamManager();
      await jsm.streams.add({
        name,
        subjects: [`${name}.events`],
        storage: StorageType.File,
        duplicate_window: 300e9,
      });
      return {
        async handler() {
          const nc = await client();
          const onEvent = createJetStreamHandler(nc.jetstream(), { subject: `${name}.events`, stream: name });
          await onEvent.ready;
          return { onEvent, close: () => nc.close() };
        },
        async contents() {
          const m = await admin.jetstreamManager();
          const info = await m.streams.info(name);
          const counts = new Map<string, number>();
          if (info.state.messages === 0) return counts;
          // An ordered consumer reads the stream once, in order.
          const consumer = await admin.jetstream().consumers.get(name);
          const messages = await consumer.fetch({ max_messages: info.state.messages, expires: 10_000 });
          let seen = 0;
          for await (const msg of messages) {
            const jobId = (msg.json() as { job_id: string }).job_id;
            if (msg.headers?.get('Nats-Msg-Id') !== jobId)
              throw new Error(
                `message ${msg.seq} has Nats-Msg-Id ${msg.headers?.get('Nats-Msg-Id')} for job ${jobId}`,
              );
            counts.set(jobId, (counts.get(jobId) ?? 0) + 1);
            if (++seen === info.state.messages) break;
          }
          return counts;
        },
      };
    },
    async close() {
      for (const nc of connections) await nc.close().catch(() => undefined);
      await server.destroy();
    },
  };
}

interface CaseResult {
  broker: string;
  fault: string;
  deliveries: number;
  distinctJobs: number;
  attempts: number;
  answers2xx: number;
  answers5xx: Record<string, number>;
  noAnswer: number;
  gaveUp: number;
  /** Jobs of the corpus the queue/stream does not hold. */
  lost: number;
  /** Jobs the queue/stream holds more than once. */
  duplicated: number;
  /** Jobs answered 2xx that the queue/stream does not hold. */
  twoxxNotTaken: number;
  /** Entries of the queue/stream that are no job of the corpus. */
  foreign: number;
  inBroker: number;
  sendSeconds: number;
  deliveriesPerSecond: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  latencyMaxMs: number;
  events: string[];
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : Math.round(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!);
};

async function runCase(
  brokerName: string,
  key: string,
  broker: Broker,
  store: FaultableServer,
  corpus: Corpus,
  faulted: boolean,
): Promise<CaseResult> {
  const name = `scale_${key}_${faulted ? 'fault' : 'none'}_${process.pid}_${Date.now()}`;
  const q = await broker.prepare(name);
  // Two receivers, each with its own store client and broker connection, as two processes would have.
  const receivers: Array<{ server: Server; url: string; close(): Promise<unknown> }> = [];
  for (let i = 0; i < 2; i++) {
    const h = await q.handler();
    const storeClient = new RedisIdempotencyStore({ url: store.url, keyPrefix: `${name}:`, log: {} });
    const receiver = createReceiver({ publicKey, store: storeClient, log: {}, onEvent: h.onEvent });
    const app = express();
    app.post('/hook', receiver);
    const server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    receivers.push({
      server,
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
      close: async () => {
        await new Promise((r) => server.close(r));
        await receiver.close();
        await h.close();
        await storeClient.close();
      },
    });
  }

  const events: string[] = [];
  const t0 = performance.now();
  const mark = (what: string) => events.push(`${((performance.now() - t0) / 1000).toFixed(1)} s: ${what}`);
  let faultDone: Promise<void> = Promise.resolve();
  let paused = false;
  let pauseOver = false;
  let restarted = false;
  const onDispatch = (count: number) => {
    if (!faulted) return;
    if (!paused && count >= corpus.deliveries.length * 0.3) {
      paused = true;
      faultDone = (async () => {
        mark(`broker paused (SIGSTOP), ${count} deliveries started`);
        await broker.server.pause();
        await sleep(3_000);
        await broker.server.resume();
        mark('broker resumed (SIGCONT)');
        pauseOver = true;
      })();
    } else if (pauseOver && !restarted && count >= corpus.deliveries.length * 0.65) {
      restarted = true;
      faultDone = (async () => {
        mark(`broker killed (SIGKILL), ${count} deliveries started`);
        await broker.server.kill();
        await broker.server.start();
        mark('broker started again on its data');
      })();
    }
  };

  const twoxx = new Map<string, number>();
  const fivexx: Record<string, number> = {};
  const latencies: number[] = [];
  let attempts = 0;
  let noAnswer = 0;
  let gaveUp = 0;
  await sendAll({
    deliveries: corpus.deliveries,
    urls: receivers.map((r) => r.url),
    concurrency: CONCURRENCY,
    policy: GATEWAY_POLICY,
    onDispatch,
    onAttempt: (a) => {
      attempts++;
      latencies.push(a.latencyMs);
      if (a.status === undefined) noAnswer++;
      else if (a.status >= 200 && a.status < 300)
        twoxx.set(a.delivery.jobId, (twoxx.get(a.delivery.jobId) ?? 0) + 1);
      else if (a.status >= 500) fivexx[a.label] = (fivexx[a.label] ?? 0) + 1;
      if (a.outcome === 'gave-up') gaveUp++;
    },
  });
  const sendSeconds = (performance.now() - t0) / 1000;
  await faultDone;
  if (faulted && !restarted) mark('the run ended before the restart point');
  // Adds or publishes that timed out may still land: give them a moment, then look.
  await sleep(1_000);
  for (const r of receivers) await r.close();
  const held = await q.contents();
  const corpusIds = new Set(corpus.jobIds);
  return {
    broker: brokerName,
    fault: faulted ? 'paused 3 s (SIGSTOP), later killed (SIGKILL) and restarted' : 'none',
    deliveries: corpus.deliveries.length,
    distinctJobs: corpus.jobIds.length,
    attempts,
    answers2xx: [...twoxx.values()].reduce((a, b) => a + b, 0),
    answers5xx: fivexx,
    noAnswer,
    gaveUp,
    lost: corpus.jobIds.filter((id) => !held.has(id)).length,
    duplicated: [...held.values()].filter((n) => n > 1).length,
    twoxxNotTaken: [...twoxx.keys()].filter((id) => !held.has(id)).length,
    foreign: [...held.keys()].filter((id) => !corpusIds.has(id)).length,
    inBroker: [...held.values()].reduce((a, b) => a + b, 0),
    sendSeconds: Number(sendSeconds.toFixed(1)),
    deliveriesPerSecond: Math.round(corpus.deliveries.length / sendSeconds),
    latencyP50Ms: pct(latencies, 50),
    latencyP99Ms: pct(latencies, 99),
    latencyMaxMs: pct(latencies, 100),
    events,
  };
}

const results: CaseResult[] = [];

function report(): void {
  if (results.length === 0) return;
  const head =
    '| broker | fault | deliveries | jobs | in queue/stream | lost | duplicated | 2xx not taken | attempts | 2xx | 5xx | gave up | deliveries/s | p50 ms | p99 ms | max ms |\n' +
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|';
  const rows = results.map(
    (r) =>
      `| ${r.broker} | ${r.fault} | ${r.deliveries} | ${r.distinctJobs} | ${r.inBroker} | ${r.lost} | ${r.duplicated} | ${r.twoxxNotTaken} | ${r.attempts} | ${r.answers2xx} | ${Object.values(r.answers5xx).reduce((a, b) => a + b, 0)} | ${r.gaveUp} | ${r.deliveriesPerSecond} | ${r.latencyP50Ms} | ${r.latencyP99Ms} | ${r.latencyMaxMs} |`,
  );
  const details = results.map(
    (r) =>
      `- ${r.broker}, ${r.fault}: 5xx ${JSON.stringify(r.answers5xx)}; ${r.events.join('; ') || 'no events'}`,
  );
  const text = [head, ...rows].join('\n') + '\n\n' + details.join('\n');
  console.log(`\n# queue scale, ${mode} (${DELIVERIES} deliveries per case)\n\n${text}\n`);
  const dir = join(ROOT, '.tmp');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'queues-results.json'),
    JSON.stringify(
      { mode, deliveries: DELIVERIES, at: new Date().toISOString(), ...machineAndGit(), results },
      null,
      2,
    ),
  );
  writeFileSync(join(dir, 'queues-results.md'), text + '\n');
}

describe.skipIf(redis.skip)(
  `queue handoff at scale (${mode}: ${DELIVERIES} deliveries, 20 % duplicates, two receivers)`,
  () => {
    let corpus: Corpus;
    let store: FaultableServer;
    beforeAll(async () => {
      corpus = buildCorpus({ deliveries: DELIVERIES, duplicateShare: 0.2, instances: 2, seed: 21 });
      store = await startRedis();
    });
    afterAll(async () => {
      report();
      await store?.destroy();
    });

    const check = (r: CaseResult) => {
      expect({
        lost: r.lost,
        duplicated: r.duplicated,
        twoxxNotTaken: r.twoxxNotTaken,
        foreign: r.foreign,
        gaveUp: r.gaveUp,
      }).toEqual({ lost: 0, duplicated: 0, twoxxNotTaken: 0, foreign: 0, gaveUp: 0 });
      expect(r.inBroker).toBe(r.distinctJobs);
    };

    const brokers: Array<[string, string, () => Promise<Broker>, boolean]> = [
      ['BullMQ (Redis, AOF)', 'bullmq', bullmqBroker, false],
      ['JetStream (file storage)', 'jetstream', jetstreamBroker, nats.skip],
    ];
    for (const [label, key, make, skip] of brokers) {
      describe.skipIf(skip)(label, () => {
        let broker: Broker;
        beforeAll(async () => {
          broker = await make();
        });
        afterAll(async () => {
          await broker?.close();
        });
        it(
          'no fault: every job in the queue exactly once, every 2xx taken',
          { timeout: 600_000 },
          async () => {
            const r = await runCase(label, key, broker, store, corpus, false);
            results.push(r);
            check(r);
          },
        );
        it.skipIf(!FAULTS)(
          'broker paused 3 s, later killed and restarted: 0 lost, 0 duplicated, 0 2xx for an event the broker never took',
          { timeout: 600_000 },
          async () => {
            const r = await runCase(label, key, broker, store, corpus, true);
            results.push(r);
            check(r);
            expect(r.events.some((e) => e.includes('started again'))).toBe(true);
          },
        );
      });
    }
  },
);
