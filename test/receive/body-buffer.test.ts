/**
 * A body is counted by the bytes that arrived: its declared size is allocated (and held)
 * only once a mebibyte of it arrived and the budget can hold it; otherwise it goes on in
 * pieces. Real DeliveryGuard tickets.
 */
import { describe, expect, it } from 'vitest';
import { BodyBuffer, PREALLOCATE_AFTER } from '../../src/lib/receive/body-buffer.js';
import { DeliveryGuard } from '../../src/lib/receive/guard.js';

const MiB = 1024 * 1024;
const chunk = (n: number, fill: number) => new Uint8Array(n).fill(fill);

describe('BodyBuffer', () => {
  it('holds only what arrived until PREALLOCATE_AFTER, then the declared size, and gives the bytes back in order', () => {
    const guard = new DeliveryGuard(16 * MiB, 4 * MiB);
    const ticket = guard.admit(0);
    const allocated: number[] = [];
    const body = new BodyBuffer(ticket, 3 * MiB, (n) => (allocated.push(n), new Uint8Array(n)));
    body.add(chunk(512 * 1024, 1));
    expect(guard.inFlight).toBe(512 * 1024);
    expect(allocated).toEqual([]);
    body.add(chunk(PREALLOCATE_AFTER, 2));
    expect(allocated).toEqual([3 * MiB]);
    expect(guard.inFlight).toBe(3 * MiB);
    body.add(chunk(3 * MiB - 512 * 1024 - PREALLOCATE_AFTER, 3));
    const bytes = body.bytes();
    expect(bytes.byteLength).toBe(3 * MiB);
    expect([bytes[0], bytes[512 * 1024], bytes[512 * 1024 + PREALLOCATE_AFTER], bytes[3 * MiB - 1]]).toEqual([
      1, 2, 3, 3,
    ]);
    ticket.release();
    expect(guard.inFlight).toBe(0);
  });

  it('goes on in pieces when the budget cannot hold the declared size, and refuses once the bytes that arrived do not fit', () => {
    const guard = new DeliveryGuard(4 * MiB, 4 * MiB);
    const other = guard.admit(2 * MiB);
    const ticket = guard.admit(0);
    const allocated: number[] = [];
    const body = new BodyBuffer(ticket, 4 * MiB, (n) => (allocated.push(n), new Uint8Array(n)));
    body.add(chunk(PREALLOCATE_AFTER + 1, 7));
    expect(allocated).toEqual([]);
    expect(guard.inFlight).toBe(3 * MiB + 1);
    expect(() => body.add(chunk(MiB, 8))).toThrow(expect.objectContaining({ code: 'RECEIVER_BUSY' }));
    other.release();
    ticket.release();
  });

  it('a body without a declared size (chunked, or decoded) is joined from its pieces', () => {
    const guard = new DeliveryGuard(16 * MiB, 4 * MiB);
    const body = new BodyBuffer(guard.admit(0), undefined);
    body.add(new Uint8Array([1, 2]));
    body.add(new Uint8Array([3]));
    expect([...body.bytes()]).toEqual([1, 2, 3]);
    expect([...new BodyBuffer(guard.admit(0), undefined).bytes()]).toEqual([]);
  });
});
