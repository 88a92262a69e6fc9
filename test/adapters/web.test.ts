import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createReceiver } from '../../src/web.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';
import { ROOT } from '../helpers/paths.js';
import { receiverBehaviour } from './receiver-table.js';

receiverBehaviour(
  'Fetch createReceiver',
  (options) => {
    const handler = createReceiver(options);
    return async (body, headers) => {
      const res = await handler(
        new Request('http://127.0.0.1/hook', {
          method: 'POST',
          headers,
          body: typeof body === 'string' ? body : new Uint8Array(body),
        }),
      );
      return {
        status: res.status,
        body: (await res.json()) as never,
        headers: Object.fromEntries(res.headers),
      };
    };
  },
  { brotli: brotliStreams() },
);

/** Whether this runtime decodes brotli: its DecompressionStream by either name (Node 20's does not), or node:zlib from process.getBuiltinModule. */
function brotliStreams(): boolean {
  if (typeof (process as { getBuiltinModule?: unknown }).getBuiltinModule === 'function') return true;
  return ['brotli', 'br'].some((format) => {
    try {
      new DecompressionStream(format as CompressionFormat);
      return true;
    } catch {
      return false;
    }
  });
}

describe('Fetch handler: streamed bodies', () => {
  it('cancels a stream that passes the limit and answers 413', async () => {
    let pulled = 0;
    let cancelled = false;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulled++;
        controller.enqueue(new Uint8Array(16 * 1024).fill(0x20));
        if (pulled > 1000) controller.close();
      },
      cancel() {
        cancelled = true;
      },
    });
    const handler = createReceiver({
      publicKey: publicPem(2048),
      onEvent: () => undefined,
      maxBodyBytes: 64 * 1024,
    });
    // A genuine signature (of another body): the headers pass, so the body is read.
    const headers = { 'x-service-signature': signed(jobId()).headers['X-Service-Signature']! };
    const res = await handler(
      new Request('http://127.0.0.1/hook', {
        method: 'POST',
        headers,
        body: stream,
        duplex: 'half',
      } as RequestInit),
    );
    expect(res.status).toBe(413);
    expect(cancelled).toBe(true);
    expect(pulled).toBeLessThan(10);
  });

  it('refuses on the headers alone: unsigned or forged → 401, the stream never read (nor cancelled: see the next test)', async () => {
    const handler = createReceiver({ publicKey: publicPem(2048), onEvent: () => undefined, log: {} });
    for (const [headers, code] of [
      [{}, 'SIGNATURE_MISSING'],
      [{ 'x-service-signature': 'ab'.repeat(256) }, 'SIGNATURE_INVALID'],
    ] as const) {
      let pulled = 0;
      let cancelled = false;
      const stream = new ReadableStream<Uint8Array>(
        {
          pull(controller) {
            pulled++;
            controller.enqueue(new Uint8Array(16 * 1024).fill(0x20));
          },
          cancel() {
            cancelled = true;
          },
        },
        { highWaterMark: 0 },
      );
      const res = await handler(
        new Request('http://127.0.0.1/hook', {
          method: 'POST',
          headers,
          body: stream,
          duplex: 'half',
        } as RequestInit),
      );
      expect({
        status: res.status,
        code: ((await res.json()) as { error: { code: string } }).error.code,
      }).toEqual({ status: 401, code });
      expect(cancelled).toBe(false);
      expect(pulled).toBe(0);
    }
  });

  it('served on node:http through Readable.toWeb: forged requests with bodies get 401, their connections end, and the process lives (cancelling the body there made Node throw uncaught)', async () => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(ROOT, 'test', 'helpers', 'fetch-on-node-process.ts')],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (err += c));
    const code = await new Promise<number | null>((r) => child.on('close', r));
    expect({ code, err: err.split('\n').find((l) => /Error/.test(l)) }).toEqual({ code: 0, err: undefined });
    // Six forged and six unsigned deliveries (300 B to 512 KB), then a genuine one.
    // And a forged request streaming an endless body: 401, and the connection ended rather than read on.
    expect(JSON.parse(out)).toEqual({
      statuses: [...Array<number>(12).fill(401), 200],
      streamed: { status: 401, connection: 'close', closedByServer: true },
    });
  }, 30_000);

  it('reads a multi-chunk body exactly', async () => {
    const d = signed(jobId());
    const bytes = new TextEncoder().encode(d.body);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let k = 0; k < bytes.length; k += 7) controller.enqueue(bytes.slice(k, k + 7));
        controller.close();
      },
    });
    const handler = createReceiver({ publicKey: publicPem(2048), onEvent: () => undefined });
    const res = await handler(
      new Request('http://127.0.0.1/hook', {
        method: 'POST',
        headers: d.headers,
        body: stream,
        duplex: 'half',
      } as RequestInit),
    );
    expect(await res.json()).toMatchObject({ status: 'processed' });
  });
});

describe('Fetch handler: small bodies read whole (arrayBuffer) keep their limits', () => {
  it('a body declared small that never ends → 408 BODY_TIMEOUT after bodyTimeoutMs', async () => {
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"event":'));
      },
    });
    const handler = createReceiver({
      publicKey: publicPem(2048),
      onEvent: () => undefined,
      bodyTimeoutMs: 200,
      log: {},
    });
    const headers = {
      'x-service-signature': signed(jobId()).headers['X-Service-Signature']!,
      'content-length': '1400',
    };
    const started = performance.now();
    const res = await handler(
      new Request('http://127.0.0.1/hook', {
        method: 'POST',
        headers,
        body: stream,
        duplex: 'half',
      } as RequestInit),
    );
    expect(res.status).toBe(408);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('BODY_TIMEOUT');
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it('a body larger than its Content-Length said, past maxBodyBytes → 413 BODY_TOO_LARGE', async () => {
    const d = signed(jobId());
    const handler = createReceiver({
      publicKey: publicPem(2048),
      onEvent: () => undefined,
      maxBodyBytes: 2048,
      log: {},
    });
    const headers = { 'x-service-signature': d.headers['X-Service-Signature']!, 'content-length': '100' };
    const res = await handler(
      new Request('http://127.0.0.1/hook', { method: 'POST', headers, body: d.body + ' '.repeat(4096) }),
    );
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('BODY_TOO_LARGE');
  });
});

describe('Fetch handler: a body that never ends', () => {
  it('→ 408 BODY_TIMEOUT after bodyTimeoutMs, the stream cancelled', async () => {
    let cancelled = false;
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"event":'));
      },
      cancel() {
        cancelled = true;
      },
    });
    const handler = createReceiver({
      publicKey: publicPem(2048),
      onEvent: () => undefined,
      bodyTimeoutMs: 200,
      log: {},
    });
    const headers = { 'x-service-signature': signed(jobId()).headers['X-Service-Signature']! };
    const res = await handler(
      new Request('http://127.0.0.1/hook', {
        method: 'POST',
        headers,
        body: stream,
        duplex: 'half',
      } as RequestInit),
    );
    expect(res.status).toBe(408);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('BODY_TIMEOUT');
    expect(cancelled).toBe(true);
  });
});
