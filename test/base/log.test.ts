/**
 * What reaches a real pino, a real winston and a real console: every detail of a
 * handler failure, a refused delivery and a store failure, whatever the logger.
 */
import { Console } from 'node:console';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import winston from 'winston';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createReceiver, signDelivery, type LoggerInput } from '../../src/index.js';
import { errorDetails, resolveLogger } from '../../src/lib/base/log.js';
import { RedisIdempotencyStore } from '../../src/redis.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { privatePem, publicPem } from '../helpers/keys.js';
import { freePort } from '../helpers/servers.js';

/** A stream that keeps what is written to it. */
function capture(): { stream: Writable; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      text += String(chunk);
      done();
    },
  });
  return { stream, text: () => text };
}

interface Sink {
  log: LoggerInput;
  text: () => string;
  /** One object per line, for the loggers that write JSON. */
  json?: () => Array<Record<string, unknown>>;
}

const lines = (text: string) =>
  text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

const SINKS: Record<string, () => Sink> = {
  pino: () => {
    const c = capture();
    return { log: pino({ level: 'debug' }, c.stream), text: c.text, json: () => lines(c.text()) };
  },
  'pino child': () => {
    const c = capture();
    return {
      log: pino({ level: 'debug' }, c.stream).child({ component: 'webhooks' }),
      text: c.text,
      json: () => lines(c.text()),
    };
  },
  'winston (json format)': () => {
    const c = capture();
    const log = winston.createLogger({
      level: 'debug',
      format: winston.format.json(),
      transports: [new winston.transports.Stream({ stream: c.stream })],
    });
    return { log, text: c.text, json: () => lines(c.text()) };
  },
  'winston (simple format)': () => {
    const c = capture();
    const log = winston.createLogger({
      level: 'debug',
      format: winston.format.simple(),
      transports: [new winston.transports.Stream({ stream: c.stream })],
    });
    return { log, text: c.text };
  },
  console: () => {
    const c = capture();
    return { log: new Console({ stdout: c.stream, stderr: c.stream }), text: c.text };
  },
};

const publicKey = publicPem(2048);
const stores: RedisIdempotencyStore[] = [];
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
});

describe.each(Object.keys(SINKS))('log: %s', (kind) => {
  it("a handler's failure: its message, stack and code, and the job id", async () => {
    const sink = SINKS[kind]!();
    const id = jobId('log-handler');
    const receive = createReceiver({
      publicKey,
      log: sink.log,
      onEvent: () => {
        throw Object.assign(new Error('db down at 10.0.0.3'), { code: 'EDBDOWN' });
      },
    });
    expect((await receive(signed(id))).status).toBe(500);
    await vi.waitFor(() => expect(sink.text()).toContain('db down at 10.0.0.3'));
    const text = sink.text();
    expect(text).toContain(id);
    expect(text).toContain('EDBDOWN');
    expect(text).toMatch(/at .*log\.test\.ts/); // the stack, down to the handler in this file
    if (sink.json) {
      const line = sink.json().find((l) => JSON.stringify(l).includes('db down'))!;
      expect(line).toMatchObject({
        error: 'Error: db down at 10.0.0.3',
        code: 'EDBDOWN',
        stack: expect.stringContaining('log.test.ts'),
      });
      // The message under the logger's own key: pino's msg, winston's message.
      expect(line.msg ?? line.message).toBe(`jobhook: the handler failed for job ${id}`);
    }
  });

  it("a refused delivery's error code and reason", async () => {
    const sink = SINKS[kind]!();
    const receive = createReceiver({ publicKey, log: sink.log, onEvent: () => undefined });
    const genuine = signed(jobId('log-forged'));
    // Anyone could send this one: logged at debug.
    expect(
      (await receive({ body: genuine.body.replace('Grüße', 'Grüsse'), headers: genuine.headers })).status,
    ).toBe(401);
    // Signed, but no job_id: logged at info.
    const noJobId = signDelivery('{"event":"async_job_completed","status":"success"}', privatePem(2048));
    expect((await receive(noJobId)).status).toBe(400);
    await vi.waitFor(() => expect(sink.text()).toContain('PAYLOAD_INVALID'));
    const text = sink.text();
    expect(text).toContain('SIGNATURE_INVALID');
    expect(text).toContain('job_id'); // the reason came along
  });

  it("a store failure's cause", async () => {
    const sink = SINKS[kind]!();
    // Nothing listens there: every operation fails with the client's connection error.
    const store = new RedisIdempotencyStore({
      url: `redis://127.0.0.1:${await freePort()}`,
      operationTimeoutMs: 500,
      log: {},
    });
    stores.push(store);
    let failure: unknown;
    const receive = createReceiver({
      publicKey,
      store,
      log: sink.log,
      onEvent: () => undefined,
      onError: (err) => void (failure = err),
    });
    const id = jobId('log-store');
    expect((await receive(signed(id))).status).toBe(503);
    await vi.waitFor(() => expect(sink.text()).toContain('failed to claim'));
    const cause = (failure as Error).cause as Error;
    expect(cause).toBeInstanceOf(Error);
    // The cause's name is not in the store error's message: only the cause detail carries it.
    expect((failure as Error).message).not.toContain(cause.name);
    const text = sink.text();
    expect(text).toContain(id);
    expect(text).toContain('StoreUnavailableError');
    expect(text).toContain(`${cause.name}: ${cause.message.slice(0, 20)}`);
    if (sink.json) {
      const line = sink.json().find((l) => JSON.stringify(l).includes('failed to claim'))!;
      expect(String(line.cause)).toMatch(new RegExp(`^${cause.name}: `));
    }
  });
});

describe('errorDetails', () => {
  it('keeps the stack, the code and the chain of causes, as strings', () => {
    const root = new AggregateError(
      [
        Object.assign(new Error('connect ECONNREFUSED ::1:6379'), { code: 'ECONNREFUSED' }),
        new Error('connect ECONNREFUSED 127.0.0.1:6379'),
      ],
      '',
    );
    Object.assign(root, { code: 'ECONNREFUSED' });
    const middle = new Error('pool exhausted', { cause: root });
    const top = Object.assign(new Error('store failed', { cause: middle }), { code: 'E_STORE' });
    const details = errorDetails(top);
    expect(details).toEqual({
      error: 'Error: store failed',
      code: 'E_STORE',
      stack: top.stack!.slice(top.stack!.indexOf('\n') + 1), // its frames: the first line is \`error\`
      cause:
        'Error: pool exhausted ← AggregateError: connect ECONNREFUSED ::1:6379; connect ECONNREFUSED 127.0.0.1:6379 (code ECONNREFUSED)',
    });
    expect(errorDetails('plain')).toEqual({ error: 'plain' });
    expect(errorDetails(new Error('x', { cause: 'a string cause' })).cause).toBe('a string cause');
  });

  it('leaves out what the logged line already says: the message (the name stays), and the first line of the stack', () => {
    const err = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' });
    const details = errorDetails(err, 'jobhook: the store failed: connect ECONNREFUSED 127.0.0.1:6379');
    expect(details.error).toBe('Error'); // its name: the line already says the message
    expect(details.code).toBe('ECONNREFUSED');
    expect(String(details.stack)).not.toContain('ECONNREFUSED');
    expect(String(details.stack)).toMatch(/^\s+at /);
    expect(errorDetails(err, 'jobhook: the store failed').error).toBe(
      'Error: connect ECONNREFUSED 127.0.0.1:6379',
    );
  });

  it('stops at a cycle of causes', () => {
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    a.cause = b;
    expect(errorDetails(a).cause).toBe('Error: b');
  });
});

describe('resolveLogger', () => {
  it('calls (message, details) on console-like loggers and (details, message) on pino', () => {
    const calls: unknown[][] = [];
    const plain = resolveLogger({ error: (...args: unknown[]) => void calls.push(args) });
    plain.error('m', { a: 1 });
    plain.error('only');
    const c = capture();
    const p = pino(c.stream);
    resolveLogger(p).error('m', { a: 1 });
    expect(calls).toEqual([['m', { a: 1 }], ['only']]);
    expect(lines(c.text())[0]).toMatchObject({ msg: 'm', a: 1 });
  });

  it('a logger that throws loses the line, not the delivery', async () => {
    const receive = createReceiver({
      publicKey,
      log: {
        error: () => {
          throw new Error('closed stream');
        },
      },
      onEvent: () => {
        throw new Error('handler');
      },
    });
    expect((await receive(signed(jobId('log-throws')))).status).toBe(500);
  });
});
