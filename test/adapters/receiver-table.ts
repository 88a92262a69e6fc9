import { describe, expect, it } from 'vitest';
import { MemoryIdempotencyStore, type IdempotencyStore, type JobCompletedEvent } from '../../src/index.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { deliveries, publicPem } from '../helpers/keys.js';

export interface PostResult {
  status: number;
  body: { status?: string; job_id?: string; error?: { code: string; message: string } };
  headers: Record<string, string | undefined>;
}
export type Post = (body: string | Uint8Array, headers: Record<string, string>) => Promise<PostResult>;

export interface ReceiverTestOptions {
  publicKey: string;
  onEvent: (event: JobCompletedEvent, context: { jobId: string; dialect: string }) => void | Promise<void>;
  store?: IdempotencyStore;
  maxBodyBytes?: number;
}

/** Builds a receiver of one framework and returns how to POST to it. */
export type MakeReceiver = (options: ReceiverTestOptions) => Post;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** DESIGN §4's answers, the same for every framework adapter. */
export function receiverBehaviour(name: string, make: MakeReceiver): void {
  describe(`${name}: receiver answers (DESIGN §4)`, () => {
    const publicKey = publicPem(2048);

    it('200 processed, then 200 duplicate without calling the handler again', async () => {
      const seen: string[] = [];
      const post = make({ publicKey, onEvent: (e) => void seen.push(e.job_id) });
      const d = signed(jobId());
      const first = await post(d.body, d.headers);
      expect(first.status).toBe(200);
      expect(first.body).toMatchObject({ status: 'processed' });
      const again = await post(d.body, d.headers);
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({ status: 'duplicate' });
      expect(seen).toHaveLength(1);
    });

    it('accepts a delivery signed by Python (independent signer) and passes its dialect', async () => {
      const fixture = deliveries().find((x) => x.name === 'python 2048 success pretty')!;
      const dialects: string[] = [];
      const post = make({ publicKey, onEvent: (_e, c) => void dialects.push(c.dialect) });
      expect((await post(fixture.body, fixture.headers)).status).toBe(200);
      expect(dialects).toEqual(['python']);
    });

    it('header names in any case', async () => {
      const post = make({ publicKey, onEvent: () => undefined });
      const d = signed(jobId());
      const sig = d.headers['X-Service-Signature']!;
      expect((await post(d.body, { 'content-type': 'application/json', 'X-SERVICE-SIGNATURE': sig, 'x-service-hash-algorithm': 'SHA256' })).status).toBe(200);
      const e = signed(jobId());
      expect((await post(e.body, { 'content-type': 'application/json', 'x-service-signature': e.headers['X-Service-Signature']! })).status).toBe(200);
    });

    const bad: Array<[string, (d: { body: string; headers: Record<string, string> }) => [string, Record<string, string>], number, string]> = [
      ['tampered body', (d) => [d.body.replace('Grüße', 'Grüsse'), d.headers], 401, 'SIGNATURE_INVALID'],
      ['missing signature', (d) => [d.body, { 'content-type': 'application/json' }], 401, 'SIGNATURE_MISSING'],
      ['truncated signature', (d) => [d.body, { ...d.headers, 'X-Service-Signature': d.headers['X-Service-Signature']!.slice(2) }], 401, 'SIGNATURE_MALFORMED'],
      ['wrong algorithm', (d) => [d.body, { ...d.headers, 'X-Service-Hash-Algorithm': 'MD5' }], 401, 'ALGORITHM_UNSUPPORTED'],
      ['malformed JSON', (d) => [d.body.slice(0, -1), d.headers], 400, 'BODY_MALFORMED'],
      ['duplicate keys', (d) => [d.body.replace('{', '{"status":"fail",'), d.headers], 400, 'BODY_MALFORMED'],
    ];
    it.each(bad)('%s → %i %s, handler not called', async (_l, mutate, status, code) => {
      let calls = 0;
      const post = make({ publicKey, onEvent: () => void calls++ });
      const [body, headers] = mutate(signed(jobId()));
      const r = await post(body, headers);
      expect({ status: r.status, code: r.body.error?.code }).toEqual({ status, code });
      expect(r.body.error?.message).toMatch(/\w/);
      expect(JSON.stringify(r.body)).not.toMatch(/BEGIN|at .*\.ts:\d+/);
      expect(calls).toBe(0);
    });

    it('verified but without a string job_id → 400 PAYLOAD_INVALID', async () => {
      const post = make({ publicKey, onEvent: () => undefined });
      const { signDelivery } = await import('../../src/index.js');
      const { privatePem } = await import('../helpers/keys.js');
      const d = signDelivery('{"event":"async_job_completed","job_id":42,"status":"success","output":{}}', privatePem(2048));
      const r = await post(d.body, d.headers);
      expect({ status: r.status, code: r.body.error?.code }).toEqual({ status: 400, code: 'PAYLOAD_INVALID' });
    });

    it('a body over the limit → 413', async () => {
      const post = make({ publicKey, onEvent: () => undefined, maxBodyBytes: 200 });
      const d = signed(jobId(), `,"pad":"${'x'.repeat(500)}"`);
      const r = await post(d.body, d.headers);
      expect({ status: r.status, code: r.body.error?.code }).toEqual({ status: 413, code: 'BODY_TOO_LARGE' });
    });

    it('a handler that throws → 500 and the claim is released; the retry succeeds; then duplicate', async () => {
      let calls = 0;
      const post = make({
        publicKey,
        onEvent: () => {
          calls++;
          if (calls === 1) throw new Error('database down');
        },
      });
      const d = signed(jobId());
      const first = await post(d.body, d.headers);
      expect({ status: first.status, code: first.body.error?.code }).toEqual({ status: 500, code: 'HANDLER_FAILED' });
      expect(first.body.error?.message).not.toContain('database down');
      expect((await post(d.body, d.headers)).body).toMatchObject({ status: 'processed' });
      expect((await post(d.body, d.headers)).body).toMatchObject({ status: 'duplicate' });
      expect(calls).toBe(2);
    });

    it('50 concurrent deliveries of one job_id → the handler runs once; others 200 duplicate or 503 in progress', async () => {
      let calls = 0;
      const post = make({
        publicKey,
        onEvent: async () => {
          calls++;
          await sleep(100);
        },
      });
      const d = signed(jobId());
      const results = await Promise.all(Array.from({ length: 50 }, () => post(d.body, d.headers)));
      expect(calls).toBe(1);
      const kinds = results.map((r) => (r.status === 200 ? r.body.status : `${r.status} ${r.body.error?.code}`));
      expect(kinds.filter((k) => k === 'processed')).toHaveLength(1);
      expect(kinds.filter((k) => k !== 'processed' && k !== 'duplicate' && k !== '503 IN_PROGRESS')).toEqual([]);
      expect(kinds.filter((k) => k === '503 IN_PROGRESS').length).toBeGreaterThan(0);
      for (const r of results.filter((x) => x.status === 503)) expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    });

    it('the idempotency store failing → 503 STORE_UNAVAILABLE, never 2xx (a full memory store)', async () => {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const post = make({ publicKey, store: new MemoryIdempotencyStore({ maxEntries: 1 }), onEvent: () => gate });
      const first = signed(jobId());
      const pending = post(first.body, first.headers);
      await sleep(100);
      const second = signed(jobId());
      const r = await post(second.body, second.headers);
      expect({ status: r.status, code: r.body.error?.code }).toEqual({ status: 503, code: 'STORE_UNAVAILABLE' });
      release();
      expect((await pending).status).toBe(200);
    });
  });
}
