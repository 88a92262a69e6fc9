import { StoreUnavailableError } from '../errors.js';
import { checkJobId, checkPositive, newToken, type ClaimOptions, type ClaimResult, type CompleteOptions, type IdempotencyStore } from './types.js';

export interface MemoryStoreOptions {
  /** Most job ids held at once (default 100,000). Oldest completed marks go first; claims in progress are never evicted. */
  maxEntries?: number;
  /** Clock in epoch milliseconds (default `Date.now`), for tests. */
  now?: () => number;
}

interface Entry {
  token: string | undefined;
  /** Lease end while claimed, retention end once completed. */
  until: number;
}

/**
 * In-process idempotency store, the receivers' default: right for a single
 * instance (use the Redis or PostgreSQL store when several instances share the
 * work). Bounded; no timers, so it never keeps the process alive: expired entries
 * are dropped when met or when room is needed.
 *
 * @example
 * ```ts
 * import { MemoryIdempotencyStore } from 'jobhook';
 * const store = new MemoryIdempotencyStore({ maxEntries: 50_000 });
 * const claim = await store.claim(jobId, { leaseMs: 60_000 });
 * if (claim.status === 'acquired') {
 *   await handle();
 *   await store.complete(jobId, claim.token, { retainMs: 86_400_000 });
 * }
 * ```
 */
export class MemoryIdempotencyStore implements IdempotencyStore {
  // Insertion order is kept by Map: completed marks are re-inserted on completion, so
  // iterating from the start meets the oldest completions first.
  private readonly claims = new Map<string, Entry>();
  private readonly completed = new Map<string, Entry>();
  private readonly maxEntries: number;
  private readonly now: () => number;

  constructor(options: MemoryStoreOptions = {}) {
    this.maxEntries = options.maxEntries === undefined ? 100_000 : checkPositive(options.maxEntries, 'maxEntries');
    this.now = options.now ?? Date.now;
  }

  /** Number of job ids held (claims and completed marks, expired ones included until swept). */
  get size(): number {
    return this.claims.size + this.completed.size;
  }

  async claim(jobId: string, options: ClaimOptions): Promise<ClaimResult> {
    checkJobId(jobId);
    const leaseMs = checkPositive(options?.leaseMs, 'leaseMs');
    const now = this.now();
    const done = this.completed.get(jobId);
    if (done !== undefined) {
      if (done.until > now) return { status: 'completed' };
      this.completed.delete(jobId);
    }
    const held = this.claims.get(jobId);
    if (held !== undefined && held.until > now) return { status: 'in_progress', retryAfterMs: held.until - now };
    if (held === undefined) this.makeRoom(now);
    const token = newToken();
    this.claims.set(jobId, { token, until: now + leaseMs });
    return { status: 'acquired', token };
  }

  async complete(jobId: string, token: string, options: CompleteOptions): Promise<boolean> {
    checkJobId(jobId);
    const retainMs = checkPositive(options?.retainMs, 'retainMs');
    const held = this.claims.get(jobId);
    // A lease that ran out is no longer owned, reclaimed or not (as in Redis, where the key expires).
    if (held === undefined || held.token !== token || held.until <= this.now()) return false;
    this.claims.delete(jobId);
    this.completed.delete(jobId);
    this.completed.set(jobId, { token: undefined, until: this.now() + retainMs });
    return true;
  }

  async release(jobId: string, token: string): Promise<boolean> {
    checkJobId(jobId);
    const held = this.claims.get(jobId);
    if (held === undefined || held.token !== token || held.until <= this.now()) return false;
    this.claims.delete(jobId);
    return true;
  }

  private makeRoom(now: number): void {
    if (this.size < this.maxEntries) return;
    // Expired entries first, then the oldest completed mark; never a live claim.
    // Entries go in in time order, so expired ones sit at the front (amortised O(1)).
    sweep(this.completed, now);
    sweep(this.claims, now);
    for (const id of this.completed.keys()) {
      if (this.size < this.maxEntries) break;
      this.completed.delete(id);
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
