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
