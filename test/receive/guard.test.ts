/**
 * The guard's rules on their own: bytes in flight, one verification per signature and body,
 * digests known completed. (The adapters are held to it on real servers in
 * test/adapters/replay.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { equalBytes } from '../../src/lib/base/bytes.js';
import { DeliveryGuard, digestKey, resolveAdmission } from '../../src/lib/receive/guard.js';

const MiB = 1024 * 1024;

describe('DeliveryGuard: admission', () => {
  it('refuses what would pass maxInFlightBytes, counts chunked bodies as they grow, and frees on release', () => {
    const g = new DeliveryGuard(10 * MiB, 4 * MiB);
    const a = g.admit(4 * MiB);
    const b = g.admit(4 * MiB);
    expect(g.inFlight).toBe(8 * MiB);
    expect(() => g.admit(3 * MiB)).toThrow(expect.objectContaining({ code: 'RECEIVER_BUSY' }));
    // A small body still fits: a share is kept for small bodies.
    const small = g.admit(1400);
    small.release();
    small.release();
    expect(g.inFlight).toBe(8 * MiB);
    // A chunked body is counted as it arrives, and refused once it no longer fits.
    const c = g.admit(undefined);
    c.cover(100_000);
    expect(g.inFlight).toBe(8 * MiB + 100_000);
    expect(() => c.cover(3 * MiB)).toThrow(expect.objectContaining({ code: 'RECEIVER_BUSY' }));
    c.release();
    a.release();
    b.release();
    expect(g.inFlight).toBe(0);
  });

  it('large bodies leave a share for small ones; one body always fits when nothing else is in flight', () => {
    const g = new DeliveryGuard(16 * MiB, 8 * MiB);
    const a = g.admit(8 * MiB);
    // 8 + 7 MiB = 15 MiB ≤ 16 MiB, but past what large bodies may hold (16 − 2 MiB).
    expect(() => g.admit(7 * MiB)).toThrow(expect.objectContaining({ code: 'RECEIVER_BUSY' }));
    const b = g.admit(6 * MiB);
    const small = g.admit(60_000);
    a.release();
    b.release();
    small.release();
    expect(g.admit(8 * MiB).cover).toBeTypeOf('function');
  });

  it('maxInFlightBytes below maxBodyBytes is refused at construction', () => {
    expect(() => resolveAdmission({ maxInFlightBytes: MiB }, 2 * MiB)).toThrow(TypeError);
    expect(() => resolveAdmission({ maxInFlightBytes: 0 }, 2 * MiB)).toThrow(TypeError);
    expect(resolveAdmission({}, 100 * MiB)).toBe(100 * MiB);
    expect(resolveAdmission({}, MiB)).toBe(64 * MiB);
  });
});

describe('DeliveryGuard: one verification per signature and body', () => {
  const key = digestKey({ opened: [{ keyIndex: 0, hash: new Uint8Array([1, 2, 255]) }] });
  const bytes = (text: string) => new TextEncoder().encode(text);
  const genuine = bytes('{"job_id":"genuine"}'.padEnd(200, ' '));

  it('concurrent requests with one signature and the same bytes share its verification', async () => {
    const g = new DeliveryGuard(64 * MiB, MiB);
    let runs = 0;
    let finish!: (v: string) => void;
    const first = g.once(key, genuine, () => {
      runs++;
      return new Promise<string>((r) => (finish = r));
    });
    // The same bytes in other arrays (another request's buffer), and as text.
    const others = [
      g.once(key, genuine.slice(), () => (runs++, 'other')),
      g.once(key, new Uint8Array([0, ...genuine]).subarray(1), () => (runs++, 'other')),
    ];
    finish('verified');
    expect(await Promise.all([first, ...others])).toEqual([
      { result: 'verified', own: true },
      { result: 'verified', own: false },
      { result: 'verified', own: false },
    ]);
    expect(runs).toBe(1);
    expect(key).toBe('0:0102ff;');
    const text = '{"job_id":"t"}';
    let textRuns = 0;
    const t = await Promise.all([
      g.once(key, text, async () => (textRuns++, 'a')),
      g.once(key, `${text}`, async () => (textRuns++, 'b')),
    ]);
    expect(t.map((r) => r.result)).toEqual(['a', 'a']);
    expect(textRuns).toBe(1);
  });

  it("a request with other bytes never gets another request's result, and never waits for it", async () => {
    const g = new DeliveryGuard(64 * MiB, MiB);
    const order: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    // A replay being verified slowly (a costly body), then the genuine delivery: it does not wait.
    const replay = g.once(key, bytes('{"job_id":"attacker","amount":1000000}'), async () => {
      order.push('replay');
      await held;
      throw new Error('the replay is not what was signed');
    });
    const sameLength = genuine.slice();
    sameLength[199] = 0x09;
    const genuineResult = await g.once(key, genuine, async () => (order.push('genuine'), 'genuine'));
    expect(genuineResult).toEqual({ result: 'genuine', own: true });
    // Same length, one byte apart: verified on its own too.
    const near = await g.once(key, sameLength, async () => (order.push('near'), 'near'));
    expect(near).toEqual({ result: 'near', own: true });
    release();
    await expect(replay).rejects.toThrow(/not what was signed/);
    expect(order).toEqual(['replay', 'genuine', 'near']);
  });

  it('a failure is shared only by the same bytes; nothing stays in flight', async () => {
    const g = new DeliveryGuard(64 * MiB, MiB);
    const body = bytes('{');
    let runs = 0;
    const results = await Promise.allSettled([
      g.once(key, body, async () => {
        runs++;
        await new Promise((r) => setTimeout(r, 5));
        throw new Error('malformed');
      }),
      g.once(key, body.slice(), async () => (runs++, 'never')),
      g.once(key, genuine, async () => (runs++, 'genuine')),
    ]);
    expect(
      results.map((r) => (r.status === 'fulfilled' ? r.value.result : (r.reason as Error).message)),
    ).toEqual(['malformed', 'malformed', 'genuine']);
    expect(runs).toBe(2);
    expect(await g.once(key, body, () => 'later')).toEqual({ result: 'later', own: true });
  });

  it('a body moved away (a detached buffer, as after a transfer to a worker) matches nothing, not even an empty body', async () => {
    const g = new DeliveryGuard(64 * MiB, MiB);
    const moved = genuine.slice();
    let finish!: (v: string) => void;
    const first = g.once(key, moved, () => new Promise<string>((r) => (finish = r)));
    structuredClone(moved.buffer, { transfer: [moved.buffer] });
    expect(moved.byteLength).toBe(0);
    expect(await g.once(key, new Uint8Array(0), () => 'empty')).toEqual({ result: 'empty', own: true });
    finish('moved');
    await first;
  });
});

describe('equalBytes', () => {
  it('compares any alignment and length', () => {
    const base = Uint8Array.from({ length: 300 }, (_, i) => (i * 31) & 255);
    for (const offset of [0, 1, 2, 3, 4]) {
      for (const n of [0, 1, 63, 64, 65, 200, 296]) {
        const a = base.subarray(offset, offset + n);
        const copy = new Uint8Array(n + 3).subarray(3);
        copy.set(a);
        expect(equalBytes(a, copy)).toBe(true);
        for (const at of n === 0 ? [] : [0, n >> 1, n - 1]) {
          const changed = copy.slice();
          changed[at] = changed[at]! ^ 1;
          expect(equalBytes(a, changed)).toBe(false);
        }
      }
    }
    expect(equalBytes(new Uint8Array(4), new Uint8Array(5))).toBe(false);
  });
});

describe('DeliveryGuard: known digests', () => {
  it('remembers completed digests and the bodies that verified under them until their window closes, bounded', () => {
    const g = new DeliveryGuard(64 * MiB, MiB);
    g.remember('a', 'job-a', 'body-1', 1_000);
    g.remember('a', 'job-a', 'body-2', 900);
    expect(g.completed('a', 999)).toEqual({ jobId: 'job-a', bodies: ['body-1', 'body-2'], until: 1_000 });
    expect(g.completed('a', 1_000)).toBeUndefined();
    expect(g.completed('a', 0)).toBeUndefined();
    for (let k = 0; k <= 10_000; k++) g.remember(`k${k}`, `job-${k}`, 'b', 5_000);
    expect(g.completed('k0', 0)).toBeUndefined();
    expect(g.completed('k10000', 0)?.jobId).toBe('job-10000');
  });
});

describe('DeliveryGuard: a share per signature', () => {
  it('one signature holds at most 8 requests and one body together; a request alone always fits; other signatures keep the rest', () => {
    const g = new DeliveryGuard(64 * MiB, MiB);
    const tickets = Array.from({ length: 8 }, () => g.admit(0, 'captured'));
    for (const t of tickets) t.cover(60_000);
    expect(() => g.admit(0, 'captured')).toThrow(
      expect.objectContaining({ code: 'RECEIVER_BUSY', requests: 8 }),
    );
    // Together past one body (1 MiB + 64 KiB): refused as the bytes arrive.
    expect(() => tickets[0]!.cover(700_000)).toThrow(expect.objectContaining({ code: 'RECEIVER_BUSY' }));
    // Another signature is admitted at once.
    const genuine = g.admit(0, 'genuine');
    genuine.cover(MiB);
    expect(g.state()).toMatchObject({
      requests: 9,
      signatures: 2,
      largestSignature: { requests: 8, bytes: 8 * 60_000 },
      refused: { full: 0, signature: 2 },
      busy: true,
    });
    for (const t of tickets) t.release();
    // A request alone may hold a whole body (and a gzip body's raw bytes beside it).
    const alone = g.admit(0, 'captured');
    alone.cover(MiB + 100_000);
    alone.release();
    genuine.release();
    expect(g.state()).toMatchObject({ bytes: 0, requests: 0, signatures: 0 });
  });
});
