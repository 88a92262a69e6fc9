import { StoreUnavailableError } from '../errors.js';
import { resolveLogger, type Logger, type LoggerInput } from '../log.js';
import { optionalNumber } from '../options.js';
import {
  checkJobId,
  claimArgs,
  completeArgs,
  deferArgs,
  listArgs,
  releaseArgs,
  renewArgs,
  trackArgs,
  type ClaimOptions,
  type ClaimResult,
  type CompleteOptions,
  type DeferPendingOptions,
  type ListPendingOptions,
  type PendingJob,
  type PendingStore,
  type RenewOptions,
  type TrackPendingOptions,
} from './types.js';

export interface MemoryStoreOptions {
  /** Most job ids held at once (default 100,000). Oldest completed marks go first; claims in progress are never evicted. */
  maxEntries?: number;
  /** Clock in epoch milliseconds (default `Date.now`), for tests. */
  now?: () => number;
  /** Where a warning goes when completed marks are evicted before their retention ends (default: console). */
  log?: LoggerInput;
}

interface Entry {
  /** The owner while claimed; undefined once completed. */
  token: string | undefined;
  /** Lease end while claimed, retention end once completed. */
  until: number;
  /** When a claim by another token first found this lease over (takeover grace), epoch ms. */
  staleAt?: number;
}

/**
 * In-process idempotency store, the receivers' default: right for a single
 * instance (use the Redis or PostgreSQL store when several instances share the
 * work, or when a restart must not forget completed jobs). Bounded; no timers, so
 * it never keeps the process alive: expired entries are dropped when met or when
 * room is needed.
 *
 * @example
 * ```ts
 * import { MemoryIdempotencyStore } from 'jobhook';
 * const store = new MemoryIdempotencyStore({ maxEntries: 50_000 });
 * const claim = await store.claim(jobId, { leaseMs: 5_000 });
 * if (claim.status === 'acquired') {
 *   await handle();
 *   await store.complete(jobId, claim.token, { retainMs: 86_400_000 });
 * }
 * ```
 */
export class MemoryIdempotencyStore implements PendingStore {
  // Insertion order is kept by Map: completed marks are re-inserted on completion, so
  // iterating from the start meets the oldest completions first.
  private readonly claims = new Map<string, Entry>();
  private readonly completed = new Map<string, Entry>();
  private readonly pending = new Map<string, PendingJob>();
  private readonly maxEntries: number;
  private readonly now: () => number;
  private readonly log: Logger;
  private warnedEviction = false;

  constructor(options: MemoryStoreOptions = {}) {
    this.maxEntries = optionalNumber(options.maxEntries, 'maxEntries', 100_000, { integer: true });
    this.now = options.now ?? Date.now;
    this.log = resolveLogger(options.log);
  }

  /** Number of job ids held (claims and completed marks, expired ones included until swept). */
  get size(): number {
    return this.claims.size + this.completed.size;
  }

  /** The live entry of a job: its claim or completed mark, if unexpired. */
  private live(jobId: string, now: number): { claim?: Entry; done?: Entry } {
    const done = this.completed.get(jobId);
    if (done !== undefined && done.until > now) return { done };
    const claim = this.claims.get(jobId);
    if (claim !== undefined && claim.until > now) return { claim };
    return {};
  }

  async claim(jobId: string, options: ClaimOptions): Promise<ClaimResult> {
    const { leaseMs, token, graceMs } = claimArgs(jobId, options);
    const now = this.now();
    const { claim, done } = this.live(jobId, now);
    if (done !== undefined) return { status: 'completed' };
    if (claim !== undefined && claim.token !== token) return { status: 'in_progress', retryAfterMs: claim.until - now };
    const held = this.claims.get(jobId);
    if (claim === undefined && held !== undefined && held.token !== token && graceMs > 0) {
      // Another token's lease ran out: it may be alive and cut off; give it graceMs from now.
      held.staleAt ??= now;
      const wait = held.staleAt + graceMs - now;
      if (wait > 0) return { status: 'in_progress', retryAfterMs: wait, stale: true };
    }
    this.completed.delete(jobId);
    this.hold(jobId, token, now + leaseMs, now);
    return { status: 'acquired', token };
  }

  async renew(jobId: string, token: string, options: RenewOptions): Promise<boolean> {
    const { leaseMs } = renewArgs(jobId, token, options);
    const now = this.now();
    const { claim, done } = this.live(jobId, now);
    if (done !== undefined || (claim !== undefined && claim.token !== token)) return false;
    this.hold(jobId, token, now + leaseMs, now);
    return true;
  }

  async complete(jobId: string, token: string, options: CompleteOptions): Promise<boolean> {
    const { retainMs } = completeArgs(jobId, token, options);
    const now = this.now();
    const { claim } = this.live(jobId, now);
    if (claim !== undefined && claim.token !== token) return false;
    this.claims.delete(jobId);
    this.completed.delete(jobId);
    this.completed.set(jobId, { token: undefined, until: now + retainMs });
    this.pending.delete(jobId);
    return true;
  }

  async release(jobId: string, token: string): Promise<boolean> {
    releaseArgs(jobId, token);
    const held = this.claims.get(jobId);
    if (held === undefined || held.token !== token) return false;
    this.claims.delete(jobId);
    return true;
  }

  /** (Re)inserts a claim at the end, keeping the maps in time order for the sweep. */
  private hold(jobId: string, token: string, until: number, now: number): void {
    if (!this.claims.delete(jobId)) this.makeRoom(now);
    this.claims.set(jobId, { token, until });
  }

  async trackPending(jobId: string, options: TrackPendingOptions = {}): Promise<void> {
    const { since, userParameters } = trackArgs(jobId, options);
    if (!this.pending.has(jobId) && this.pending.size >= this.maxEntries) {
      throw new StoreUnavailableError(`The memory idempotency store holds ${this.maxEntries} pending jobs and cannot track another; raise maxEntries or use a shared store.`);
    }
    this.pending.set(jobId, { jobId, since, ...(userParameters === undefined ? {} : { userParameters }) });
  }

  async listPending(options: ListPendingOptions): Promise<PendingJob[]> {
    const { before, limit } = listArgs(options);
    return [...this.pending.values()]
      .filter((p) => p.since <= before)
      .sort((a, b) => a.since - b.since)
      .slice(0, limit);
  }

  async forgetPending(jobId: string): Promise<void> {
    this.pending.delete(checkJobId(jobId));
  }

  async deferPending(jobId: string, options: DeferPendingOptions): Promise<void> {
    const { since } = deferArgs(jobId, options);
    const p = this.pending.get(jobId);
    if (p !== undefined) this.pending.set(jobId, { ...p, since });
  }

  private makeRoom(now: number): void {
    if (this.size < this.maxEntries) return;
    // Expired entries first, then the oldest completed mark; never a live claim.
    // Entries go in in time order, so expired ones sit at the front (amortised O(1)).
    sweep(this.completed, now);
    sweep(this.claims, now);
    for (const [id, e] of this.completed) {
      if (this.size < this.maxEntries) break;
      this.completed.delete(id);
      if (e.until > now && !this.warnedEviction) {
        this.warnedEviction = true;
        this.log.warn(
          `jobhook: the memory idempotency store is full (maxEntries ${this.maxEntries}) and forgets completed jobs before their retention ends; a redelivery of those jobs would run the handler again. Raise maxEntries or use the Redis or PostgreSQL store.`,
        );
      }
    }
    // Leases of different lengths can leave an expired claim behind a live one: look at all.
    if (this.size >= this.maxEntries) for (const [id, e] of this.claims) if (e.until <= now) this.claims.delete(id);
    if (this.size >= this.maxEntries) {
      throw new StoreUnavailableError(`The memory idempotency store holds ${this.maxEntries} jobs in progress and cannot take another; raise maxEntries or use a shared store.`);
    }
  }
}

function sweep(map: Map<string, Entry>, now: number): void {
  for (const [id, e] of map) {
    if (e.until > now) break;
    map.delete(id);
  }
}
