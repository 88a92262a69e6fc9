/**
 * A receiver in a process of its own, for tests that kill it: Express + createReceiver
 * with the Redis store, a 1 s lease. Prints "listening", then "start <job>" and
 * "done <job>" around each handler run; with HANG_JOB=* (or a job id) the handler
 * never returns, so the test can kill the process in the middle of it.
 */
import express from 'express';
import { createReceiver } from '../../src/express.js';
import { RedisIdempotencyStore } from '../../src/redis.js';

const env = (name: string) => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`${name} is required`);
  return v;
};

const store = new RedisIdempotencyStore({ url: env('REDIS_URL'), keyPrefix: env('KEY_PREFIX'), log: {} });
const hang = process.env.HANG_JOB ?? '';
const app = express();
app.post(
  '/hook',
  createReceiver({
    publicKey: env('PUBLIC_KEY'),
    store,
    leaseMs: 1000,
    log: {},
    onEvent: async (event) => {
      process.stdout.write(`start ${event.job_id}\n`);
      if (hang === '*' || hang === event.job_id) await new Promise(() => undefined);
      process.stdout.write(`done ${event.job_id}\n`);
    },
  }),
);
app.listen(Number(env('PORT')), '127.0.0.1', () => process.stdout.write('listening\n'));
