/**
 * The repair queue (src/lib/jobs/repair.ts) and its hard cases, on a real memory store seen through a faulty link
 * (each operation's reply can be lost, or its write can land late): a lost claim that
 * lands after its release found nothing, a completion the store does not take while
 * another instance waits, and a graceful shutdown that does not hang on them.
 */
import { describe, expect, it } from 'vitest';
import {
  createReceiver,
  MemoryIdempotencyStore,
  type IdempotencyStore,
  type ReceiverAnswer,
} from '../../src/index.js';
import { StoreUnavailableError } from '../../src/lib/base/errors.js';
import { RepairQueue } from '../../src/lib/jobs/repair.js';
import { systemClock } from '../../src/lib/jobs/clock.js';
import { resolveLogger } from '../../src/lib/base/log.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';
import { recorder } from '../adapters/receiver-table.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const publicKey = publicPem(2048);
const code = (a: ReceiverAnswer) => {
  const body = JSON.parse(a.body) as { status?: string; error?: { code: string } };
  return `${a.status} ${body.status ?? body.error?.code}`;
};
const until = async (ok: () => boolean, ms = 3000) => {
  for (const end = Date.now() + ms; !ok() && Date.now() < end;) await sleep(20);
};

/** One instance's link to a shared store: each operation can fail, optionally still landing later. */
function link(shared: MemoryIdempotencyStore) {
  const faults = { claimLandsAfterMs: -1, completeDown: false, renewDown: false };
  const store: IdempotencyStore = {
    claim: async (id, o) => {
      if (faults.claimLandsAfterMs >= 0) {
        // The reply is lost; the write reaches the store later.
        setTimeout(() => void shared.claim(id, o), faults.claimLandsAfterMs);
        throw new StoreUnavailableError('claim: no reply');
      }
      return shared.claim(id, o);
    },
    renew: async (id, t, o) => {
      if (faults.renewDown) throw new StoreUnavailableError('renew: no reply');
      return shared.renew(id, t, o);
    },
    complete: async (id, t, o) => {
      if (faults.completeDown) throw new StoreUnavailableError('complete: no reply');
      return shared.complete(id, t, o);
    },
    release: (id, t) => shared.release(id, t),
  };
  return { store, faults };
}

/** Two receiver instances, each with its own faulty link to one shared store, counting handler runs. */
function twoInstances(options: {
  leaseMs: number;
  takeoverGraceMs?: number;
  onEvent?: () => void | Promise<void>;
}) {
  const shared = new MemoryIdempotencyStore();
  const a = link(shared);
  const b = link(shared);
  const counter = { runs: 0 };
  const onEvent = (): void | Promise<void> => {
    counter.runs++;
    return options.onEvent?.();
  };
  const make = (store: IdempotencyStore) =>
    createReceiver({
      publicKey,
      store,
      leaseMs: options.leaseMs,
      takeoverGraceMs: options.takeoverGraceMs,
      log: {},
      onEvent,
    });
  return { a, b, first: make(a.store), second: make(b.store), counter };
}

describe('repair queue', () => {
  it('a lost claim that lands after its release found nothing is still released: the retry is processed, not blocked for the lease', async () => {
    const shared = new MemoryIdempotencyStore();
    const { store, faults } = link(shared);
    let runs = 0;
    const receive = createReceiver({
      publicKey,
      store,
      leaseMs: 60_000,
      log: {},
      onEvent: () => void runs++,
    });
    const d = signed(jobId('late-claim'));
    faults.claimLandsAfterMs = 400;
    expect(code(await receive({ body: d.body, headers: d.headers }))).toBe('503 STORE_UNAVAILABLE');
    faults.claimLandsAfterMs = -1;
    // The first release attempts find nothing; the claim lands at 400 ms; a later attempt releases it.
    await sleep(450);
    await until(() => receive.pending === 0);
    expect(receive.pending).toBe(0);
    // A redelivery to another instance of the same store finds the job free.
    const other = createReceiver({
      publicKey,
      store: link(shared).store,
      leaseMs: 60_000,
      log: {},
      onEvent: () => void runs++,
    });
    expect(code(await other({ body: d.body, headers: d.headers }))).toBe('200 processed');
    expect(runs).toBe(1);
  });

  it('while a completion waits for the store, the lease is still renewed: another instance answers 503, never runs the job, then sees it completed', async () => {
    const { a, first, second, counter } = twoInstances({ leaseMs: 300 });
    const d = signed(jobId('pending-complete'));
    a.faults.completeDown = true;
    expect(code(await first({ body: d.body, headers: d.headers }))).toBe('200 processed');
    expect(first.pending).toBe(1);
    // Four leases later the completion is still not stored; the claim is still held.
    await sleep(1200);
    expect(code(await second({ body: d.body, headers: d.headers }))).toBe('503 IN_PROGRESS');
    a.faults.completeDown = false;
    await until(() => first.pending === 0);
    expect(code(await second({ body: d.body, headers: d.headers }))).toBe('200 duplicate');
    expect(counter.runs).toBe(1);
  });

  it('an instance cut off from the store for longer than its lease, holding a completion: another instance waits the takeover grace, sees it completed, never runs the job', async () => {
    const { a, first, second, counter } = twoInstances({ leaseMs: 300, takeoverGraceMs: 1500 });
    const d = signed(jobId('cut-off'));
    // The handler runs; then the store stops answering this instance (no renewal, no completion).
    a.faults.renewDown = true;
    a.faults.completeDown = true;
    expect(code(await first({ body: d.body, headers: d.headers }))).toBe('200 processed');
    await sleep(700); // two leases: the claim ran out in the store
    // The store answers again, and a duplicate reaches the other instance at that moment.
    a.faults.renewDown = false;
    a.faults.completeDown = false;
    expect(code(await second({ body: d.body, headers: d.headers }))).toBe('200 duplicate');
    expect(counter.runs).toBe(1);
    expect(first.pending).toBe(0);
  });

  it('a holder that is gone (a crashed instance) is taken over once the takeover grace has passed, in the same delivery', async () => {
    const shared = new MemoryIdempotencyStore();
    let runs = 0;
    const receive = createReceiver({
      publicKey,
      store: link(shared).store,
      leaseMs: 300,
      takeoverGraceMs: 400,
      log: {},
      onEvent: () => void runs++,
    });
    const id = jobId('crashed-holder');
    const d = signed(id);
    expect((await shared.claim(id, { leaseMs: 200 })).status).toBe('acquired');
    await sleep(300);
    const started = Date.now();
    expect(code(await receive({ body: d.body, headers: d.headers }))).toBe('200 processed');
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
    expect(runs).toBe(1);
  });

  it("a handler still running when the store answers again renews at once (not a third of a lease later), within the other instance's grace", async () => {
    let finish!: () => void;
    const slow = new Promise<void>((r) => (finish = r));
    // Renewals every 2 s; the store stops answering this instance's renewals from the start.
    // Only the first instance's handler is slow (the second must never run it).
    let calls = 0;
    const { a, first, second, counter } = twoInstances({
      leaseMs: 6000,
      takeoverGraceMs: 1000,
      onEvent: () => (calls++ === 0 ? slow : undefined),
    });
    const d = signed(jobId('slow-cut-off'));
    a.faults.renewDown = true;
    const answer = first({ body: d.body, headers: d.headers });
    // The lease ends in the store at 6 s; at 6.6 s the store answers again and a duplicate
    // comes to the other instance, which waits 1 s. A renewal every 2 s would come at 8 s.
    await sleep(6600);
    a.faults.renewDown = false;
    expect(code(await second({ body: d.body, headers: d.headers }))).toBe('503 IN_PROGRESS');
    finish();
    // Its signal fired at 4.8 s (the lease unconfirmed): final (issue 37 point 7). Not
    // recorded as processed: the retry runs it, and the double was reported.
    expect(code(await answer)).toBe('503 CLAIM_LOST');
    expect(code(await second({ body: d.body, headers: d.headers }))).toBe('200 processed');
    expect(counter.runs).toBe(2);
  }, 20_000);

  it('a completion waiting in the repair queue is not dropped for the release of another claim of the same job', () => {
    const queue = new RepairQueue({
      store: new MemoryIdempotencyStore(),
      log: resolveLogger({}),
      clock: systemClock,
      superseded: () => undefined,
    });
    queue.complete('both', 'token-done-1', 1, 60_000);
    queue.release('undo', 'both', 'token-lost-2', 5000);
    expect(queue.completing('both')).toBe(true);
    // The other way round a completion replaces the release (same claim, later step).
    queue.release('release', 'then', 'token-same-3', 5000);
    queue.complete('then', 'token-same-3', 2, 60_000);
    expect(queue.completing('then')).toBe(true);
    // Tasks are kept per claim: the undo of the other claim of 'both' stays (it finds nothing held, harmlessly).
    expect(queue.size).toBe(3);
    // Two completions of one job by two claims (a holder cut off, the job taken over in this process): both kept.
    queue.complete('twice', 'token-first-4', 3, 60_000);
    queue.complete('twice', 'token-taker-5', 4, 60_000);
    expect(queue.size).toBe(5);
  });

  it('receivers on one store, each with its own runner, hear their own repairs in their own log', async () => {
    const shared = new MemoryIdempotencyStore();
    const { store, faults } = link(shared);
    const quiet = recorder();
    const ops = recorder();
    const first = createReceiver({ publicKey, store, log: quiet.log, onEvent: () => undefined });
    const second = createReceiver({ publicKey, store, log: ops.log, onEvent: () => undefined });
    const id = jobId('own-log');
    const d = signed(id);
    faults.completeDown = true;
    expect(code(await second({ body: d.body, headers: d.headers }))).toBe('200 processed');
    faults.completeDown = false;
    await until(() => second.pending === 0);
    expect(second.pending).toBe(0);
    expect(first.pending).toBe(0); // its own runner: nothing of the other's in it
    expect(ops.lines.info.filter((l) => l.includes(`recorded the completion of job ${id}`))).toHaveLength(1);
    expect(Object.values(quiet.lines).flat()).toEqual([]);
  });

  it('close() does not wait a whole lease on a lost claim the store says it never saw', async () => {
    const shared = new MemoryIdempotencyStore();
    const { store, faults } = link(shared);
    const receive = createReceiver({ publicKey, store, leaseMs: 60_000, log: {}, onEvent: () => undefined });
    faults.claimLandsAfterMs = 60_000; // effectively never
    const d = signed(jobId('never-landed'));
    expect(code(await receive({ body: d.body, headers: d.headers }))).toBe('503 STORE_UNAVAILABLE');
    faults.claimLandsAfterMs = -1;
    const started = Date.now();
    await receive.close();
    // Bounded by the default 10 s drain timeout were it waiting; it returns after the first "nothing".
    expect(Date.now() - started).toBeLessThan(5000);
  });
});
