import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import {
  MemoryIdempotencyStore,
  signDelivery,
  type IdempotencyStore,
  type JobCompletedEvent,
  type LoggerInput,
} from '../../src/index.js';
import { RedisIdempotencyStore } from '../../src/redis.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { deliveries, privatePem, publicPem } from '../helpers/keys.js';
import { freePort } from '../helpers/servers.js';

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
  log?: LoggerInput;
  onError?: (error: unknown, context: { jobId?: string; stage: string }) => void;
  now?: () => number;
}

/** Builds a receiver of one framework and returns how to POST to it. */
export type MakeReceiver = (options: ReceiverTestOptions) => Post;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A logger that keeps what it is told, by level. */
export function recorder() {
  const lines: Record<'debug' | 'info' | 'warn' | 'error', string[]> = {
    debug: [],
    info: [],
    warn: [],
    error: [],
  };
  const keep = (level: keyof typeof lines) => (message: string, details?: Record<string, unknown>) =>
    void lines[level].push(details === undefined ? message : `${message} ${JSON.stringify(details)}`);
  return {
    lines,
    log: { debug: keep('debug'), info: keep('info'), warn: keep('warn'), error: keep('error') },
  };
}

/** The receivers' answers, the same for every framework adapter (agnostic, Express 4 and 5, Fetch, Fastify). */
export function receiverBehaviour(
  name: string,
  make: MakeReceiver,
  runtime: { brotli: boolean } = { brotli: true },
): void {
  describe(`${name}: receiver answers`, () => {
    const publicKey = publicPem(2048);
    const quiet = { log: {} };

    it('200 processed, then 200 duplicate without calling the handler again', async () => {
      const seen: string[] = [];
      const post = make({ publicKey, onEvent: (e) => void seen.push(e.job_id), ...quiet });
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
      // The fixture finished on 2026-11-21T10:00:05Z: a receiver clock a few minutes later.
      const post = make({
        publicKey,
        onEvent: (_e, c) => void dialects.push(c.dialect),
        now: () => Date.parse('2026-11-21T10:05:00Z'),
        ...quiet,
      });
      expect((await post(fixture.body, fixture.headers)).status).toBe(200);
      expect(dialects).toEqual(['python']);
    });

    it('header names in any case', async () => {
      const post = make({ publicKey, onEvent: () => undefined, ...quiet });
      const d = signed(jobId());
      const sig = d.headers['X-Service-Signature']!;
      expect(
        (
          await post(d.body, {
            'content-type': 'application/json',
            'X-SERVICE-SIGNATURE': sig,
            'x-service-hash-algorithm': 'SHA256',
          })
        ).status,
      ).toBe(200);
      const e = signed(jobId());
      expect(
        (
          await post(e.body, {
            'content-type': 'application/json',
            'x-service-signature': e.headers['X-Service-Signature']!,
          })
        ).status,
      ).toBe(200);
    });

    const bad: Array<
      [
        string,
        (d: { body: string; headers: Record<string, string> }) => [string, Record<string, string>],
        number,
        string,
      ]
    > = [
      ['tampered body', (d) => [d.body.replace('Grüße', 'Grüsse'), d.headers], 401, 'SIGNATURE_INVALID'],
      [
        'missing signature',
        (d) => [d.body, { 'content-type': 'application/json' }],
        401,
        'SIGNATURE_MISSING',
      ],
      [
        'truncated signature',
        (d) => [d.body, { ...d.headers, 'X-Service-Signature': d.headers['X-Service-Signature']!.slice(2) }],
        401,
        'SIGNATURE_MALFORMED',
      ],
      [
        'wrong algorithm',
        (d) => [d.body, { ...d.headers, 'X-Service-Hash-Algorithm': 'MD5' }],
        401,
        'ALGORITHM_UNSUPPORTED',
      ],
      ['signed, malformed JSON', (d) => [d.body.slice(0, -1), d.headers], 400, 'BODY_MALFORMED'],
      [
        'signed, duplicate keys',
        (d) => [d.body.replace('{', '{"status":"fail",'), d.headers],
        400,
        'BODY_MALFORMED',
      ],
      [
        'unsigned and malformed (the body is not read)',
        (d) => [d.body.slice(0, -1), { 'content-type': 'application/json' }],
        401,
        'SIGNATURE_MISSING',
      ],
    ];
    it.each(bad)('%s → %i %s, handler not called', async (_l, mutate, status, code) => {
      let calls = 0;
      const post = make({ publicKey, onEvent: () => void calls++, ...quiet });
      const [body, headers] = mutate(signed(jobId()));
      const r = await post(body, headers);
      expect({ status: r.status, code: r.body.error?.code }).toEqual({ status, code });
      expect(r.body.error?.message).toMatch(/\w/);
      expect(JSON.stringify(r.body)).not.toMatch(/BEGIN|at .*\.ts:\d+/);
      expect(calls).toBe(0);
    });

    it('verified but without a usable job_id → 400 PAYLOAD_INVALID', async () => {
      const post = make({ publicKey, onEvent: () => undefined, ...quiet });
      const finished = new Date().toISOString();
      for (const id of ['42', '"job-\\ud800"', '"job-\\u0000"']) {
        const d = signDelivery(
          `{"event":"async_job_completed","job_id":${id},"status":"success","finished_at":"${finished}","output":{}}`,
          privatePem(2048),
          { dialect: 'python' },
        );
        const r = await post(d.body, d.headers);
        expect({ id, status: r.status, code: r.body.error?.code }).toEqual({
          id,
          status: 400,
          code: 'PAYLOAD_INVALID',
        });
      }
    });

    it('a replayed delivery older than the window → 401 EVENT_TOO_OLD', async () => {
      const post = make({ publicKey, onEvent: () => undefined, ...quiet });
      const d = signDelivery(
        `{"event":"async_job_completed","job_id":"${jobId()}","status":"success","finished_at":"2020-01-01T00:00:00Z","output":{}}`,
        privatePem(2048),
      );
      const r = await post(d.body, d.headers);
      expect({ status: r.status, code: r.body.error?.code }).toEqual({ status: 401, code: 'EVENT_TOO_OLD' });
    });

    it('a body over the limit → 413', async () => {
      const post = make({ publicKey, onEvent: () => undefined, maxBodyBytes: 200, ...quiet });
      const d = signed(jobId(), `,"pad":"${'x'.repeat(500)}"`);
      const r = await post(d.body, d.headers);
      expect({ status: r.status, code: r.body.error?.code }).toEqual({ status: 413, code: 'BODY_TOO_LARGE' });
    });

    it(`Content-Encoding gzip, deflate${runtime.brotli ? ' and br are' : ' are'} decoded; another coding → 415; a zip bomb → 413`, async () => {
      const seen: string[] = [];
      const post = make({
        publicKey,
        onEvent: (e) => void seen.push(e.job_id),
        maxBodyBytes: 64 * 1024,
        ...quiet,
      });
      for (const [coding, pack] of [
        ['gzip', gzipSync],
        ['deflate', deflateSync],
        ['br', brotliCompressSync],
      ] as const) {
        if (coding === 'br' && !runtime.brotli) continue;
        const d = signed(jobId(coding));
        const r = await post(new Uint8Array(pack(Buffer.from(d.body))), {
          ...d.headers,
          'content-encoding': coding,
        });
        expect({ coding, status: r.status, body: r.body.status }).toEqual({
          coding,
          status: 200,
          body: 'processed',
        });
      }
      expect(seen).toHaveLength(runtime.brotli ? 3 : 2);
      const d = signed(jobId());
      if (!runtime.brotli) {
        // Where the runtime's DecompressionStream lacks brotli, br is refused as unsupported, never misread.
        const br = await post(new Uint8Array(brotliCompressSync(Buffer.from(d.body))), {
          ...d.headers,
          'content-encoding': 'br',
        });
        expect({ status: br.status, code: br.body.error?.code }).toEqual({
          status: 415,
          code: 'ENCODING_UNSUPPORTED',
        });
      }
      const compress = await post(d.body, { ...d.headers, 'content-encoding': 'compress' });
      expect({ status: compress.status, code: compress.body.error?.code }).toEqual({
        status: 415,
        code: 'ENCODING_UNSUPPORTED',
      });
      // 10 MB of spaces gzip to ~10 KB: the limit applies to what comes out.
      const bomb = gzipSync(Buffer.alloc(10 * 1024 * 1024, 0x20));
      expect(bomb.length).toBeLessThan(64 * 1024);
      const r = await post(new Uint8Array(bomb), { ...d.headers, 'content-encoding': 'gzip' });
      expect({ status: r.status, code: r.body.error?.code }).toEqual({ status: 413, code: 'BODY_TOO_LARGE' });
      const corrupt = await post(new Uint8Array(Buffer.from('not gzip at all')), {
        ...d.headers,
        'content-encoding': 'gzip',
      });
      expect({ status: corrupt.status, code: corrupt.body.error?.code }).toEqual({
        status: 400,
        code: 'BODY_MALFORMED',
      });
    });

    it('a handler that throws → 500 and the claim is released; the retry succeeds; then duplicate; the failure is logged and heard', async () => {
      let calls = 0;
      const { lines, log } = recorder();
      const heard: string[] = [];
      const post = make({
        publicKey,
        log,
        onError: (_e, c) => void heard.push(`${c.stage} ${c.jobId}`),
        onEvent: () => {
          calls++;
          if (calls === 1) throw new Error('database down');
        },
      });
      const id = jobId();
      const d = signed(id);
      const first = await post(d.body, d.headers);
      expect({ status: first.status, code: first.body.error?.code }).toEqual({
        status: 500,
        code: 'HANDLER_FAILED',
      });
      expect(first.body.error?.message).not.toContain('database down');
      expect((await post(d.body, d.headers)).body).toMatchObject({ status: 'processed' });
      expect((await post(d.body, d.headers)).body).toMatchObject({ status: 'duplicate' });
      expect(calls).toBe(2);
      expect(lines.error.join('\n')).toContain(`the handler failed for job ${id}`);
      expect(lines.error.join('\n')).toContain('database down');
      expect(heard).toEqual([`handler ${id}`]);
    });

    it('a logger that throws changes no answer: 401, 200, 500 and the retry all as without it', async () => {
      let thrown = 0;
      const boom = () => {
        thrown++;
        throw new Error('log transport closed');
      };
      let calls = 0;
      const post = make({
        publicKey,
        log: { debug: boom, info: boom, warn: boom, error: boom },
        onEvent: () => {
          if (++calls === 1) throw new Error('database down');
        },
      });
      const d = signed(jobId());
      expect((await post(d.body.replace('Grüße', 'Grüsse'), d.headers)).status).toBe(401);
      expect((await post(d.body, d.headers)).status).toBe(500);
      expect((await post(d.body, d.headers)).body).toMatchObject({ status: 'processed' });
      expect((await post(d.body, d.headers)).body).toMatchObject({ status: 'duplicate' });
      expect(thrown).toBeGreaterThanOrEqual(2);
    });

    it('refusals that point at the setup are warnings, once per kind and interval, with the fix; a malformed signed body is info', async () => {
      const { lines, log } = recorder();
      const post = make({ publicKey, onEvent: () => undefined, log });
      const d = signed(jobId());
      for (let k = 0; k < 3; k++) await post(d.body, { 'content-type': 'application/json' });
      for (let k = 0; k < 3; k++) await post(d.body.replace('Grüße', 'Grüsse'), d.headers);
      await post(d.body.slice(0, -1), d.headers);
      expect(lines.warn).toHaveLength(2);
      expect(lines.warn.find((l) => l.includes('SIGNATURE_MISSING'))).toMatch(
        /a proxy dropped or renamed the header/,
      );
      expect(lines.warn.find((l) => l.includes('SIGNATURE_INVALID'))).toMatch(
        /the body is not what was signed/,
      );
      expect(lines.error).toEqual([]);
      expect(lines.info.filter((l) => l.includes('BODY_MALFORMED'))).toHaveLength(1);
    });

    it('50 concurrent deliveries of one job_id → the handler runs once; others 200 duplicate or 503 in progress (or busy)', async () => {
      let calls = 0;
      const post = make({
        publicKey,
        ...quiet,
        onEvent: async () => {
          calls++;
          await sleep(100);
        },
      });
      const d = signed(jobId());
      const results = await Promise.all(Array.from({ length: 50 }, () => post(d.body, d.headers)));
      expect(calls).toBe(1);
      const kinds = results.map((r) =>
        r.status === 200 ? r.body.status : `${r.status} ${r.body.error?.code}`,
      );
      expect(kinds.filter((k) => k === 'processed')).toHaveLength(1);
      // Past 8 copies of one signature in flight, an adapter reading the bodies refuses the rest 503 RECEIVER_BUSY (its share: test/adapters/replay.test.ts).
      const retried = ['processed', 'duplicate', '503 IN_PROGRESS', '503 RECEIVER_BUSY'];
      expect(kinds.filter((k) => !retried.includes(String(k)))).toEqual([]);
      expect(kinds.filter((k) => k === '503 IN_PROGRESS').length).toBeGreaterThan(0);
      for (const r of results.filter((x) => x.status === 503))
        expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    });

    it('the idempotency store failing → 503 STORE_UNAVAILABLE, never 2xx (a full memory store)', async () => {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const post = make({
        publicKey,
        store: new MemoryIdempotencyStore({ maxEntries: 1 }),
        onEvent: () => gate,
        ...quiet,
      });
      const first = signed(jobId());
      const pending = post(first.body, first.headers);
      await sleep(100);
      const second = signed(jobId());
      const r = await post(second.body, second.headers);
      expect({ status: r.status, code: r.body.error?.code }).toEqual({
        status: 503,
        code: 'STORE_UNAVAILABLE',
      });
      release();
      expect((await pending).status).toBe(200);
    });

    it('a store that cannot be reached → 503 with a generic message; the details go to the log and onError', async () => {
      const { lines, log } = recorder();
      const heard: string[] = [];
      const store = new RedisIdempotencyStore({
        url: `redis://127.0.0.1:${await freePort()}`,
        operationTimeoutMs: 500,
        log: {},
      });
      const post = make({
        publicKey,
        store,
        log,
        onEvent: () => undefined,
        onError: (_e, c) => void heard.push(c.stage),
      });
      const d = signed(jobId());
      const r = await post(d.body, d.headers);
      expect({ status: r.status, code: r.body.error?.code }).toEqual({
        status: 503,
        code: 'STORE_UNAVAILABLE',
      });
      expect(r.body.error?.message).toBe('The idempotency store is unavailable; retry later.');
      expect(JSON.stringify(r.body)).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|Redis/);
      expect(lines.error.join('\n')).toMatch(/failed to claim for job .*(ECONNREFUSED|max retries)/);
      expect(heard).toEqual(['claim']);
      await store.close();
    });
  });
}
