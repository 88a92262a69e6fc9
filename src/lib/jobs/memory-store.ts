import { StoreUnavailableError } from '../base/errors.js';
import { resolveLogger, type Logger, type LoggerInput } from '../base/log.js';
import { optionalNumber } from '../base/options.js';
import {
  transition,
  type CompletedRecord,
  type CompleteReply,
  type HeldRecord,
  type JobRecord,
  type JobReply,
  type JobRequest,
  type ReleasedRecord,
  type RenewReply,
} from './model.js';
import { checkOptionNames, type OptionNamesOf } from '../base/options.js';
import {
  checkJobId,
  LAPSED_CLAIM_KEEP_MS,
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
  type ReleaseOptions,
  type DeferPendingOptions,
  type ListPendingOptions,
  type PendingJob,
  type PendingStore,
  type RenewOptions,
  type TrackPendingOptions,
} from './store.js';

export interface MemoryStoreOptions {
  /** Most job ids held at once (default 100,000). Oldest completed marks go first; claims in progress are never evicted. */
  maxEntries?: number;
  /** Clock in epoch milliseconds (default `Date.now`), for tests. */
  now?: () => number;
  /** Where a warning goes when completed marks are evicted before their retention ends (default: console). */
  log?: LoggerInput;
}

/**
 * In-process idempotency store, the receivers' default: right for a single
 * instance (use the Redis or PostgreSQL store when several instances share the
 * work, or when a restart must not forget completed jobs). It runs the claim
 * protocol's own transition function (`src/lib/jobs/model.ts`) on its records.
 * Bounded; no timers, so it never keeps the process alive: expired entries are
 * dropped when met or when room is needed.
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
  // Held, released and completed records in three maps, each in time order (Map keeps
  // insertion order; records are re-inserted when their time moves), so the oldest
  // completions and releases and the earliest lease ends are met first when room is needed.
  private readonly claims = new Map<string, HeldRecord>();
  private readonly released = new Map<string, ReleasedRecord>();
  private readonly completed = new Map<string, CompletedRecord>();
  private readonly pending = new Map<string, PendingJob>();
  private readonly maxEntries: number;
  private readonly now: () => number;
  private readonly log: Logger;
  private lastFence = 0;
  private readonly fences = () => ++this.lastFence;
  private warnedEviction = false;

  constructor(options: MemoryStoreOptions = {}) {
    checkOptionNames(options, MEMORY_STORE_OPTIONS);
    this.maxEntries = optionalNumber(options.maxEntries, 'maxEntries', 100_000, { integer: true });
    this.now = options.now ?? Date.now;
    this.log = resolveLogger(options.log);
  }

  /** Number of job ids held (claims, releases and completed marks, expired ones included until swept). */
  get size(): number {
    return this.claims.size + this.released.size + this.completed.size;
  }

  /** Applies `request` to the job's record, keeps the new record, and gives the reply. */
  private apply<R extends JobRequest>(jobId: string, request: R): JobReply<R> {
    const now = this.now();
    const before = this.completed.get(jobId) ?? this.claims.get(jobId) ?? this.released.get(jobId);
    const { record, reply } = transition(before, request, now, this.fences);
    if (record !== before) this.keep(jobId, record, now);
    return reply;
  }

  /** Stores a job's new record (undefined: free), re-inserted at the end of its map. */
  private keep(jobId: string, record: JobRecord | undefined, now: number): void {
    const known = this.claims.delete(jobId) || this.completed.delete(jobId) || this.released.delete(jobId);
    if (record === undefined) return;
    if (!known) this.makeRoom(now);
    if (record.state === 'held') this.claims.set(jobId, record);
    else if (record.state === 'released') this.released.set(jobId, record);
    else {
      this.completed.set(jobId, record);
      this.pending.delete(jobId);
    }
  }

  async claim(jobId: string, options: ClaimOptions): Promise<ClaimResult> {
    const { leaseMs, token, graceMs } = claimArgs(jobId, options);
    const reply = this.apply(jobId, { op: 'claim', token, leaseMs, graceMs });
    if (reply.status === 'acquired')
      return { status: 'acquired', token, fence: reply.fence, ...(reply.tookOver ? { tookOver: true } : {}) };
    if (reply.status === 'completed') return { status: 'completed' };
    return {
      status: 'in_progress',
      retryAfterMs: reply.retryAfterMs,
      ...(reply.stale ? { stale: true } : {}),
    };
  }

  async renew(jobId: string, token: string, options: RenewOptions): Promise<RenewReply> {
    const { leaseMs, fence } = renewArgs(jobId, token, options);
    return this.apply(jobId, { op: 'renew', token, leaseMs, ...(fence === undefined ? {} : { fence }) });
  }

  async complete(jobId: string, token: string, options: CompleteOptions): Promise<CompleteReply> {
    const { retainMs, fence } = completeArgs(jobId, token, options);
    return this.apply(jobId, { op: 'complete', token, retainMs, ...(fence === undefined ? {} : { fence }) });
  }

  /** Always answers (it lives in this process). */
  async ping(): Promise<void> {}

  async release(jobId: string, token: string, options?: ReleaseOptions): Promise<boolean> {
    const { tainted } = releaseArgs(jobId, token, options);
    return this.apply(jobId, { op: 'release', token, keepMs: LAPSED_CLAIM_KEEP_MS, tainted }) === 'released';
  }

  async trackPending(jobId: string, options: TrackPendingOptions = {}): Promise<void> {
    const { since, userParameters } = trackArgs(jobId, options);
    if (!this.pending.has(jobId) && this.pending.size >= this.maxEntries) {
      throw new StoreUnavailableError(
        `The memory idempotency store holds ${this.maxEntries} pending jobs and cannot track another; raise maxEntries or use a shared store.`,
      );
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
    // Expired entries first, then the oldest release (a late renewal of it would hold the
    // job again), then the oldest completed mark; never a live claim. Entries go in in
    // time order, so expired ones sit at the front (amortised O(1)).
    sweep(this.completed, now);
    sweep(this.released, now);
    sweep(this.claims, now);
    for (const id of this.released.keys()) {
      if (this.size < this.maxEntries) break;
      this.released.delete(id);
    }
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
    if (this.size >= this.maxEntries)
      for (const [id, e] of this.claims) if (e.leaseEnd <= now) this.claims.delete(id);
    if (this.size >= this.maxEntries) {
      throw new StoreUnavailableError(
        `The memory idempotency store holds ${this.maxEntries} jobs in progress and cannot take another; raise maxEntries or use a shared store.`,
      );
    }
  }
}

/** Drops the records at the front of `map` whose time is over (completed marks past retention, lapsed claims). */
function sweep(map: Map<string, JobRecord>, now: number): void {
  for (const [id, r] of map) {
    if (end(r) > now) break;
    map.delete(id);
  }
}

/** A record's time: a claim's lease end, a completion's retention end, a release's keep end. */
function end(r: JobRecord): number {
  return r.state === 'held' ? r.leaseEnd : r.until;
}

/** The names of {@link MemoryStoreOptions}. */
export const MEMORY_STORE_OPTIONS = {
  maxEntries: true,
  now: true,
  log: true,
} as const satisfies OptionNamesOf<MemoryStoreOptions>;
