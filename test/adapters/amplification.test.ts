/**
 * Issue "signature first": bodies built to make a receiver work (1,000× canonical
 * expansion, 10^5-digit numbers, 10 MB strings) sent with a forged signature are
 * refused with 401 without being parsed, the process stays up, and a genuine delivery
 * sent alongside is processed. Over real Express (supertest) and the Fetch handler.
 */
import express from 'express';
import supertest from 'supertest';
import { describe, expect, it } from 'vitest';
import { createReceiver as createExpressReceiver } from '../../src/express.js';
import { createReceiver as createWebReceiver } from '../../src/web.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';

const FORGED = { 'content-type': 'application/json', 'X-Service-Signature': 'ab'.repeat(256) };
const nestedOf = (bytes: number) => {
  const items = Math.max(1, Math.floor((bytes - 2000) / 2));
  return '['.repeat(999) + '1,'.repeat(items) + '1' + ']'.repeat(999);
};
const bodies: Array<[string, string]> = [
  ['100 KB nested 999 deep', nestedOf(100_000)],
  ['400 KB nested 999 deep', nestedOf(400_000)],
  ['4 MB nested 999 deep', nestedOf(4_000_000)],
  ['a 10^5-digit number', `{"n":${'9'.repeat(100_000)}}`],
  ['a 10 MB string', `{"s":"${'x'.repeat(10_000_000)}"}`],
];

type Post = (body: string, headers: Record<string, string>) => Promise<{ status: number; code?: string }>;

function expressPost(): { post: Post; processed: string[] } {
  const processed: string[] = [];
  const app = express();
  app.post(
    '/hook',
    createExpressReceiver({ publicKey: publicPem(2048), onEvent: (e) => void processed.push(e.job_id) }),
  );
  const agent = supertest(app);
  return {
    processed,
    post: async (body, headers) => {
      const r = await agent.post('/hook').set(headers).send(body);
      return { status: r.status, code: (r.body as { error?: { code: string } }).error?.code };
    },
  };
}

function fetchPost(): { post: Post; processed: string[] } {
  const processed: string[] = [];
  const handler = createWebReceiver({
    publicKey: publicPem(2048),
    onEvent: (e) => void processed.push(e.job_id),
  });
  return {
    processed,
    post: async (body, headers) => {
      const res = await handler(new Request('http://127.0.0.1/hook', { method: 'POST', headers, body }));
      return { status: res.status, code: ((await res.json()) as { error?: { code: string } }).error?.code };
    },
  };
}

for (const [name, make] of [
  ['Express', expressPost],
  ['Fetch handler', fetchPost],
] as const) {
  describe(`${name}: forged amplification bodies`, () => {
    it.each(bodies)(
      '%s → 401 SIGNATURE_INVALID, and a genuine delivery sent alongside → 200',
      async (_label, body) => {
        const { post, processed } = make();
        const genuine = signed(jobId('alongside'));
        const [forged, real] = await Promise.all([post(body, FORGED), post(genuine.body, genuine.headers)]);
        expect(forged).toEqual({ status: 401, code: 'SIGNATURE_INVALID' });
        expect(real).toEqual({ status: 200, code: undefined });
        expect(processed).toHaveLength(1);
        // Still up: the next delivery is served.
        const next = signed(jobId('after'));
        expect((await post(next.body, next.headers)).status).toBe(200);
      },
    );

    it('a forged signature on a body that is not JSON → 401, not 400 (the body is not parsed)', async () => {
      const { post } = make();
      expect(await post('{"job_id": ', FORGED)).toEqual({ status: 401, code: 'SIGNATURE_INVALID' });
      expect(await post('{"job_id": ', { 'content-type': 'application/json' })).toEqual({
        status: 401,
        code: 'SIGNATURE_MISSING',
      });
    });
  });
}

describe('forged large bodies and the verification workers', () => {
  it('40 forged 2 MB deliveries at once never take a worker or a place in its queue: all 401, and genuine large deliveries alongside are processed, never 503', async () => {
    const processed: string[] = [];
    const app = express();
    // One worker, queue of 8: were forged bodies queued, most of these would be 503 RECEIVER_BUSY.
    const receiver = createExpressReceiver({
      publicKey: publicPem(2048),
      workerThresholdBytes: 64 * 1024,
      workerPoolSize: 1,
      log: {},
      onEvent: (e) => void processed.push(e.job_id),
    });
    app.post('/hook', receiver);
    const agent = supertest(app);
    const pad = `,"pad":"${'x'.repeat(2_000_000)}"`;
    const forgedBody = `{"s":"${'y'.repeat(2_000_000)}"}`;
    const genuine = Array.from({ length: 3 }, () => signed(jobId('large'), pad));
    const answers = await Promise.all([
      ...Array.from({ length: 40 }, () => agent.post('/hook').set(FORGED).send(forgedBody)),
      ...genuine.map((d) => agent.post('/hook').set(d.headers).send(d.body)),
    ]);
    const statuses = answers.map(
      (r) => `${r.status} ${(r.body as { error?: { code: string } }).error?.code ?? 'ok'}`,
    );
    expect(statuses.slice(0, 40)).toEqual(Array(40).fill('401 SIGNATURE_INVALID'));
    expect(statuses.slice(40)).toEqual(Array(3).fill('200 ok'));
    expect(processed).toHaveLength(3);
    await receiver.close();
  });
});
