/**
 * Workers killed mid-job (kill -9 of a worker process), on real Redis/NATS and
 * PostgreSQL: every job's effect exactly once with the transactional PostgreSQL store
 * (the killed worker's open transactions roll back); otherwise every job's effect at
 * least once, and every job whose effect happened twice reported (onError `superseded`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { AckPolicy, connect, StorageType, type NatsConnection } from 'nats';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createJobRunner, type JobRunner } from '../../src/index.js';
import { PostgresIdempotencyStore } from '../../src/postgres.js';
import { createBullMQHandler, createBullMQWorker } from '../../src/bullmq.js';
import { createJetStreamHandler, createJetStreamWorker } from '../../src/nats.js';
import { payloadText } from '../helpers/deliveries.js';
import { ROOT } from '../helpers/paths.js';
import { availability, startRedis, type FaultableServer } from '../helpers/servers.js';
import { natsAvailability, startNats } from './nats-server.js';

const databaseUrl = inject('databaseUrl');
const redis = availability('redis', 'queue worker tests');
const nats = natsAvailability();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const JOBS = 40;

/** Starts worker-process.ts; resolves once it consumes. `effects` collects the job ids it printed. */
function startWorkerProcess(
  env: Record<string, string>,
): Promise<{ child: ChildProcess; effects: string[]; exited: Promise<unknown> }> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(ROOT, 'test', 'queues', 'worker-process.ts')],
    { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const effects: string[] = [];
  const exited = new Promise((r) => child.once('exit', r));
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stderr!.on('data', (c: Buffer) => void (err += c.toString()));
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const lines = out.split('\n');
      out = lines.pop()!;
      for (const line of lines) {
        if (line === 'ready') resolve({ child, effects, exited });
        else if (line.startsWith('effect ')) effects.push(line.slice(7));
      }
    });
    child.once('exit', (code) =>
      reject(new Error(`worker process exited with ${code} before it was ready:\n${err}`)),
    );
  });
}

describe.skipIf(databaseUrl === '' || redis.skip)('workers killed mid-job', () => {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 16 });
  pool.on('error', () => undefined);
  let redisServer: FaultableServer;
  let natsServer: FaultableServer | undefined;
  let nc: NatsConnection | undefined;
  let n = 0;
  const cleanups: Array<() => Promise<unknown>> = [];

  beforeAll(async () => {
    redisServer = await startRedis();
    if (!nats.skip) {
      natsServer = await startNats();
      nc = await connect({ servers: natsServer.url });
    }
  });
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
    await nc?.close().catch(() => undefined);
    await natsServer?.destroy();
    await redisServer?.destroy();
    await pool.end();
  });

  /** Tables of one case: the store's and the effects'. */
  const tables = async () => {
    const tag = `${process.pid}_${n++}`;
    const table = `jobhook_qw_${tag}`;
    const effects = `jobhook_qw_effects_${tag}`;
    await pool.query(`CREATE TABLE ${effects} (job_id text NOT NULL, worker text NOT NULL)`);
    cleanups.push(() => pool.query(`DROP TABLE IF EXISTS ${effects}, ${table}`));
    return { table, effects };
  };
  const effectCounts = async (effects: string) => {
    const rows = (await pool.query(`SELECT job_id, count(*)::int AS n FROM ${effects} GROUP BY job_id`))
      .rows as Array<{ job_id: string; n: number }>;
    return new Map(rows.map((r) => [r.job_id, r.n]));
  };
  /** The second worker (in this process): its runner on the same store table, its reports kept. */
  const survivor = async (table: string, effects: string, transactional: boolean) => {
    const store = new PostgresIdempotencyStore({ pool, table, transactional });
    await store.migrate();
    const reported = new Map<string, string[]>();
    const runner: JobRunner = createJobRunner({
      store,
      leaseMs: 1_000,
      takeoverGraceMs: 500,
      log: {},
      onError: (_e, c) => {
        if (c.jobId !== undefined) reported.set(c.jobId, [...(reported.get(c.jobId) ?? []), c.stage]);
      },
    });
    const onEvent = async (
      event: { job_id: string },
      context: { transaction: pg.PoolClient | undefined },
    ) => {
      const sql = `INSERT INTO ${effects} (job_id, worker) VALUES ($1, $2)`;
      if (transactional) await context.transaction!.query(sql, [event.job_id, 'B']);
      else await pool.query(sql, [event.job_id, 'B']);
    };
    return { runner, onEvent, reported, store };
  };
  const events = (prefix: string) =>
    Array.from({ length: JOBS }, (_, i) => {
      const jobId = `${prefix}-${process.pid}-${Date.now()}-${i}`;
      return { jobId, payload: JSON.parse(payloadText(jobId)) };
    });

  /** What each case asserts, from the effects table and the survivor's reports. */
  const verdict = async (
    effects: string,
    jobIds: string[],
    killedMidJob: string[],
    reported: Map<string, string[]>,
    transactional: boolean,
  ) => {
    const counts = await effectCounts(effects);
    const missing = jobIds.filter((id) => !counts.has(id));
    const twice = jobIds.filter((id) => (counts.get(id) ?? 0) > 1);
    const superseded = new Set(
      [...reported]
        .filter(([, stages]) => stages.includes('superseded'))
        .map(([key]) => key.replace(/^work:/, '')),
    );
    expect(missing).toEqual([]);
    // The kill came while the first worker had written effects of jobs it had not finished.
    expect(killedMidJob.length).toBeGreaterThan(0);
    // Those jobs were taken over from the killed worker, and each takeover reported.
    expect(superseded.size).toBeGreaterThan(0);
    if (transactional) {
      expect(twice).toEqual([]);
      expect([...counts.values()].every((c) => c === 1)).toBe(true);
    } else {
      // At least once, never silently: every job whose effect happened twice is reported.
      expect(twice.filter((id) => !superseded.has(id))).toEqual([]);
    }
    return { twice: twice.length, reported: superseded.size };
  };

  for (const transactional of [true, false]) {
    const label = transactional
      ? 'transactional PostgreSQL store: each effect exactly once'
      : 'PostgreSQL store, not transactional: at least once, every double reported';

    it(`BullMQ, ${label}`, { timeout: 60_000 }, async () => {
      const { table, effects } = await tables();
      const url = new URL(redisServer.url);
      const connection = { host: url.hostname, port: Number(url.port) };
      const name = `workers-${process.pid}-${n}`;
      const queue = new Queue(name, { connection });
      queue.on('error', () => undefined);
      cleanups.push(() => queue.close());
      const handler = createBullMQHandler(queue);
      const jobs = events('bull-kill');
      const b = await survivor(table, effects, transactional);
      const a = await startWorkerProcess({
        BROKER: 'bullmq',
        REDIS_URL: redisServer.url,
        QUEUE: name,
        DATABASE_URL: databaseUrl,
        TABLE: table,
        EFFECTS: effects,
        MODE: transactional ? 'tx' : 'plain',
      });
      for (const j of jobs) await handler(j.payload, j);
      while (a.effects.length < 8) await sleep(10);
      a.child.kill('SIGKILL');
      await a.exited;
      const killedMidJob = [...a.effects];
      const worker = createBullMQWorker(
        name,
        { runner: b.runner, onEvent: b.onEvent },
        { connection, concurrency: 4, lockDuration: 1_000, stalledInterval: 500 },
      );
      worker.on('error', () => undefined);
      cleanups.push(() => worker.close());
      const deadline = Date.now() + 40_000;
      while (((await queue.getJobCounts('completed')).completed ?? 0) < JOBS && Date.now() < deadline)
        await sleep(100);
      expect(await queue.getJobCounts('completed', 'failed')).toEqual({ completed: JOBS, failed: 0 });
      const v = await verdict(
        effects,
        jobs.map((j) => j.jobId),
        killedMidJob,
        b.reported,
        transactional,
      );
      console.log(
        `BullMQ, ${transactional ? 'transactional' : 'plain'}: worker A killed after ${killedMidJob.length} effects; ${v.reported} takeovers reported; ${v.twice} effects twice`,
      );
    });

    it.skipIf(nats.skip)(`JetStream, ${label}`, { timeout: 60_000 }, async () => {
      const { table, effects } = await tables();
      const stream = `WK${process.pid}_${n}`;
      const jsm = await nc!.jetstreamManager();
      await jsm.streams.add({
        name: stream,
        subjects: [`${stream}.events`],
        storage: StorageType.File,
        duplicate_window: 300e9,
      });
      await jsm.consumers.add(stream, {
        durable_name: 'workers',
        ack_policy: AckPolicy.Explicit,
        ack_wait: 1e9,
      });
      const handler = createJetStreamHandler(nc!.jetstream(), { subject: `${stream}.events`, stream });
      const jobs = events('js-kill');
      const b = await survivor(table, effects, transactional);
      const a = await startWorkerProcess({
        BROKER: 'jetstream',
        NATS_URL: natsServer!.url,
        STREAM: stream,
        CONSUMER: 'workers',
        DATABASE_URL: databaseUrl,
        TABLE: table,
        EFFECTS: effects,
        MODE: transactional ? 'tx' : 'plain',
      });
      for (const j of jobs) await handler(j.payload, j);
      while (a.effects.length < 8) await sleep(10);
      a.child.kill('SIGKILL');
      await a.exited;
      const killedMidJob = [...a.effects];
      const worker = createJetStreamWorker(nc!.jetstream(), {
        stream,
        consumer: 'workers',
        concurrency: 4,
        runner: b.runner,
        onEvent: b.onEvent,
      });
      cleanups.push(() => worker.close());
      const deadline = Date.now() + 40_000;
      const done = async () => {
        const c = await jsm.consumers.info(stream, 'workers');
        return c.num_pending === 0 && c.num_ack_pending === 0;
      };
      while (!(await done()) && Date.now() < deadline) await sleep(100);
      expect(await done()).toBe(true);
      const v = await verdict(
        effects,
        jobs.map((j) => j.jobId),
        killedMidJob,
        b.reported,
        transactional,
      );
      console.log(
        `JetStream, ${transactional ? 'transactional' : 'plain'}: worker A killed after ${killedMidJob.length} effects; ${v.reported} takeovers reported; ${v.twice} effects twice`,
      );
    });
  }
});
