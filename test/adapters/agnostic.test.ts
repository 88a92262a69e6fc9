/**
 * The framework-agnostic receiver from `jobhook`, called directly ({ body, headers } in,
 * { status, headers, body } out) and behind a real Fastify server, the way its README
 * recipe mounts it: the same behaviour table as Express and Fetch.
 */
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { createReceiver } from '../../src/index.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';
import { receiverBehaviour } from './receiver-table.js';

receiverBehaviour('agnostic createReceiver', (options) => {
  const receive = createReceiver(options);
  return async (body, headers) => {
    const answer = await receive({ body, headers });
    return { status: answer.status, body: JSON.parse(answer.body) as never, headers: answer.headers };
  };
});

const servers: Array<{ close(): Promise<unknown> }> = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

receiverBehaviour('Fastify + agnostic createReceiver', (options) => {
  const receive = createReceiver(options);
  const app = Fastify({ bodyLimit: 64 * 1024 * 1024 });
  // Keep the raw bytes: the recipe from the README.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  app.post('/hook', async (req, reply) => {
    const answer = await receive({
      body: (req.body as Buffer | undefined) ?? new Uint8Array(0),
      headers: req.headers,
    });
    return reply.code(answer.status).headers(answer.headers).send(answer.body);
  });
  servers.push(app);
  const ready = app
    .listen({ port: 0, host: '127.0.0.1' })
    .then(() => `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/hook`);
  return async (body, headers) => {
    const res = await fetch(await ready, { method: 'POST', headers, body: body as BodyInit });
    return {
      status: res.status,
      body: (await res.json()) as never,
      headers: Object.fromEntries(res.headers),
    };
  };
});

describe('agnostic createReceiver specifics', () => {
  it('takes a body as text or bytes and any form of headers; a compressed body must be bytes', async () => {
    const receive = createReceiver({ publicKey: publicPem(2048), onEvent: () => undefined, log: {} });
    const d = signed(jobId());
    const answer = await receive({ body: d.body, headers: new Headers(d.headers) });
    expect(answer).toMatchObject({
      status: 200,
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    expect(JSON.parse(answer.body)).toEqual({
      status: 'processed',
      job_id: (JSON.parse(d.body) as { job_id: string }).job_id,
    });
    const text = await receive({
      body: 'not really gzip',
      headers: { ...d.headers, 'content-encoding': 'gzip' },
    });
    expect(text.status).toBe(400);
    await expect(receive(undefined as never)).rejects.toThrow(TypeError);
  });
});

describe('agnostic createReceiver: Content-Encoding of bytes in hand', () => {
  it('decodes off the calling thread: the event loop turns while a br body 25 MiB decoded is refused 413', async () => {
    const { brotliCompressSync } = await import('node:zlib');
    const receive = createReceiver({ publicKey: publicPem(2048), onEvent: () => undefined, log: {} });
    const d = signed(jobId('bomb'));
    // A few hundred bytes that decode to 26 MB: past maxBodyBytes (25 MiB).
    const bomb = brotliCompressSync(Buffer.alloc(26 * 1024 * 1024, 0x20));
    expect(bomb.byteLength).toBeLessThan(1024);
    let turned = false;
    setImmediate(() => (turned = true));
    const answer = await receive({ body: bomb, headers: { ...d.headers, 'content-encoding': 'br' } });
    expect(answer.status).toBe(413);
    // Decoded synchronously, the answer came before the loop could turn.
    expect(turned).toBe(true);
    await receive.close();
  });
});

describe('agnostic createReceiver: answers written in one piece', () => {
  it('every answer carries its Content-Length, so node:http sends it whole, never chunked', async () => {
    const { createServer, request } = await import('node:http');
    const receive = createReceiver({ publicKey: publicPem(2048), onEvent: () => undefined, log: {} });
    // The plain node:http recipe: read the body, ask the receiver, write what it answers.
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        void receive({ body: Buffer.concat(chunks), headers: req.headers }).then((a) =>
          res.writeHead(a.status, a.headers).end(a.body),
        );
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    const post = (body: string, headers: Record<string, string>) =>
      new Promise<{ status: number; headers: Record<string, unknown>; body: string }>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/', headers }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
        });
        req.on('error', reject);
        req.end(body);
      });
    const d = signed(jobId('length'));
    try {
      for (const [body, headers, status] of [
        [d.body, d.headers, 200],
        [d.body, d.headers, 200], // duplicate
        [d.body, { ...d.headers, 'X-Service-Signature': 'ab'.repeat(256) }, 401],
        [d.body.replace('"', ' "'), d.headers, 401], // another body under the known signature
      ] as const) {
        const res = await post(body, { ...headers });
        expect(res.status).toBe(status);
        expect(res.headers['transfer-encoding']).toBeUndefined();
        expect(res.headers['content-length']).toBe(String(Buffer.byteLength(res.body)));
      }
      const direct = await receive({ body: d.body, headers: d.headers });
      expect(direct.headers['content-length']).toBe(String(Buffer.byteLength(direct.body)));
    } finally {
      server.close();
      await receive.close();
    }
  });
});
