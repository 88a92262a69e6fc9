/**
 * The guard's rules on their own: bytes in flight, one verification per digest,
 * digests known completed. (The adapters are held to it on real servers in
 * test/adapters/replay.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { DeliveryGuard, digestKey } from '../../src/lib/receive/guard.js';

const MiB = 1024 * 1024;

describe('DeliveryGuard: admission', () => {
  it('refuses what would pass maxInFlightBytes, counts chunked bodies as they grow, and frees on release', () => {
    const g = new DeliveryGuard({ maxInFlightBytes: 10 * MiB }, 4 * MiB);
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
    const g = new DeliveryGuard({ maxInFlightBytes: 16 * MiB }, 8 * MiB);
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
    expect(() => new DeliveryGuard({ maxInFlightBytes: MiB }, 2 * MiB)).toThrow(TypeError);
    expect(() => new DeliveryGuard({ maxInFlightBytes: 0 }, 2 * MiB)).toThrow(TypeError);
    expect(new DeliveryGuard({}, 100 * MiB).max).toBe(100 * MiB);
  });
});

describe('DeliveryGuard: one verification per digest', () => {
  const key = digestKey({ opened: [{ keyIndex: 0, hash: new Uint8Array([1, 2, 255]) }] });

  it('concurrent requests with one digest share its verification', async () => {
    const g = new DeliveryGuard({}, MiB);
    let runs = 0;
    let finish!: (v: string) => void;
    const first = g.once(key, () => {
      runs++;
      return new Promise<string>((r) => (finish = r));
    });
    const others = [g.once(key, () => (runs++, 'other')), g.once(key, () => (runs++, 'other'))];
    finish('verified');
    expect(await Promise.all([first, ...others])).toEqual([
      { result: 'verified', own: true },
      { result: 'verified', own: false },
      { result: 'verified', own: false },
    ]);
    expect(runs).toBe(1);
    expect(key).toBe('0:0102ff;');
  });

  it('a failed verification lets the next request verify its own body, one at a time', async () => {
    const g = new DeliveryGuard({}, MiB);
    const order: string[] = [];
    let running = 0;
    let most = 0;
    const attempt = (name: string, ok: boolean) =>
      g.once(key, async () => {
        running++;
        most = Math.max(most, running);
        order.push(name);
        await new Promise((r) => setTimeout(r, 5));
        running--;
        if (!ok) throw new Error(`${name} is not what was signed`);
        return name;
      });
    const results = await Promise.allSettled([attempt('replay-1', false), attempt('replay-2', false), attempt('genuine', true), attempt('replay-3', false)]);
    expect(results.map((r) => (r.status === 'fulfilled' ? `${r.value.result}${r.value.own ? '' : ' (shared)'}` : 'failed'))).toEqual(['failed', 'failed', 'genuine', 'genuine (shared)']);
    expect(order).toEqual(['replay-1', 'replay-2', 'genuine']);
    expect(most).toBe(1);
    // Nothing left in flight: a later request verifies again.
    expect(await g.once(key, () => 'later')).toEqual({ result: 'later', own: true });
  });
});

describe('DeliveryGuard: known digests', () => {
  it('remembers completed digests and the bodies that verified under them until their window closes, bounded', () => {
    const g = new DeliveryGuard({}, MiB);
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
