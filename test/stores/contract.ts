import { describe, expect, it } from 'vitest';
import type { IdempotencyStore } from '../../src/index.js';

export interface StorePair {
  /** Two stores; with `shared` they see the same data (two connections to one server). */
  a: IdempotencyStore;
  b: IdempotencyStore;
  shared: boolean;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let seq = 0;
const id = (label: string) => `${label}-${process.pid}-${Date.now()}-${seq++}`;

/** The idempotency contract (docs/protocol.md), run against every backend on real servers. */
export function storeContract(name: string, pair: () => StorePair): void {
  describe(`${name}: idempotency contract`, () => {
    it('claim → in_progress → complete → completed', async () => {
      const { a } = pair();
      const job = id('basic');
      const first = await a.claim(job, { leaseMs: 10_000 });
      expect(first.status).toBe('acquired');
      if (first.status !== 'acquired') return;
      expect(first.token).toMatch(/\S{16,}/);
      const second = await a.claim(job, { leaseMs: 10_000 });
      expect(second.status).toBe('in_progress');
      if (second.status === 'in_progress' && second.retryAfterMs !== undefined) {
        expect(second.retryAfterMs).toBeGreaterThan(0);
        expect(second.retryAfterMs).toBeLessThanOrEqual(10_000);
      }
      expect(await a.complete(job, first.token, { retainMs: 60_000 })).toBe('completed');
      expect(await a.claim(job, { leaseMs: 10_000 })).toEqual({ status: 'completed' });
    });

    it('release lets the next delivery claim again, with a new token', async () => {
      const { a } = pair();
      const job = id('release');
      const first = await a.claim(job, { leaseMs: 10_000 });
      if (first.status !== 'acquired') throw new Error(first.status);
      expect(await a.release(job, first.token)).toBe(true);
      const again = await a.claim(job, { leaseMs: 10_000 });
      expect(again.status).toBe('acquired');
      if (again.status === 'acquired') expect(again.token).not.toBe(first.token);
    });

    it('an expired lease is reclaimed and the stale token can neither complete nor release', async () => {
      const { a, b } = pair();
      const job = id('lease');
      const first = await a.claim(job, { leaseMs: 150 });
      if (first.status !== 'acquired') throw new Error(first.status);
      await sleep(300);
      const taker = b;
      const second = await taker.claim(job, { leaseMs: 10_000 });
      if (second.status !== 'acquired') throw new Error(`expected acquired, got ${second.status}`);
      expect(await a.complete(job, first.token, { retainMs: 60_000 })).toBe('superseded');
      expect(await a.release(job, first.token)).toBe(false);
      // The new owner's claim is intact.
      expect((await taker.claim(job, { leaseMs: 10_000 })).status).toBe('in_progress');
      expect(await taker.complete(job, second.token, { retainMs: 60_000 })).toBe('completed');
      expect((await taker.claim(job, { leaseMs: 10_000 })).status).toBe('completed');
    });

    it('an expired lease nobody took over: the owner may still complete it (the work was done)', async () => {
      const { a } = pair();
      const job = id('expired');
      const first = await a.claim(job, { leaseMs: 150 });
      if (first.status !== 'acquired') throw new Error(first.status);
      await sleep(300);
      expect(await a.complete(job, first.token, { retainMs: 60_000 })).toBe('completed');
      expect((await a.claim(job, { leaseMs: 10_000 })).status).toBe('completed');
    });

    it('an expired lease is free for anyone to claim, and then the old owner cannot release it', async () => {
      const { a, b } = pair();
      const job = id('free');
      const first = await a.claim(job, { leaseMs: 150 });
      if (first.status !== 'acquired') throw new Error(first.status);
      await sleep(300);
      expect((await b.claim(job, { leaseMs: 10_000 })).status).toBe('acquired');
      expect(await a.release(job, first.token)).toBe(false);
      expect((await a.claim(job, { leaseMs: 10_000 })).status).toBe('in_progress');
    });

    it("takeover grace: a claim finding another token's lease over gets in_progress (stale) and the holder can still complete", async () => {
      const { a, b } = pair();
      const job = id('grace-complete');
      const first = await a.claim(job, { leaseMs: 150 });
      if (first.status !== 'acquired') throw new Error(first.status);
      await sleep(300);
      const waiting = await b.claim(job, { leaseMs: 10_000, takeoverGraceMs: 5_000 });
      expect(waiting).toMatchObject({ status: 'in_progress', stale: true });
      if (waiting.status !== 'in_progress') return;
      expect(waiting.retryAfterMs).toBeGreaterThan(4_000);
      expect(waiting.retryAfterMs).toBeLessThanOrEqual(5_000);
      // The holder, cut off until now, records its completion: the job is done, not taken.
      expect(await a.complete(job, first.token, { retainMs: 60_000 })).toBe('completed');
      expect(await b.claim(job, { leaseMs: 10_000, takeoverGraceMs: 5_000 })).toEqual({
        status: 'completed',
      });
    });

    it('takeover grace: counted from the first claim that found the lease over, not from the lease end; then the job is taken over', async () => {
      const { a, b } = pair();
      const job = id('grace-take');
      const first = await a.claim(job, { leaseMs: 100 });
      if (first.status !== 'acquired') throw new Error(first.status);
      // Long past the lease end (as after a store paused for longer than the lease).
      await sleep(700);
      const seen = await b.claim(job, { leaseMs: 10_000, takeoverGraceMs: 400 });
      expect(seen).toMatchObject({ status: 'in_progress', stale: true });
      if (seen.status === 'in_progress') expect(seen.retryAfterMs).toBeGreaterThan(200);
      // Another claimant does not restart the grace.
      await sleep(200);
      const later = await a.claim(job, { leaseMs: 10_000, takeoverGraceMs: 400 });
      expect(later).toMatchObject({ status: 'in_progress', stale: true });
      if (later.status === 'in_progress') expect(later.retryAfterMs).toBeLessThanOrEqual(250);
      await sleep(300);
      const taken = await b.claim(job, { leaseMs: 10_000, takeoverGraceMs: 400 });
      if (taken.status !== 'acquired') throw new Error(`expected acquired, got ${JSON.stringify(taken)}`);
      expect(await a.complete(job, first.token, { retainMs: 60_000 })).toBe('superseded');
      expect(await a.renew!(job, first.token, { leaseMs: 10_000 })).toBe('superseded');
      expect((await a.claim(job, { leaseMs: 10_000, takeoverGraceMs: 400 })).status).toBe('in_progress');
      expect(await b.complete(job, taken.token, { retainMs: 60_000 })).toBe('completed');
    });

    it('takeover grace: a holder that renews within it keeps the job; its own claim is never made to wait', async () => {
      const { a, b } = pair();
      const job = id('grace-renew');
      const first = await a.claim(job, { leaseMs: 100 });
      if (first.status !== 'acquired') throw new Error(first.status);
      await sleep(250);
      expect(await b.claim(job, { leaseMs: 10_000, takeoverGraceMs: 300 })).toMatchObject({
        status: 'in_progress',
        stale: true,
      });
      expect(await a.renew!(job, first.token, { leaseMs: 10_000 })).toBe('renewed');
      await sleep(400);
      const after = await b.claim(job, { leaseMs: 10_000, takeoverGraceMs: 300 });
      expect(after.status).toBe('in_progress');
      if (after.status === 'in_progress') expect(after.stale).toBeUndefined();
      // The holder claiming again with its token, lease over or not, acquires at once.
      const mine = id('grace-own');
      const token = `own-${seq++}-${process.pid}`;
      const own = await a.claim(mine, { leaseMs: 100, token });
      expect(own).toMatchObject({ status: 'acquired', token });
      await sleep(250);
      // Claiming again with its own token keeps its fencing number.
      expect(await b.claim(mine, { leaseMs: 100, token, takeoverGraceMs: 5_000 })).toEqual({
        status: 'acquired',
        token,
        fence: (own as { fence: number }).fence,
      });
      await expect(a.claim(id('args'), { leaseMs: 1000, takeoverGraceMs: -1 })).rejects.toThrow(TypeError);
    });

    it('a completed mark expires after the retention window', async () => {
      const { a } = pair();
      const job = id('retain');
      const first = await a.claim(job, { leaseMs: 10_000 });
      if (first.status !== 'acquired') throw new Error(first.status);
      expect(await a.complete(job, first.token, { retainMs: 150 })).toBe('completed');
      expect((await a.claim(job, { leaseMs: 10_000 })).status).toBe('completed');
      await sleep(300);
      expect((await a.claim(job, { leaseMs: 10_000 })).status).toBe('acquired');
    });

    it('a wrong token changes nothing while the owner holds the job', async () => {
      const { a } = pair();
      const job = id('token');
      const first = await a.claim(job, { leaseMs: 10_000 });
      if (first.status !== 'acquired') throw new Error(first.status);
      expect(await a.complete(job, 'not-the-token', { retainMs: 60_000 })).toBe('superseded');
      expect(await a.release(job, 'not-the-token')).toBe(false);
      expect(await a.renew!(job, 'not-the-token', { leaseMs: 10_000 })).toBe('superseded');
      expect((await a.claim(job, { leaseMs: 10_000 })).status).toBe('in_progress');
      expect(await a.release(id('never-claimed'), first.token)).toBe(false);
    });

    it('completing a job nobody holds records it (a completion retried after the store lost the claim); completing twice is a success', async () => {
      const { a } = pair();
      const job = id('unheld');
      expect(await a.complete(job, 'some-token-1', { retainMs: 60_000 })).toBe('completed');
      expect(await a.complete(job, 'some-token-1', { retainMs: 60_000 })).toBe('completed');
      expect((await a.claim(job, { leaseMs: 10_000 })).status).toBe('completed');
    });

    it('a caller-chosen token: the claim is held by it, and claiming again with it acquires again (a lost reply undone)', async () => {
      const { a, b } = pair();
      const job = id('chosen');
      const token = `tok-${seq++}-${process.pid}`;
      const first = await a.claim(job, { leaseMs: 10_000, token });
      expect(first).toEqual({ status: 'acquired', token, fence: expect.any(Number) });
      expect(await b.claim(job, { leaseMs: 10_000, token })).toEqual({
        status: 'acquired',
        token,
        fence: (first as { fence: number }).fence,
      });
      expect((await b.claim(job, { leaseMs: 10_000 })).status).toBe('in_progress');
      expect(await a.release(job, token)).toBe(true);
      expect((await b.claim(job, { leaseMs: 10_000 })).status).toBe('acquired');
    });

    it('renew keeps a claim past its first lease; renew is refused once another token holds the job or it is completed', async () => {
      const { a, b } = pair();
      const job = id('renew');
      const first = await a.claim(job, { leaseMs: 300 });
      if (first.status !== 'acquired') throw new Error(first.status);
      await sleep(150);
      expect(await a.renew!(job, first.token, { leaseMs: 10_000 })).toBe('renewed');
      await sleep(300);
      // Past the first lease, still held.
      expect((await b.claim(job, { leaseMs: 10_000 })).status).toBe('in_progress');
      expect(await a.complete(job, first.token, { retainMs: 60_000 })).toBe('completed');
      expect(await a.renew!(job, first.token, { leaseMs: 10_000 })).toBe('completed');

      const other = id('renew-lost');
      const mine = await a.claim(other, { leaseMs: 150 });
      if (mine.status !== 'acquired') throw new Error(mine.status);
      await sleep(300);
      const theirs = await b.claim(other, { leaseMs: 10_000 });
      expect(theirs.status).toBe('acquired');
      expect(await a.renew!(other, mine.token, { leaseMs: 10_000 })).toBe('superseded');
      expect(await a.complete(other, mine.token, { retainMs: 60_000 })).toBe('superseded');
    });

    it('renew after the lease ran out, when nobody took the job over, holds it again', async () => {
      const { a, b } = pair();
      const job = id('revive');
      const first = await a.claim(job, { leaseMs: 150 });
      if (first.status !== 'acquired') throw new Error(first.status);
      await sleep(300);
      expect(await a.renew!(job, first.token, { leaseMs: 10_000 })).toBe('renewed');
      expect((await b.claim(job, { leaseMs: 10_000 })).status).toBe('in_progress');
    });

    it('fencing: every new holder of a job gets a larger number, a takeover says so (also when claimed again by its token, or released and claimed afresh), and its own token keeps its number', async () => {
      const { a, b } = pair();
      const job = id('fence');
      const first = await a.claim(job, { leaseMs: 100 });
      if (first.status !== 'acquired') throw new Error(first.status);
      expect(first.tookOver).toBeUndefined();
      expect(Number.isSafeInteger(first.fence)).toBe(true);
      await sleep(250);
      const second = await b.claim(job, { leaseMs: 100 });
      if (second.status !== 'acquired') throw new Error(second.status);
      expect(second.fence).toBeGreaterThan(first.fence);
      expect(second.tookOver).toBe(true);
      // The takeover claimed again by its token (its first reply was lost): same number, and still a takeover.
      const again = await b.claim(job, { leaseMs: 10_000, token: second.token });
      expect(again).toEqual({ status: 'acquired', token: second.token, fence: second.fence, tookOver: true });
      expect(await b.release(job, second.token)).toBe(true);
      // The takeover released (undone), then claimed afresh: a new holder, a larger number, and still a takeover.
      const third = await a.claim(job, { leaseMs: 10_000 });
      if (third.status !== 'acquired') throw new Error(third.status);
      expect(third.fence).toBeGreaterThan(second.fence);
      expect(third.tookOver).toBe(true);

      // Another job's numbers come from the same counter: never equal to this one's.
      const other = await a.claim(id('fence-other'), { leaseMs: 10_000 });
      if (other.status !== 'acquired') throw new Error(other.status);
      expect(other.fence).toBeGreaterThan(third.fence);
    });

    it('a holder whose job was taken over and completed by another: its completion and renewal are superseded, never a success', async () => {
      const { a, b } = pair();
      const job = id('superseded');
      const first = await a.claim(job, { leaseMs: 100 });
      if (first.status !== 'acquired') throw new Error(first.status);
      await sleep(250);
      const taker = await b.claim(job, { leaseMs: 10_000 });
      if (taker.status !== 'acquired') throw new Error(taker.status);
      expect(await b.complete(job, taker.token, { retainMs: 60_000, fence: taker.fence })).toBe('completed');
      // The first holder comes back (it was cut off, or paused) and reports its work.
      expect(await a.renew!(job, first.token, { leaseMs: 10_000, fence: first.fence })).toBe('superseded');
      expect(await a.complete(job, first.token, { retainMs: 60_000, fence: first.fence })).toBe('superseded');
      // The taker's own retried completion and renewal still say completed.
      expect(await b.complete(job, taker.token, { retainMs: 60_000, fence: taker.fence })).toBe('completed');
      expect(await b.renew!(job, taker.token, { leaseMs: 10_000 })).toBe('completed');
      expect(await a.claim(job, { leaseMs: 10_000 })).toEqual({ status: 'completed' });
    });

    it('a superseded completion still records the job when the holder that took it over has lapsed too (no third run)', async () => {
      const { a, b } = pair();
      const job = id('superseded-lapsed');
      const first = await a.claim(job, { leaseMs: 100 });
      if (first.status !== 'acquired') throw new Error(first.status);
      await sleep(250);
      const taker = await b.claim(job, { leaseMs: 100 });
      if (taker.status !== 'acquired') throw new Error(taker.status);
      // While the taker's lease is live nothing changes.
      expect(await a.complete(job, first.token, { retainMs: 60_000 })).toBe('superseded');
      expect((await a.claim(job, { leaseMs: 10_000 })).status).toBe('in_progress');
      await sleep(250);
      // The taker lapsed (it may have crashed): the first holder's completion is recorded, and reported as superseded.
      expect(await a.complete(job, first.token, { retainMs: 60_000 })).toBe('superseded');
      expect(await b.claim(job, { leaseMs: 10_000 })).toEqual({ status: 'completed' });
      expect(await b.complete(job, taker.token, { retainMs: 60_000 })).toBe('superseded');
      // The first holder's completion retried (its reply was lost): superseded again, never completed.
      expect(await a.complete(job, first.token, { retainMs: 60_000 })).toBe('superseded');
    });

    it('a release is remembered: a late renewal or completion of the released token is superseded and never holds the job; the next claim takes it', async () => {
      const { a, b } = pair();
      const job = id('released');
      const first = await a.claim(job, { leaseMs: 10_000 });
      if (first.status !== 'acquired') throw new Error(first.status);
      expect(await a.release(job, first.token)).toBe(true);
      expect(await a.release(job, first.token)).toBe(false);
      // A renewal sent before the release, arriving after it (its reply had timed out).
      expect(await a.renew!(job, first.token, { leaseMs: 10_000, fence: first.fence })).toBe('superseded');
      const next = await b.claim(job, { leaseMs: 10_000 });
      if (next.status !== 'acquired') throw new Error(next.status);
      expect(next.fence).toBeGreaterThan(first.fence);
      expect(next.tookOver).toBeUndefined();
      expect(await b.release(job, next.token)).toBe(true);
      // A completion of a released claim: nobody holds the job, so it is recorded, and reported as superseded (retried too).
      expect(await b.complete(job, next.token, { retainMs: 60_000, fence: next.fence })).toBe('superseded');
      expect(await b.complete(job, next.token, { retainMs: 60_000, fence: next.fence })).toBe('superseded');
      expect(await a.claim(job, { leaseMs: 10_000 })).toEqual({ status: 'completed' });
    });

    it('a release marked tainted (its holder may have applied an effect the next one repeats): the next claim is a takeover, and a plain release of that claim keeps the taint', async () => {
      const { a, b } = pair();
      const job = id('tainted');
      const first = await a.claim(job, { leaseMs: 10_000 });
      if (first.status !== 'acquired') throw new Error(first.status);
      expect(await a.release(job, first.token, { tainted: true })).toBe(true);
      const next = await b.claim(job, { leaseMs: 10_000 });
      expect(next).toMatchObject({ status: 'acquired', tookOver: true });
      if (next.status !== 'acquired') throw new Error(next.status);
      expect(next.fence).toBeGreaterThan(first.fence);
      expect(await b.release(job, next.token)).toBe(true);
      expect(await a.claim(job, { leaseMs: 10_000 })).toMatchObject({ status: 'acquired', tookOver: true });
      // Untainted, the next claim is no takeover.
      const other = id('untainted');
      const c = await a.claim(other, { leaseMs: 10_000 });
      if (c.status !== 'acquired') throw new Error(c.status);
      expect(await a.release(other, c.token, { tainted: false })).toBe(true);
      expect((await b.claim(other, { leaseMs: 10_000 })) as { tookOver?: boolean }).not.toHaveProperty(
        'tookOver',
        true,
      );
      await expect(a.release(other, c.token, { tainted: 'yes' as unknown as boolean })).rejects.toThrow(
        TypeError,
      );
    });

    it('unicode and 200-character job ids are distinct keys', async () => {
      const { a } = pair();
      const suffix = id('');
      const ids = [
        `é😀\ue000-${suffix}`,
        `e😀\ue000-${suffix}`,
        'x'.repeat(200 - suffix.length) + suffix,
        'x'.repeat(199 - suffix.length) + suffix,
      ];
      expect(ids[2]).toHaveLength(200);
      for (const job of ids) expect((await a.claim(job, { leaseMs: 10_000 })).status).toBe('acquired');
      for (const job of ids) expect((await a.claim(job, { leaseMs: 10_000 })).status).toBe('in_progress');
    });

    it('pending jobs: tracked oldest first with their parameters, listed up to a time, gone once completed or forgotten', async () => {
      const { a, b } = pair();
      const base = 1_000_000 + 1000 * seq++;
      const ids = [id('pending-3'), id('pending-1'), id('pending-2'), id('pending-late')];
      await a.trackPending!(ids[0]!, {
        since: base + 3,
        userParameters: { order: 'A-1', n: 1.5, nested: { ok: true } },
      });
      await a.trackPending!(ids[1]!, { since: base + 1 });
      await b.trackPending!(ids[2]!, { since: base + 2 });
      await a.trackPending!(ids[3]!, { since: base + 50 });
      const mine = async (before: number, limit?: number) =>
        (await b.listPending!({ before, ...(limit === undefined ? {} : { limit }) })).filter((p) =>
          ids.includes(p.jobId),
        );
      expect((await mine(base + 10)).map((p) => [p.jobId, p.since])).toEqual([
        [ids[1], base + 1],
        [ids[2], base + 2],
        [ids[0], base + 3],
      ]);
      expect((await mine(base + 10)).find((p) => p.jobId === ids[0])?.userParameters).toEqual({
        order: 'A-1',
        n: 1.5,
        nested: { ok: true },
      });
      expect((await mine(base + 2, 2)).map((p) => p.jobId)).toEqual([ids[1], ids[2]]);
      // Completing a job removes it (in the same operation); forgetting removes it too.
      const c = await a.claim(ids[1]!, { leaseMs: 10_000 });
      if (c.status !== 'acquired') throw new Error(c.status);
      expect(await a.complete(ids[1]!, c.token, { retainMs: 60_000 })).toBe('completed');
      await b.forgetPending!(ids[2]!);
      expect((await mine(base + 100)).map((p) => p.jobId)).toEqual([ids[0], ids[3]]);
      // A completion refused (another token holds the job) leaves it pending.
      const held = await b.claim(ids[0]!, { leaseMs: 10_000 });
      expect(held.status).toBe('acquired');
      expect(await a.complete(ids[0]!, 'another-token', { retainMs: 60_000 })).toBe('superseded');
      expect((await mine(base + 100)).map((p) => p.jobId)).toEqual([ids[0], ids[3]]);
      for (const j of ids) await a.forgetPending!(j);
      expect(await mine(base + 100)).toEqual([]);
    });

    it('deferPending moves a pending job behind the others (seen from every instance); a job no longer pending stays gone', async () => {
      const { a, b } = pair();
      const base = 2_000_000 + 1000 * seq++;
      const ids = [id('defer-1'), id('defer-2'), id('defer-3')];
      for (const [k, j] of ids.entries())
        await a.trackPending!(j, { since: base + k, userParameters: { k } });
      const mine = async () =>
        (await b.listPending!({ before: base + 500 })).filter((p) => ids.includes(p.jobId));
      await a.deferPending!(ids[0]!, { since: base + 10 });
      expect((await mine()).map((p) => [p.jobId, p.since, p.userParameters])).toEqual([
        [ids[1], base + 1, { k: 1 }],
        [ids[2], base + 2, { k: 2 }],
        [ids[0], base + 10, { k: 0 }],
      ]);
      // Past `before`: not listed until then.
      await b.deferPending!(ids[1]!, { since: base + 1000 });
      expect((await mine()).map((p) => p.jobId)).toEqual([ids[2], ids[0]]);
      await a.forgetPending!(ids[2]!);
      await a.deferPending!(ids[2]!, { since: base + 20 });
      expect((await mine()).map((p) => p.jobId)).toEqual([ids[0]]);
      await expect(a.deferPending!(ids[0]!, {} as { since: number })).rejects.toThrow(TypeError);
      for (const j of ids) await a.forgetPending!(j);
    });

    it('200 concurrent claims of one job id: exactly one acquired', async () => {
      const { a, b, shared } = pair();
      const job = id('race');
      const stores = shared ? [a, b] : [a];
      const results = await Promise.all(
        Array.from({ length: 200 }, (_, k) => stores[k % stores.length]!.claim(job, { leaseMs: 10_000 })),
      );
      expect(results.filter((r) => r.status === 'acquired')).toHaveLength(1);
      expect(results.filter((r) => r.status === 'in_progress')).toHaveLength(199);
    });

    it('refuses bad arguments with a TypeError', async () => {
      const { a } = pair();
      await expect(a.claim('', { leaseMs: 1000 })).rejects.toThrow(TypeError);
      await expect(a.claim(id('args'), { leaseMs: 0 })).rejects.toThrow(TypeError);
      await expect(a.claim(id('args'), { leaseMs: 1000, token: 'short' })).rejects.toThrow(TypeError);
      await expect(a.claim(id('args'), { leaseMs: 1000, token: 'has space in it' })).rejects.toThrow(
        TypeError,
      );
      await expect(a.complete(id('args'), '', { retainMs: 1000 })).rejects.toThrow(TypeError);
    });

    it('refuses ids it could not keep apart or store: lone surrogates, control characters, over 256 characters', async () => {
      const { a } = pair();
      // '\ud800' and '\ud801' would both become U+FFFD on the way to Redis or PostgreSQL.
      for (const bad of [
        `lone-\ud800-${id('')}`,
        `lone-\udfff-${id('')}`,
        `nul-\u0000-${id('')}`,
        `c1-\u0085-${id('')}`,
        'x'.repeat(257),
      ]) {
        await expect(a.claim(bad, { leaseMs: 1000 }), JSON.stringify(bad)).rejects.toThrow(TypeError);
      }
      // Characters, not UTF-16 units: 200 astral characters are 400 units, and fine.
      const astral = '😀'.repeat(200) + id('');
      expect(astral.length).toBeGreaterThan(256);
      expect((await a.claim(astral, { leaseMs: 1000 })).status).toBe('acquired');
    });
  });
}
