import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import express5 from 'express';
import express4 from 'express4';
import supertest from 'supertest';
import { describe, expect, it } from 'vitest';
import { createMiddleware, createReceiver, keepRawBody } from '../../src/express.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';
import { receiverBehaviour, recorder, type MakeReceiver } from './receiver-table.js';

type ExpressModule = typeof express5;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const versions: Array<[string, ExpressModule]> = [
  ['Express 5', express5],
  ['Express 4', express4 as unknown as ExpressModule],
];

function poster(app: express5.Express): ReturnType<MakeReceiver> {
  return async (body, headers) => {
    // serialize: send the bytes as they are (superagent would JSON-encode a Buffer sent as application/json).
    const r = await supertest(app)
      .post('/hook')
      .set(headers)
      .serialize((x: unknown) => x as string)
      .send(typeof body === 'string' ? body : Buffer.from(body));
    return { status: r.status, body: r.body as never, headers: r.headers as Record<string, string> };
  };
}

/**
 * POSTs a chunked body that never ends (16 KiB every 5 ms) to `app`: the answer, if one
 * came, and whether the server ended the connection within 8 s (the client never stops).
 */
async function endlessPost(
  app: express5.Express,
  headers: Record<string, string>,
): Promise<{ status: number; connection?: string; body: string; closedByServer: boolean }> {
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const { port } = server.address() as AddressInfo;
  let timer: ReturnType<typeof setInterval> | undefined;
  try {
    return await new Promise((resolve) => {
      const answer = { status: 0, connection: undefined as string | undefined, body: '' };
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/hook',
          headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked', ...headers },
        },
        (res) => {
          answer.status = res.statusCode!;
          answer.connection = res.headers.connection;
          res.on('data', (c) => (answer.body += c));
        },
      );
      req.on('error', () => undefined);
      const chunk = Buffer.alloc(16 * 1024, 0x20);
      timer = setInterval(() => req.write(chunk), 5);
      req.once('socket', (socket) =>
        socket.once('close', () => resolve({ ...answer, closedByServer: true })),
      );
      setTimeout(() => resolve({ ...answer, closedByServer: false }), 8000).unref();
    });
  } finally {
    clearInterval(timer);
    server.closeAllConnections();
    server.close();
  }
}

for (const [name, express] of versions) {
  receiverBehaviour(`${name} createReceiver`, (options) => {
    const app = express();
    app.post('/hook', createReceiver(options));
    return poster(app);
  });

  describe(`${name}: mounting and raw bytes`, () => {
    const publicKey = publicPem(2048);

    it('after express.json() without kept bytes → 500 BODY_UNAVAILABLE; the log and onError say how to mount', async () => {
      const app = express();
      app.use(express.json());
      const errors: string[] = [];
      const heard: string[] = [];
      app.post(
        '/hook',
        createReceiver({
          publicKey,
          onEvent: () => undefined,
          log: { error: (m, d) => void errors.push(`${m} ${JSON.stringify(d)}`) },
          onError: (_e, c) => void heard.push(c.stage),
        }),
      );
      const d = signed(jobId());
      const r = await poster(app)(d.body, d.headers);
      expect({ status: r.status, code: r.body.error?.code }).toEqual({
        status: 500,
        code: 'BODY_UNAVAILABLE',
      });
      // A 5xx tells the sender nothing about the receiver's setup; the operator's log does.
      expect(r.body.error?.message).not.toContain('express.json');
      expect(errors.join('\n')).toContain('keepRawBody');
      expect(heard).toEqual(['body']);
    });

    it('the advice the log gives for a body parser ahead, followed literally, takes 2 MB and 20 MB deliveries (not 413)', async () => {
      const errors: string[] = [];
      const first = express();
      first.use(express.json());
      first.post(
        '/hook',
        createReceiver({
          publicKey,
          onEvent: () => undefined,
          log: { error: (m, details) => void errors.push(`${m} ${JSON.stringify(details)}`) },
        }),
      );
      const d = signed(jobId());
      expect((await poster(first)(d.body, d.headers)).status).toBe(500);
      // The code the message tells to write, as written.
      const advice = /(app\.use\(express\.json\(\{.*?\}\)\))/.exec(errors.join('\n'))?.[1];
      expect(advice).toBeDefined();
      const app = express();
      new Function('app', 'express', 'keepRawBody', advice!)(app, express, keepRawBody);
      app.post('/hook', createReceiver({ publicKey, onEvent: () => undefined, log: false }));
      for (const mib of [2, 20]) {
        const large = signed(jobId(), `,"original_response":{"pages":"${'x'.repeat(mib * 1024 * 1024)}"}`);
        const r = await poster(app)(large.body, large.headers);
        expect({ mib, status: r.status, body: r.body }).toMatchObject({
          mib,
          status: 200,
          body: { status: 'processed' },
        });
      }
    });

    it('after express.json({ verify: keepRawBody }) → verified from the kept bytes', async () => {
      const app = express();
      app.use(express.json({ verify: keepRawBody }));
      app.post('/hook', createReceiver({ publicKey, onEvent: () => undefined }));
      const d = signed(jobId());
      expect((await poster(app)(d.body, d.headers)).body).toMatchObject({ status: 'processed' });
    });

    it('after express.raw() or express.text() → uses the Buffer or the text', async () => {
      for (const parser of [express.raw({ type: '*/*' }), express.text({ type: '*/*' })]) {
        const app = express();
        app.use(parser);
        app.post('/hook', createReceiver({ publicKey, onEvent: () => undefined }));
        const d = signed(jobId());
        expect((await poster(app)(d.body, d.headers)).body).toMatchObject({ status: 'processed' });
      }
    });

    it('before express.json(): other routes still get parsed JSON', async () => {
      const app = express();
      app.post('/hook', createReceiver({ publicKey, onEvent: () => undefined }));
      app.use(express.json());
      app.post('/other', (req, res) => void res.json({ echo: (req.body as { a: number }).a }));
      const d = signed(jobId());
      expect((await poster(app)(d.body, d.headers)).status).toBe(200);
      expect((await supertest(app).post('/other').send({ a: 1 })).body).toEqual({ echo: 1 });
    });

    it('createMiddleware sets req.webhook and calls next()', async () => {
      const app = express();
      app.post('/hook', createMiddleware({ publicKey }), (req, res) => {
        const w = (req as unknown as { webhook: { jobId: string; dialect: string } }).webhook;
        res.json({ got: w.jobId, dialect: w.dialect });
      });
      const id = jobId();
      const d = signed(id);
      expect((await supertest(app).post('/hook').set(d.headers).send(d.body)).body).toEqual({
        got: id,
        dialect: 'orjson',
      });
      const bad = await supertest(app).post('/hook').set({ 'content-type': 'application/json' }).send(d.body);
      expect(bad.status).toBe(401);
      expect(bad.body.error.code).toBe('SIGNATURE_MISSING');
    });

    it("createMiddleware with errors: 'next' hands the WebhookError to the error handler", async () => {
      const app = express();
      app.post(
        '/hook',
        createMiddleware({ publicKey, errors: 'next' }),
        (_req, res) => void res.sendStatus(204),
      );
      app.use(
        (
          err: { code?: string },
          _req: express5.Request,
          res: express5.Response,
          _next: express5.NextFunction,
        ) => {
          res.status(418).json({ handled: err.code });
        },
      );
      const d = signed(jobId());
      const r = await supertest(app).post('/hook').set({ 'content-type': 'application/json' }).send(d.body);
      expect({ status: r.status, body: r.body }).toEqual({
        status: 418,
        body: { handled: 'SIGNATURE_MISSING' },
      });
    });

    it('refuses a streamed body on its headers alone: unsigned or forged → 401 before a byte of the body is read, the connection closed', async () => {
      const app = express();
      let read = 0;
      app.post(
        '/hook',
        (req, _res, next) => void (req.on('data', (c: Buffer) => void (read += c.length)), next()),
        createReceiver({ publicKey, onEvent: () => undefined, log: {} }),
      );
      const server = app.listen(0, '127.0.0.1');
      await new Promise((r) => server.once('listening', r));
      const { port } = server.address() as AddressInfo;
      const forged = 'ab'.repeat(256);
      try {
        for (const [headers, code] of [
          [{}, 'SIGNATURE_MISSING'],
          [{ 'x-service-signature': forged }, 'SIGNATURE_INVALID'],
        ] as const) {
          const answer = await new Promise<{ status: number; connection?: string; body: string }>(
            (resolve, reject) => {
              const req = httpRequest(
                {
                  host: '127.0.0.1',
                  port,
                  method: 'POST',
                  path: '/hook',
                  headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked', ...headers },
                },
                (res) => {
                  let body = '';
                  res.on('data', (c) => (body += c));
                  res.on('end', () =>
                    resolve({ status: res.statusCode!, connection: res.headers.connection, body }),
                  );
                },
              );
              req.on('error', reject);
              // The request is never ended: the answer must come anyway, from the headers.
              req.flushHeaders();
            },
          );
          expect({
            status: answer.status,
            code: JSON.parse(answer.body).error.code,
            connection: answer.connection,
          }).toEqual({ status: 401, code, connection: 'close' });
        }
        expect(read).toBe(0);
      } finally {
        server.closeAllConnections();
        server.close();
      }
    });

    it('stops reading a streamed body over the limit and answers 413 before the upload ends', async () => {
      const app = express();
      app.post('/hook', createReceiver({ publicKey, onEvent: () => undefined, maxBodyBytes: 64 * 1024 }));
      // A genuine signature (of another body): the headers pass, so the body is read.
      const signature = signed(jobId()).headers['X-Service-Signature']!;
      const server = app.listen(0, '127.0.0.1');
      await new Promise((r) => server.once('listening', r));
      const { port } = server.address() as AddressInfo;
      try {
        const answer = await new Promise<{ status: number; connection?: string; body: string }>(
          (resolve, reject) => {
            const req = httpRequest(
              {
                host: '127.0.0.1',
                port,
                method: 'POST',
                path: '/hook',
                headers: {
                  'content-type': 'application/json',
                  'transfer-encoding': 'chunked',
                  'x-service-signature': signature,
                },
              },
              (res) => {
                let body = '';
                res.on('data', (c) => (body += c));
                res.on('end', () =>
                  resolve({ status: res.statusCode!, connection: res.headers.connection, body }),
                );
              },
            );
            req.on('error', reject);
            // 128 KiB sent, the request never ended: the answer must come anyway.
            req.write('{"pad":"' + 'x'.repeat(128 * 1024));
          },
        );
        expect(answer.status).toBe(413);
        expect(answer.connection).toBe('close');
        expect(JSON.parse(answer.body).error.code).toBe('BODY_TOO_LARGE');
      } finally {
        server.closeAllConnections();
        server.close();
      }
    });

    it('a body still arriving after bodyTimeoutMs → 408 and the connection closed (a slow sender holds no socket)', async () => {
      const app = express();
      const { lines, log } = recorder();
      app.post('/hook', createReceiver({ publicKey, onEvent: () => undefined, bodyTimeoutMs: 300, log }));
      const signature = signed(jobId()).headers['X-Service-Signature']!;
      const server = app.listen(0, '127.0.0.1');
      await new Promise((r) => server.once('listening', r));
      const { port } = server.address() as AddressInfo;
      try {
        const answer = await new Promise<{
          status: number;
          connection?: string;
          body: string;
          closed: Promise<void>;
        }>((resolve, reject) => {
          const req = httpRequest(
            {
              host: '127.0.0.1',
              port,
              method: 'POST',
              path: '/hook',
              headers: {
                'content-type': 'application/json',
                'content-length': '1000',
                'x-service-signature': signature,
              },
            },
            (res) => {
              let body = '';
              res.on('data', (c) => (body += c));
              const closed = new Promise<void>((r) => req.socket?.once('close', () => r()));
              res.on('end', () =>
                resolve({ status: res.statusCode!, connection: res.headers.connection, body, closed }),
              );
            },
          );
          req.on('error', reject);
          // A few bytes, then nothing: the sender would take forever.
          req.write('{"event":');
        });
        expect(answer.status).toBe(408);
        expect(answer.connection).toBe('close');
        expect(JSON.parse(answer.body).error.code).toBe('BODY_TIMEOUT');
        await answer.closed;
        // Anyone can send slowly: that is not worth a warning.
        expect([...lines.warn, ...lines.error]).toEqual([]);
      } finally {
        server.closeAllConnections();
        server.close();
      }
    });

    it('createMiddleware sets a typed req.webhook; errors: next hands the WebhookError on', async () => {
      const app = express();
      app.post('/hook', createMiddleware({ publicKey, log: {} }), (req, res) => {
        res.json({ got: req.webhook?.jobId, status: req.webhook?.event.status });
      });
      const app2 = express();
      app2.post(
        '/hook',
        createMiddleware({ publicKey, errors: 'next', log: {} }),
        (_req, res) => void res.sendStatus(204),
      );
      app2.use(
        (
          err: { code?: string },
          _req: express5.Request,
          res: express5.Response,
          _next: express5.NextFunction,
        ) => void res.status(418).json({ handled: err.code }),
      );
      const id = jobId();
      const d = signed(id);
      expect((await supertest(app).post('/hook').set(d.headers).send(d.body)).body).toEqual({
        got: id,
        status: 'success',
      });
      const r = await supertest(app2).post('/hook').set({ 'content-type': 'application/json' }).send(d.body);
      expect({ status: r.status, body: r.body }).toEqual({
        status: 418,
        body: { handled: 'SIGNATURE_MISSING' },
      });
    });

    it("errors: 'next' on a streamed body refused on its headers: the application's answer closes the connection, the body is not read on", async () => {
      const app = express();
      app.post(
        '/hook',
        createMiddleware({ publicKey, errors: 'next', log: {} }),
        (_req, res) => void res.sendStatus(204),
      );
      app.use(
        (
          err: { code?: string },
          _req: express5.Request,
          res: express5.Response,
          _next: express5.NextFunction,
        ) => void res.status(401).json({ handled: err.code }),
      );
      const outcome = await endlessPost(app, { 'x-service-signature': 'ab'.repeat(256) });
      expect({
        status: outcome.status,
        handled: JSON.parse(outcome.body).handled,
        connection: outcome.connection,
        closedByServer: outcome.closedByServer,
      }).toEqual({
        status: 401,
        handled: 'SIGNATURE_INVALID',
        connection: 'close',
        closedByServer: true,
      });
    });

    it("errors: 'next' with Express's own final handler (it reads the whole body before answering): a forged endless body is cut at maxBodyBytes", async () => {
      const app = express();
      app.post(
        '/hook',
        createMiddleware({ publicKey, errors: 'next', maxBodyBytes: 64 * 1024, log: {} }),
        (_req, res) => void res.sendStatus(204),
      );
      expect((await endlessPost(app, { 'x-service-signature': 'ab'.repeat(256) })).closedByServer).toBe(true);
    });

    it("errors: 'next' and an error handler that sets Connection: keep-alive: the connection of an unread body still ends after its answer", async () => {
      const app = express();
      app.post(
        '/hook',
        createMiddleware({ publicKey, errors: 'next', log: {} }),
        (_req, res) => void res.sendStatus(204),
      );
      app.use(
        (_err: unknown, _req: express5.Request, res: express5.Response, _next: express5.NextFunction) =>
          void res.set('connection', 'keep-alive').status(401).json({}),
      );
      const { status, closedByServer } = await endlessPost(app, {});
      expect({ status, closedByServer }).toEqual({ status: 401, closedByServer: true });
    });

    it("errors: 'next' and a slow error handler: a body that arrived in time is not cut, the answer comes, and nothing is left listening on the request", async () => {
      const app = express();
      let seen: import('node:http').IncomingMessage | undefined;
      app.post(
        '/hook',
        createMiddleware({ publicKey, errors: 'next', bodyTimeoutMs: 300, log: {} }),
        (_req, res) => void res.sendStatus(204),
      );
      app.use(
        (
          err: { code?: string },
          req: express5.Request,
          res: express5.Response,
          _next: express5.NextFunction,
        ) => {
          seen = req;
          // Reports the error somewhere first, for longer than bodyTimeoutMs.
          setTimeout(() => void res.status(401).json({ handled: err.code }), 800);
        },
      );
      const r = await supertest(app)
        .post('/hook')
        .set({ 'content-type': 'application/json' })
        .send('{"job_id":"x"}');
      expect({ status: r.status, body: r.body }).toEqual({
        status: 401,
        body: { handled: 'SIGNATURE_MISSING' },
      });
      await sleep(50);
      expect({ data: seen!.listenerCount('data'), resume: seen!.listenerCount('resume') }).toEqual({
        data: 0,
        resume: 0,
      });
    });

    it('a declared Content-Length over the limit → 413 without reading', async () => {
      const app = express();
      app.post('/hook', createReceiver({ publicKey, onEvent: () => undefined, maxBodyBytes: 100 }));
      const d = signed(jobId());
      const r = await supertest(app).post('/hook').set(d.headers).send(d.body);
      expect(r.status).toBe(413);
    });
  });
}
