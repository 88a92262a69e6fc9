/**
 * jobhook's errors in the frameworks' own error handlers: `status`, `statusCode` and
 * `expose` make Express's final handler, Koa's and Fastify's default handlers answer
 * the status jobhook's receivers answer, with the real frameworks.
 */
import type { AddressInfo } from 'node:net';
import express5 from 'express';
import express4 from 'express4';
import Fastify from 'fastify';
import Koa from 'koa';
import supertest from 'supertest';
import { afterAll, describe, expect, it } from 'vitest';
import {
  createReceiver,
  createVerifier,
  signDelivery,
  isWebhookError,
  type AnyWebhookError,
  type WebhookErrorCode,
} from '../../src/index.js';
import {
  AlgorithmUnsupportedError,
  BodyMalformedError,
  BodyTimeoutError,
  BodyTooLargeError,
  BodyUnavailableError,
  CanonicalTooLargeError,
  CanonicalUnrepresentableError,
  EncodingUnsupportedError,
  EventTooOldError,
  EventFromFutureError,
  ClaimLostError,
  JobSupersededError,
  PayloadInvalidError,
  ReceiverBusyError,
  SignatureInvalidError,
  SignatureMalformedError,
  SignatureMissingError,
  StoreNotMigratedError,
  StoreUnavailableError,
} from '../../src/errors.js';
import { createMiddleware } from '../../src/express.js';
import { STATUS_BY_CODE } from '../../src/lib/base/errors.js';
import { RedisIdempotencyStore } from '../../src/redis.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { privatePem, publicPem } from '../helpers/keys.js';
import { freePort } from '../helpers/servers.js';

const publicKey = publicPem(2048);

// One of each: the Record type fails to compile when a code is added without its error here.
const ONE_OF_EACH: Record<WebhookErrorCode, AnyWebhookError> = {
  BODY_TOO_LARGE: new BodyTooLargeError(10),
  BODY_TIMEOUT: new BodyTimeoutError(10),
  BODY_MALFORMED: new BodyMalformedError('x', 0),
  BODY_UNAVAILABLE: new BodyUnavailableError('x'),
  ENCODING_UNSUPPORTED: new EncodingUnsupportedError('x'),
  CANONICAL_UNREPRESENTABLE: new CanonicalUnrepresentableError('x'),
  CANONICAL_TOO_LARGE: new CanonicalTooLargeError(10),
  SIGNATURE_MISSING: new SignatureMissingError('x'),
  SIGNATURE_MALFORMED: new SignatureMalformedError('x'),
  ALGORITHM_UNSUPPORTED: new AlgorithmUnsupportedError('x'),
  SIGNATURE_INVALID: new SignatureInvalidError('x'),
  PAYLOAD_INVALID: new PayloadInvalidError('x'),
  EVENT_TOO_OLD: new EventTooOldError('x'),
  EVENT_FROM_FUTURE: new EventFromFutureError('x'),
  STORE_UNAVAILABLE: new StoreUnavailableError('x'),
  STORE_NOT_MIGRATED: new StoreNotMigratedError('x'),
  RECEIVER_BUSY: new ReceiverBusyError('x'),
  CLAIM_LOST: new ClaimLostError('x'),
  JOB_SUPERSEDED: new JobSupersededError('job-1', 'x'),
};

describe('status, statusCode and expose', () => {
  it.each(Object.entries(ONE_OF_EACH))('%s', (code, err) => {
    const status = STATUS_BY_CODE[code as WebhookErrorCode];
    expect(err.code).toBe(code);
    expect({ status: err.status, statusCode: err.statusCode, expose: err.expose }).toEqual({
      status,
      statusCode: status,
      expose: status < 500,
    });
  });

  it('are writable, as error handlers expect (Koa sets err.status to what it answered)', () => {
    const err = new SignatureInvalidError('x');
    err.status = 418;
    err.expose = false;
    expect([err.status, err.statusCode, err.expose]).toEqual([418, 401, false]);
    expect(new SignatureInvalidError('y').status).toBe(401);
  });

  it('the 4xx and 5xx split is the gateway retry rule: 5xx only where a retry can help', () => {
    const fives = Object.values(ONE_OF_EACH)
      .filter((e) => e.status >= 500)
      .map((e) => e.code)
      .sort();
    // CLAIM_LOST: a transactional handler rolled back, the retry processes the job. JOB_SUPERSEDED is
    // never an answer (onError and the log only), so nothing retries on it.
    expect(fives).toEqual([
      'BODY_UNAVAILABLE',
      'CLAIM_LOST',
      'JOB_SUPERSEDED',
      'RECEIVER_BUSY',
      'STORE_NOT_MIGRATED',
      'STORE_UNAVAILABLE',
    ]);
  });
});

/** A delivery whose body was changed after signing: what a forger sends. */
function forged(): { body: string; headers: Record<string, string> } {
  const d = signed(jobId('forged'));
  return { body: d.body.replace('Grüße', 'Grüsse'), headers: d.headers };
}

type ExpressModule = typeof express5;
const versions: Array<[string, ExpressModule]> = [
  ['Express 5', express5],
  ['Express 4', express4 as unknown as ExpressModule],
];

describe.each(versions)(
  "%s: createMiddleware({ errors: 'next' }) and Express's own final handler",
  (_name, express) => {
    function app(env: string): express5.Express {
      const a = express();
      a.set('env', env);
      a.post('/hook', createMiddleware({ publicKey, errors: 'next', log: {} }), (req, res) => {
        res.json({ job: req.webhook?.jobId });
      });
      return a;
    }
    const post = (a: express5.Express, d: { body: string; headers: Record<string, string> }) =>
      supertest(a)
        .post('/hook')
        .set(d.headers)
        .serialize((x: unknown) => x as string)
        .send(d.body);

    it('a forged request gets 401 (not a 500 page), and production shows no stack', async () => {
      const dev = await post(app('test'), forged());
      expect(dev.status).toBe(401);
      const prod = await post(app('production'), forged());
      expect(prod.status).toBe(401);
      expect(prod.text).toContain('Unauthorized');
      expect(prod.text).not.toContain('at ');
      expect(prod.text).not.toContain('SignatureInvalidError');
    });

    it('the other refusals keep their 4xx; a genuine delivery reaches the route', async () => {
      const d = signed(jobId('express-ok'));
      expect(
        (await post(app('production'), { body: d.body, headers: { 'content-type': 'application/json' } }))
          .status,
      ).toBe(401); // no signature
      expect(
        (
          await post(app('production'), {
            body: d.body,
            headers: { ...d.headers, 'X-Service-Signature': 'zz' },
          })
        ).status,
      ).toBe(401);
      expect(
        (
          await post(app('production'), {
            body: d.body,
            headers: { ...d.headers, 'X-Service-Hash-Algorithm': 'MD5' },
          })
        ).status,
      ).toBe(401);
      const broken = signDelivery('{"event":"async_job_completed","status":"success"}', privatePem(2048)); // no job_id
      expect((await post(app('production'), broken)).status).toBe(400);
      const ok = await post(app('production'), d);
      expect(ok.status).toBe(200);
      expect(ok.body).toEqual({ job: (JSON.parse(d.body) as { job_id: string }).job_id });
    });
  },
);

const closers: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  await Promise.all(closers.map((c) => c()));
});

async function readAll(stream: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c);
  return Buffer.concat(chunks);
}

/** A Redis store whose every operation fails (nothing listens at its port): STORE_UNAVAILABLE, a 5xx. */
async function deadStore(): Promise<RedisIdempotencyStore> {
  const store = new RedisIdempotencyStore({
    url: `redis://127.0.0.1:${await freePort()}`,
    operationTimeoutMs: 300,
    log: {},
  });
  closers.push(() => store.close());
  return store;
}

describe("Koa's default error handler", () => {
  it('answers the 4xx with the message (exposed), a 5xx without it', async () => {
    const verifier = createVerifier({ publicKey });
    const store = await deadStore();
    const app = new Koa();
    app.silent = true;
    app.use(async (ctx) => {
      const { jobId } = verifier.verify(await readAll(ctx.req), ctx.headers);
      await store.claim(jobId, { leaseMs: 5000 });
      ctx.body = 'not reached';
    });
    const server = app.listen(0, '127.0.0.1');
    closers.push(() => new Promise((r) => server.close(r)));
    await new Promise((r) => server.once('listening', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;

    const f = forged();
    const refused = await fetch(url, { method: 'POST', headers: f.headers, body: f.body });
    expect(refused.status).toBe(401);
    expect(await refused.text()).toMatch(/matches the canonical form of this body in no dialect tried/);

    const d = signed(jobId('koa-store'));
    const failed = await fetch(url, { method: 'POST', headers: d.headers, body: d.body });
    expect(failed.status).toBe(503);
    expect(await failed.text()).toBe('Service Unavailable'); // the backend's words stay in the log
  });
});

describe("Fastify's default error handler", () => {
  it('answers the 4xx and 5xx with their code', async () => {
    const verifier = createVerifier({ publicKey });
    const store = await deadStore();
    const app = Fastify();
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) =>
      done(null, body),
    );
    app.post('/hook', async (req) => {
      const { jobId } = verifier.verify(req.body as Buffer, req.headers);
      await store.claim(jobId, { leaseMs: 5000 });
      return 'not reached';
    });
    closers.push(() => app.close());
    const f = forged();
    const refused = await app.inject({ method: 'POST', url: '/hook', headers: f.headers, payload: f.body });
    expect(refused.statusCode).toBe(401);
    expect(refused.json()).toMatchObject({
      statusCode: 401,
      code: 'SIGNATURE_INVALID',
      error: 'Unauthorized',
    });

    const d = signed(jobId('fastify-store'));
    const failed = await app.inject({ method: 'POST', url: '/hook', headers: d.headers, payload: d.body });
    expect(failed.statusCode).toBe(503);
    expect(failed.json()).toMatchObject({ statusCode: 503, code: 'STORE_UNAVAILABLE' });
  });
});

describe("createReceiver from 'jobhook' handed a Node request", () => {
  it('mounted in Express: answers 500 naming jobhook/express, and logs it', async () => {
    const lines: string[] = [];
    const app = express5();
    app.post(
      '/hook',
      createReceiver({
        publicKey,
        onEvent: () => undefined,
        log: { error: (m) => void lines.push(m) },
      }) as never,
    );
    const d = signed(jobId('mounted'));
    const r = await supertest(app)
      .post('/hook')
      .set(d.headers)
      .serialize((x: unknown) => x as string)
      .send(d.body)
      .timeout(5000);
    expect(r.status).toBe(500);
    expect(r.body).toMatchObject({
      error: {
        code: 'INTERNAL_ERROR',
        message: expect.stringContaining("createReceiver from 'jobhook/express'"),
      },
    });
    expect(lines.join('\n')).toContain("'jobhook/express'");
    expect(lines.join('\n')).not.toMatch(/parsed/);
  });

  it('called with a Node request and no response: a TypeError naming jobhook/express', async () => {
    const receive = createReceiver({ publicKey, onEvent: () => undefined, log: {} });
    const app = new Koa();
    let thrown: unknown;
    app.use(async (ctx) => {
      thrown = await receive(ctx.req as never).catch((err: unknown) => err);
      ctx.body = 'done';
    });
    const server = app.listen(0, '127.0.0.1');
    closers.push(() => new Promise((r) => server.close(r)));
    await new Promise((r) => server.once('listening', r));
    await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, {
      method: 'POST',
      body: '{}',
    });
    expect(thrown).toBeInstanceOf(TypeError);
    expect(isWebhookError(thrown)).toBe(false);
    expect((thrown as Error).message).toContain("createReceiver from 'jobhook/express'");
  });
});
