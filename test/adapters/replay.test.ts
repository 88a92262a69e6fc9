/**
 * A replayed genuine signature buys an attacker nothing, on every adapter, on real
 * servers: bodies in flight are bounded before they are read (503 + Retry-After),
 * a request is answered from its own bytes only (never from another request's
 * verification of the same signature), and a replay never blocks the genuine delivery
 * with the same signature.
 */
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { constants, gzipSync } from 'node:zlib';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createReceiver as createAgnosticReceiver,
  MemoryIdempotencyStore,
  signDelivery,
  type IdempotencyStore,
  type ReceiverControls,
} from '../../src/index.js';
import {
  createMiddleware,
  createReceiver as createExpressReceiver,
  keepRawBody,
  type NodeWebhookRequest,
} from '../../src/express.js';
import { createReceiver as createFetchReceiver } from '../../src/web.js';
import { jobId, payloadText } from '../helpers/deliveries.js';
import { privatePem, publicPem } from '../helpers/keys.js';
import { recorder } from './receiver-table.js';

const publicKey = publicPem(2048);
const key = privatePem(2048);
const quiet = { log: {} };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const servers: Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    s.close();
  }
});

async function listen(server: Server): Promise<number> {
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return (server.address() as AddressInfo).port;
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: { status?: string; job_id?: string; error?: { code: string } };
}

/** POSTs over a real socket; `hold` keeps the body from being sent until the answer came (or `send` is called). */
function post(
  port: number,
  body: string | undefined,
  headers: Record<string, string>,
  declared?: number,
): {
  answer: Promise<Answer>;
  sent: () => number;
  send: (more: string | Uint8Array) => void;
  end: () => void;
  abort: () => void;
  flushed: Promise<void>;
} {
  let written = 0;
  const req = httpRequest({
    host: '127.0.0.1',
    port,
    method: 'POST',
    path: '/hook',
    headers: {
      'content-type': 'application/json',
      ...headers,
      ...(declared === undefined ? {} : { 'content-length': String(declared) }),
    },
  });
  const answer = new Promise<Answer>((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () =>
        resolve({
          status: res.statusCode!,
          headers: res.headers,
          body: text === '' ? {} : (JSON.parse(text) as Answer['body']),
        }),
      );
    });
    req.on('error', reject);
  });
  answer.catch(() => undefined);
  const flushed = new Promise<void>((resolve) => {
    req.once('finish', () => resolve());
  });
  const send = (more: string | Uint8Array) => {
    written += Buffer.byteLength(more);
    req.write(more);
  };
  if (body !== undefined) {
    send(body);
    req.end();
  } else req.flushHeaders();
  return { answer, sent: () => written, send, end: () => req.end(), abort: () => req.destroy(), flushed };
}

/** Until a request's verification is on a worker (where the adapter reports its workers), or its body sent and a moment passed (the middleware). */
async function started(
  request: { flushed: Promise<void> },
  controls: ReceiverControls | undefined,
): Promise<void> {
  await request.flushed;
  if (controls === undefined) {
    // Its body is read within a few ms on loopback; its verification on a worker takes 100–300 ms.
    await sleep(30);
    return;
  }
  while ((await controls.health()).workers.busy === 0) await sleep(5);
}

/** A body of exactly `size` bytes, signed. */
function paddedDelivery(size: number): { body: string; headers: Record<string, string> } {
  const base = payloadText(jobId('padded'), ',"pad":""');
  const body = base.replace('"pad":""', `"pad":"${'x'.repeat(size - Buffer.byteLength(base))}"`);
  return signDelivery(body, key);
}

/** The start of a body of `size` bytes that a sender stops sending: as is, or a gzip stream sync-flushed after them (a few hundred bytes that decode to `size`). */
function stalledPrefix(coding: 'identity' | 'gzip', size: number): Buffer {
  const text = Buffer.from('{"job_id":"' + 'x'.repeat(size - 11));
  if (coding === 'identity') return text;
  // Z_SYNC_FLUSH at the end: all of it decodes, and the stream is not finished (no trailer).
  return gzipSync(text, { finishFlush: constants.Z_SYNC_FLUSH });
}

/** `depth` arrays nested around a float: the canonical layout grows with the square of the depth. */
function nested(depth: number): string {
  return '['.repeat(depth) + '0.5e-7' + ']'.repeat(depth);
}

/** A costly body of floats (a worker's work) with the genuine fields. */
function floatBody(id: string, floats: number): string {
  const items = Array.from({ length: floats }, (_, k) => `${k}.${(k * 7919) % 1000}5e-3`).join(',');
  return payloadText(id, `,"values":[${items}]`);
}

/** The memory store with claims that take 0–40 ms, as a remote store's do (a delivery's claim can lose a race it would win in memory). */
function slowClaims(): IdempotencyStore {
  const store = new MemoryIdempotencyStore();
  return {
    claim: async (jobId, options) => {
      await sleep(Math.random() * 40);
      return store.claim(jobId, options);
    },
    renew: (jobId, token, options) => store.renew(jobId, token, options),
    complete: (jobId, token, options) => store.complete(jobId, token, options),
    release: (jobId, token) => store.release(jobId, token),
  };
}

/** The `x-attempt` header of a handler's request (Node's or Fetch's). */
function attemptOf(request: unknown): string {
  const headers = (request as { headers: Headers | IncomingHttpHeaders }).headers;
  return String(headers instanceof Headers ? headers.get('x-attempt') : headers['x-attempt']);
}

type Adapter = {
  name: string;
  offloads: boolean;
  start: (options: Record<string, unknown>) => Promise<{ port: number; controls?: ReceiverControls }>;
};

const adapters: Adapter[] = [
  {
    name: 'createReceiver (jobhook/express) on node:http',
    offloads: true,
    async start(options) {
      const receiver = createExpressReceiver({ publicKey, onEvent: () => undefined, ...quiet, ...options });
      return { port: await listen(createServer((req, res) => receiver(req, res))), controls: receiver };
    },
  },
  {
    name: 'createMiddleware in Express',
    offloads: true,
    async start(options) {
      const app = express();
      const { onEvent: _ignored, store: _none, ...rest } = options;
      app.post('/hook', createMiddleware({ publicKey, ...quiet, ...rest }), (req, res) => {
        res.json({ status: 'verified', job_id: (req as NodeWebhookRequest).webhook!.jobId });
      });
      return { port: await listen(createServer(app)) };
    },
  },
  {
    name: 'Fetch createReceiver on node:http',
    offloads: true,
    async start(options) {
      const receiver = createFetchReceiver({ publicKey, onEvent: () => undefined, ...quiet, ...options });
      const server = createServer(async (req, res) => {
        const headers = new Headers();
        for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers.set(k, v);
        let open = true;
        const body = new ReadableStream<Uint8Array>({
          start(controller) {
            req.on('data', (c: Buffer) => open && controller.enqueue(new Uint8Array(c)));
            req.on('end', () => open && ((open = false), controller.close()));
            req.on('error', (e) => open && ((open = false), controller.error(e)));
          },
          cancel() {
            open = false;
            req.pause();
          },
        });
        const response = await receiver(
          new Request('http://127.0.0.1/hook', {
            method: 'POST',
            headers,
            body,
            duplex: 'half',
          } as RequestInit),
        );
        res.writeHead(response.status, Object.fromEntries(response.headers));
        res.end(await response.text());
      });
      return { port: await listen(server), controls: receiver };
    },
  },
];

describe.each(adapters)('$name', ({ name, start, offloads }) => {
  it('maxInFlightBytes counts the bytes that arrived, not the bytes declared: 503 + Retry-After once they would pass it; released on every path', async () => {
    const { port } = await start({ maxBodyBytes: 1_000_000, maxInFlightBytes: 1_000_000 });
    // A large delivery being uploaded slowly holds what it sent so far, not its declared 900 kB.
    const big = paddedDelivery(900_000);
    const a = post(port, undefined, big.headers, 900_000);
    a.send(big.body.slice(0, 1000));
    await sleep(300);
    // Another that declares 200 kB is admitted and read whole while the first trickles.
    const other = paddedDelivery(200_000);
    expect((await post(port, other.body, other.headers).answer).status).toBe(200);
    // A small genuine delivery too.
    const small = signDelivery(payloadText(jobId('small')), key);
    expect((await post(port, small.body, small.headers).answer).status).toBe(200);
    // The first sends most of its body: 700 kB arrived (allocated at once past 1 MiB only, so counted as sent).
    a.send(big.body.slice(1000, 700_000));
    await sleep(300);
    // Now a 400 kB body passes the budget as its bytes arrive: 503 + Retry-After mid-body.
    const third = paddedDelivery(400_000);
    const t = post(port, undefined, third.headers, 400_000);
    t.send(third.body.slice(0, 350_000));
    const refused = await t.answer;
    expect({
      status: refused.status,
      code: refused.body.error?.code,
      retryAfter: refused.headers['retry-after'],
    }).toEqual({ status: 503, code: 'RECEIVER_BUSY', retryAfter: '2' });
    expect(t.sent()).toBeLessThan(400_000);
    // The slow one finishes and is processed; its bytes are released.
    a.send(big.body.slice(700_000));
    expect((await a.answer).status).toBe(200);
    expect((await post(port, third.body, third.headers).answer).status).toBe(200);
    // An upload aborted mid-way releases its bytes too: the next large one is admitted.
    const aborted = paddedDelivery(900_000);
    const c = post(port, undefined, aborted.headers, 900_000);
    c.send(aborted.body.slice(0, 600_000));
    await sleep(200);
    c.abort();
    await sleep(200);
    const again = paddedDelivery(900_000);
    expect((await post(port, again.body, again.headers).answer).status).toBe(200);
  });

  it('bodies that trickle in hold only what they sent: 40 declared to fill maxInFlightBytes cannot keep genuine deliveries out', async () => {
    const { port } = await start({ maxBodyBytes: 1_000_000, maxInFlightBytes: 1_000_000 });
    const replayed = signDelivery(payloadText(jobId('trickled')), key);
    // A captured signature, 40 connections each declaring 62.5 kB (2.5 MB promised against a 1 MB budget), a byte each.
    const slow = Array.from({ length: 40 }, () => post(port, undefined, replayed.headers, 62_500));
    for (const t of slow) t.send('[');
    await sleep(300);
    const answers = [];
    for (let k = 0; k < 10; k++) {
      const genuine = signDelivery(payloadText(jobId(`beside-${k}`)), key);
      answers.push((await post(port, genuine.body, genuine.headers).answer).status);
    }
    const large = paddedDelivery(500_000);
    answers.push((await post(port, large.body, large.headers).answer).status);
    expect(answers).toEqual(Array(11).fill(200));
    for (const t of slow) t.abort();
  });

  it.each(['identity', 'gzip'] as const)(
    'stalled %s bodies under one captured signature take one share: genuine deliveries under other signatures are answered 200, and the log says what is happening',
    async (coding) => {
      const { lines, log } = recorder();
      const { port, controls } = await start({ maxBodyBytes: 1_000_000, maxInFlightBytes: 1_000_000, log });
      const replayed = signDelivery(payloadText(jobId('stalled')), key);
      // 40 connections, one signature, each sends ~62 kB (gzip: a sync-flushed prefix of a few hundred bytes that decodes to it) and stalls.
      const prefix = stalledPrefix(coding, 62_000);
      const headers =
        coding === 'gzip'
          ? { ...replayed.headers, 'content-encoding': 'gzip', 'transfer-encoding': 'chunked' }
          : replayed.headers;
      const stalled = Array.from({ length: 40 }, () =>
        post(port, undefined, headers, coding === 'gzip' ? undefined : 62_500),
      );
      for (const t of stalled) t.send(prefix);
      await sleep(500);
      const answers = [];
      for (let k = 0; k < 10; k++) {
        const genuine = signDelivery(payloadText(jobId(`beside-stalled-${k}`)), key);
        answers.push((await post(port, genuine.body, genuine.headers).answer).status);
      }
      expect(answers).toEqual(Array(10).fill(200));
      // Those past the signature's share were refused 503 at once, and the log names one signature, not a limit to raise.
      const refused = await Promise.all(
        stalled.map((t) =>
          Promise.race([
            t.answer.then(
              (a) => a.status,
              () => -1,
            ),
            sleep(300).then(() => 0),
          ]),
        ),
      );
      expect(refused.filter((status) => status === 503).length).toBeGreaterThanOrEqual(40 - 8);
      const busy = lines.warn.filter((l) => l.includes('RECEIVER_BUSY'));
      expect(busy.join('\n')).toMatch(/carrying one signature/);
      expect(busy.join('\n')).not.toMatch(/raise maxInFlightBytes/);
      if (controls !== undefined) {
        const { admission } = await controls.health();
        expect(admission.busy).toBe(true);
        expect(admission.refused.signature).toBeGreaterThanOrEqual(40 - 8);
        expect(admission.largestSignature.requests).toBeLessThanOrEqual(8);
      }
      for (const t of stalled) t.abort();
    },
  );

  it('a body that stops arriving is answered 408 at the rate floor (a quarter of bodyTimeoutMs here, 5 s by default), not at bodyTimeoutMs', async () => {
    const { port } = await start({ bodyTimeoutMs: 4000 });
    const d = paddedDelivery(200_000);
    const t = post(port, undefined, d.headers, 200_000);
    t.send(d.body.slice(0, 50_000));
    const a = await t.answer;
    expect({ status: a.status, code: a.body.error?.code }).toEqual({ status: 408, code: 'BODY_TIMEOUT' });
    expect((a.body.error as { message?: string }).message).toMatch(
      /stopped arriving: fewer than 1024 bytes came in 1000 ms/,
    );
  });

  it('a large body sent at once is read whole (filled as it arrives, the loop let turn after each MiB), declared or chunked', async () => {
    const { port } = await start({});
    const declared = paddedDelivery(3_000_000);
    const d = await post(port, declared.body, declared.headers).answer;
    expect([d.status, d.body.job_id]).toEqual([200, JSON.parse(declared.body).job_id]);
    const chunked = paddedDelivery(3_000_000);
    const c = post(port, undefined, { ...chunked.headers, 'transfer-encoding': 'chunked' });
    for (let at = 0; at < chunked.body.length; at += 700_000) c.send(chunked.body.slice(at, at + 700_000));
    c.end();
    const a = await c.answer;
    expect([a.status, a.body.job_id]).toEqual([200, JSON.parse(chunked.body).job_id]);
  });

  it('a chunked body is counted as it arrives: 503 once it would pass maxInFlightBytes', async () => {
    const { port } = await start({ maxBodyBytes: 1_000_000, maxInFlightBytes: 1_000_000 });
    const big = paddedDelivery(900_000);
    const a = post(port, undefined, big.headers, 900_000);
    a.send(big.body.slice(0, 800_000));
    await sleep(300);
    const other = paddedDelivery(300_000);
    const b = post(port, undefined, { ...other.headers, 'transfer-encoding': 'chunked' });
    b.send(other.body.slice(0, 50_000));
    await sleep(100);
    b.send(other.body.slice(50_000, 250_000));
    const refused = await b.answer;
    expect({
      status: refused.status,
      code: refused.body.error?.code,
      retryAfter: refused.headers['retry-after'],
    }).toEqual({ status: 503, code: 'RECEIVER_BUSY', retryAfter: '2' });
    a.send(big.body.slice(800_000));
    expect((await a.answer).status).toBe(200);
  });

  // Concurrency needs the verification off the event loop (while it runs on this thread, nothing else is read).
  it.runIf(offloads)(
    "a replay sent while the genuine delivery is verified gets the answer of its own bytes, never the genuine one's",
    async () => {
      const ran: string[] = [];
      const { port, controls } = await start({
        workerThresholdBytes: 1024,
        store: slowClaims(),
        onEvent: (_e: unknown, c: { request: unknown }) => void ran.push(attemptOf(c.request)),
      });
      const id = jobId('shared');
      const genuine = signDelivery(floatBody(id, 150_000), key);
      const first = post(port, genuine.body, { ...genuine.headers, 'x-attempt': 'genuine' });
      await started(first, controls);
      // Replays of the same signature with other bodies (one not even JSON, one an attacker's JSON) while it is verified.
      const bodies = [
        '{',
        genuine.body.replace('"status":"success"', '"status":"fail"'),
        '{"job_id":"attacker","amount":1000000}',
      ];
      const replays = bodies.map((b, k) => post(port, b, { ...genuine.headers, 'x-attempt': `replay-${k}` }));
      const answers = await Promise.all([first.answer, ...replays.map((r) => r.answer)]);
      expect(answers.map((a) => [a.status, a.body.error?.code ?? a.body.job_id])).toEqual([
        [200, id],
        [400, 'BODY_MALFORMED'],
        [401, 'SIGNATURE_INVALID'],
        [401, 'SIGNATURE_INVALID'],
      ]);
      // The handler heard only the request whose own bytes verified (the middleware has no handler: its route answered the genuine one only).
      if (name !== 'createMiddleware in Express') expect(ran).toEqual(['genuine']);
    },
  );

  it('concurrent copies of one delivery, with the same bytes, run its job once', async () => {
    const runs: string[] = [];
    const { port } = await start({
      workerThresholdBytes: 1024,
      store: slowClaims(),
      onEvent: (_e: unknown, c: { request: unknown }) => void runs.push(attemptOf(c.request)),
    });
    const id = jobId('copies');
    const genuine = signDelivery(floatBody(id, 20_000), key);
    const answers = await Promise.all(
      [0, 1, 2].map((k) => post(port, genuine.body, { ...genuine.headers, 'x-attempt': `copy-${k}` }).answer),
    );
    for (const a of answers) expect([200, 503]).toContain(a.status);
    expect(answers.filter((a) => a.status === 200).length).toBeGreaterThanOrEqual(1);
    if (name !== 'createMiddleware in Express') expect(runs).toHaveLength(1);
  });

  it('a replayed signature with a small costly body (deep nesting, floats) is verified on a worker: the event loop stays free', async () => {
    const { port, controls } = await start({});
    const id = jobId('costly');
    const genuine = signDelivery(payloadText(id), key);
    // ~190 kB, far under the 1 MiB size threshold, but ~100 MB of canonical text over the dialects.
    const costly = payloadText(id, `,"deep":[${Array(90).fill(nested(400)).join(',')}]`);
    expect(Buffer.byteLength(costly)).toBeLessThan(400_000);
    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    let busy = 0;
    const watch = setInterval(
      () => void controls?.health().then((h) => (busy = Math.max(busy, h.workers.busy))),
      5,
    );
    const answer = await post(port, costly, genuine.headers).answer;
    clearInterval(watch);
    loop.disable();
    expect({ status: answer.status, code: answer.body.error?.code }).toEqual({
      status: 401,
      code: 'SIGNATURE_INVALID',
    });
    // Structural where the adapter reports its workers; elsewhere the loop delay, a generous
    // bound (on this thread the verification holds it 0.7–3 s; on a worker, a few ms).
    if (controls !== undefined) expect(busy).toBe(1);
    else expect(loop.max / 1e6).toBeLessThan(300);
  });

  // The middleware verifies only: it never learns whether the job completed.
  it.runIf(name !== 'createMiddleware in Express')(
    'a signature already verified and completed here costs no canonical work: its bytes again are duplicate, any other body 401',
    async () => {
      let verified = 0;
      let runs = 0;
      const { port, controls } = await start({
        now: () => (verified++, Date.now()),
        onEvent: () => void runs++,
      });
      const id = jobId('known');
      const genuine = signDelivery(payloadText(id), key);
      expect((await post(port, genuine.body, genuine.headers).answer).status).toBe(200);
      expect(verified).toBe(1);
      // The gateway's retry: the same bytes.
      const retry = await post(port, genuine.body, genuine.headers).answer;
      expect([retry.status, retry.body.status, retry.body.job_id]).toEqual([200, 'duplicate', id]);
      // A replay with a costly body (on a worker it would take seconds): refused without canonical work, no worker used.
      let busy = 0;
      const watch = setInterval(
        () => void controls?.health().then((h) => (busy = Math.max(busy, h.workers.busy))),
        5,
      );
      const replay = await post(port, floatBody(id, 150_000), genuine.headers).answer;
      clearInterval(watch);
      expect({ status: replay.status, code: replay.body.error?.code }).toEqual({
        status: 401,
        code: 'SIGNATURE_INVALID',
      });
      expect(busy).toBe(0);
      expect(verified).toBe(1);
      expect(runs).toBe(1);
    },
  );

  it('a signature verified here, replayed with another body, is refused without parsing that body', async () => {
    const { port } = await start({});
    const id = jobId('remembered');
    const genuine = signDelivery(payloadText(id), key);
    expect((await post(port, genuine.body, genuine.headers).answer).status).toBe(200);
    // Not JSON: parsed, it would be 400 BODY_MALFORMED; known, it is not what was signed.
    const replay = await post(port, '{', genuine.headers).answer;
    expect({ status: replay.status, code: replay.body.error?.code }).toEqual({
      status: 401,
      code: 'SIGNATURE_INVALID',
    });
    // The gateway's retry (the same bytes) still goes through.
    const retry = await post(port, genuine.body, genuine.headers).answer;
    expect([retry.status, retry.body.job_id]).toEqual([200, id]);
  });

  it('a replay that fails verification never blocks the genuine delivery with the same signature', async () => {
    const { port, controls } = await start({ workerThresholdBytes: 1024 });
    const id = jobId('genuine');
    const genuine = signDelivery(payloadText(id), key);
    // The replay: the genuine signature with a costly body that is not what was signed, sent first.
    const replay = post(port, floatBody(id, 150_000), genuine.headers);
    await started(replay, controls);
    const delivery = post(port, genuine.body, genuine.headers);
    const [r, d] = await Promise.all([replay.answer, delivery.answer]);
    expect({ status: r.status, code: r.body.error?.code }).toEqual({
      status: 401,
      code: 'SIGNATURE_INVALID',
    });
    expect(d.status).toBe(200);
    expect(d.body.job_id).toBe(id);
  });
});

describe('createMiddleware after express.json({ verify: keepRawBody }) (the README recipe)', () => {
  it('a replay sent while the genuine delivery is verified never reaches the route', async () => {
    const reached: unknown[] = [];
    const app = express();
    app.use(express.json({ limit: '25mb', verify: keepRawBody }));
    app.post('/hook', createMiddleware({ publicKey, workerThresholdBytes: 1024, ...quiet }), (req, res) => {
      reached.push({
        webhook: (req as NodeWebhookRequest).webhook!.jobId,
        body: (req.body as { job_id: string }).job_id,
      });
      res.json({ status: 'verified', job_id: (req as NodeWebhookRequest).webhook!.jobId });
    });
    const port = await listen(createServer(app));
    const id = jobId('recipe');
    const genuine = signDelivery(floatBody(id, 150_000), key);
    const first = post(port, genuine.body, genuine.headers);
    await started(first, undefined);
    const replay = await post(port, '{"job_id":"attacker","amount":1000000}', genuine.headers).answer;
    expect({ status: replay.status, code: replay.body.error?.code }).toEqual({
      status: 401,
      code: 'SIGNATURE_INVALID',
    });
    expect((await first.answer).status).toBe(200);
    expect(reached).toEqual([{ webhook: id, body: id }]);
  });
});

describe('Fetch createReceiver (jobhook/web): every byte it holds is counted', () => {
  it('small declared bodies read whole (arrayBuffer) hold their declared size in flight: 30 that stall under 30 signatures stay within maxInFlightBytes', async () => {
    const fetchAdapter = adapters.find((a) => a.name.startsWith('Fetch'))!;
    const { port, controls } = await fetchAdapter.start({
      maxBodyBytes: 1_000_000,
      maxInFlightBytes: 1_000_000,
    });
    const stalled = Array.from({ length: 30 }, (_, k) => {
      const d = paddedDelivery(60_000);
      const t = post(port, undefined, { ...d.headers, 'x-k': String(k) }, 60_000);
      t.send(d.body.slice(0, 59_000));
      return t;
    });
    await sleep(500);
    const { admission } = await controls!.health();
    expect(admission.bytes).toBeLessThanOrEqual(admission.maxBytes);
    // 1 MB holds 16 of them; the rest are refused as they come, before their bytes are taken (waited for up to 10 s on a loaded machine).
    const busy: string[] = [];
    for (const t of stalled)
      void t.answer.then(
        (a) => a.body.error?.code === 'RECEIVER_BUSY' && busy.push('busy'),
        () => undefined, // the ones still stalled are aborted below: their answer never comes
      );
    for (let k = 0; k < 40 && busy.length < 30 - 16; k++) await sleep(250);
    expect(busy.length).toBeGreaterThanOrEqual(30 - 16);
    for (const t of stalled) t.abort();
  });
});

describe('client aborts', () => {
  it('Fetch createReceiver (jobhook/web) on node:http: a request closed mid-upload is logged at debug, answered 400 CLIENT_ABORTED to nobody, and never counted failed', async () => {
    const { lines, log } = recorder();
    const outcomes: { outcome: string; code?: string }[] = [];
    const fetchAdapter = adapters.find((a) => a.name.startsWith('Fetch'))!;
    const { port } = await fetchAdapter.start({
      log,
      onDelivery: (o: { outcome: string }) => outcomes.push(o),
    });
    for (const size of [500_000, 60_000]) {
      const d = paddedDelivery(size);
      const upload = post(port, undefined, d.headers, size);
      upload.send(d.body.slice(0, 1000));
      await sleep(200);
      upload.abort();
    }
    await sleep(300);
    expect(lines.error).toEqual([]);
    expect(lines.debug.join('\n')).toMatch(/aborted/);
    expect(outcomes.map((o) => `${o.outcome} ${o.code}`)).toEqual([
      'refused CLIENT_ABORTED',
      'refused CLIENT_ABORTED',
    ]);
  });

  it.each([
    [
      'createReceiver (jobhook/express)',
      (log: object) => createExpressReceiver({ publicKey, onEvent: () => undefined, log }),
    ],
    ['createMiddleware', (log: object) => createMiddleware({ publicKey, log })],
  ])('%s: a request closed mid-upload is logged at debug, not as an error', async (_name, make) => {
    const lines: Record<string, string[]> = { debug: [], info: [], warn: [], error: [] };
    const log = Object.fromEntries(
      Object.keys(lines).map((level) => [level, (m: string) => void lines[level]!.push(m)]),
    );
    const handler = make(log);
    const port = await listen(createServer((req, res) => handler(req, res)));
    const d = paddedDelivery(500_000);
    const upload = post(port, undefined, d.headers, 500_000);
    upload.send(d.body.slice(0, 1000));
    await sleep(200);
    upload.abort();
    await sleep(300);
    expect(lines.error).toEqual([]);
    expect((lines.debug ?? []).join('\n')).toMatch(/aborted/);
  });
});

describe('createReceiver (jobhook, agnostic)', () => {
  it('answers each body from its own bytes (the same text shares one verification) and refuses past maxInFlightBytes', async () => {
    let verified = 0;
    const receive = createAgnosticReceiver({
      publicKey,
      onEvent: () => undefined,
      workerThresholdBytes: 1024,
      maxBodyBytes: 4_000_000,
      maxInFlightBytes: 4_000_000,
      now: () => (verified++, Date.now()),
      ...quiet,
    });
    const genuine = signDelivery(floatBody(jobId('agnostic'), 150_000), key);
    const copy = { body: `${genuine.body}`, headers: { ...genuine.headers } };
    const answers = await Promise.all([
      receive(genuine),
      receive(copy),
      receive({ body: '{', headers: genuine.headers }),
      receive({ body: '[]', headers: genuine.headers }),
    ]);
    expect(answers[0]!.status).toBe(200);
    expect([200, 503]).toContain(answers[1]!.status);
    expect(
      answers.slice(2).map((a) => [a.status, (JSON.parse(a.body) as { error: { code: string } }).error.code]),
    ).toEqual([
      [400, 'BODY_MALFORMED'],
      [401, 'SIGNATURE_INVALID'],
    ]);
    // The genuine text and its copy: one verification.
    expect(verified).toBe(1);
    // Bodies already in hand count too: three of 1.5 MB do not fit in 4 MB at once.
    const big = [paddedDelivery(1_500_000), paddedDelivery(1_500_000), paddedDelivery(1_500_000)];
    const busy = await Promise.all(big.map((d) => receive(d)));
    expect(busy.map((a) => a.status).sort()).toEqual([200, 200, 503]);
    expect(busy.find((a) => a.status === 503)!.headers['retry-after']).toBe('2');
    await receive.close();
  });
});
