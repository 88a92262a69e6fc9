/**
 * A queue worker in a process of its own, for the test that kills it (kill -9) in the
 * middle of jobs: BullMQ (createBullMQWorker) or JetStream (createJetStreamWorker), the
 * PostgreSQL store (transactional or not), a 1 s lease. Its function writes one effect
 * row per run (through context.transaction in transactional mode, else straight to the
 * table), prints "effect <job_id>", then works 150 ms more before it returns. Prints
 * "ready" once consuming.
 */
import { connect } from 'nats';
import pg from 'pg';
import { createJobRunner } from '../../src/index.js';
import { PostgresIdempotencyStore } from '../../src/postgres.js';
import { createBullMQWorker } from '../../src/bullmq.js';
import { createJetStreamWorker } from '../../src/nats.js';

const env = (name: string) => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`${name} is required`);
  return v;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const transactional = env('MODE') === 'tx';
const effects = env('EFFECTS');
const pool = new pg.Pool({ connectionString: env('DATABASE_URL'), max: 12 });
pool.on('error', () => undefined);
const store = new PostgresIdempotencyStore({ pool, table: env('TABLE'), transactional });
const runner = createJobRunner({ store, leaseMs: 1_000, takeoverGraceMs: 500, log: {} });

const onEvent = async (event: { job_id: string }, context: { transaction: pg.PoolClient | undefined }) => {
  const sql = `INSERT INTO ${effects} (job_id, worker) VALUES ($1, $2)`;
  if (transactional) await context.transaction!.query(sql, [event.job_id, 'A']);
  else await pool.query(sql, [event.job_id, 'A']);
  process.stdout.write(`effect ${event.job_id}\n`);
  await sleep(150);
};

if (env('BROKER') === 'bullmq') {
  const url = new URL(env('REDIS_URL'));
  const worker = createBullMQWorker<pg.PoolClient>(
    env('QUEUE'),
    { runner, onEvent },
    {
      connection: { host: url.hostname, port: Number(url.port) },
      concurrency: 4,
      lockDuration: 1_000,
      stalledInterval: 500,
    },
  );
  worker.on('error', () => undefined);
  await worker.waitUntilReady();
} else {
  const nc = await connect({ servers: env('NATS_URL') });
  createJetStreamWorker<pg.PoolClient>(nc.jetstream(), {
    stream: env('STREAM'),
    consumer: env('CONSUMER'),
    concurrency: 4,
    runner,
    onEvent,
  });
}
process.stdout.write('ready\n');
