import { StoreUnavailableError } from '../base/errors.js';
import { checkOptionNames, optionalNumber, type OptionNamesOf } from '../base/options.js';
import type { JsonObjectValue } from '../core/event.js';
import { transition, type JobRecord, type JobReply, type JobRequest } from '../jobs/model.js';
import {
  checkJobId,
  deferArgs,
  listArgs,
  trackArgs,
  type DeferPendingOptions,
  type ListPendingOptions,
  type PendingJob,
  type PendingStore,
  type TrackPendingOptions,
} from '../jobs/store.js';
import { guarded } from './timeout.js';
import { RecordStore, recordExpiry } from './record-store.js';

type KvKeyPart = string | number | bigint | boolean | Uint8Array;
type KvKey = readonly KvKeyPart[];
interface KvEntry {
  readonly key: KvKey;
  readonly value: unknown;
  readonly versionstamp: string | null;
}
interface KvAtomic {
  check(...checks: Array<{ key: KvKey; versionstamp: string | null }>): KvAtomic;
  set(key: KvKey, value: unknown, options?: { expireIn?: number }): KvAtomic;
  delete(key: KvKey): KvAtomic;
  commit(): Promise<{ ok: boolean }>;
}

/** The parts of `Deno.Kv` the store uses (what `Deno.openKv()` returns). */
export interface DenoKvLike {
  getMany(keys: KvKey[]): Promise<KvEntry[]>;
  list(
    selector: { prefix: KvKey; end?: KvKey },
    options?: { limit?: number },
  ): AsyncIterable<KvEntry> & object;
  atomic(): KvAtomic;
}

export interface DenoKvStoreOptions {
  /** The database: `await Deno.openKv()` (Deno Deploy) or `await Deno.openKv('./jobhook.kv')` (a file). */
  kv: DenoKvLike;
  /** The first parts of every key the store writes (default `['jobhook']`). */
  prefix?: readonly string[];
  /** Deadline of one store operation before it fails with STORE_UNAVAILABLE (default 5,000 ms). */
  operationTimeoutMs?: number;
  /** A clock in epoch ms instead of `Date.now` (tests of the protocol's timing). */
  now?: () => number;
}

/**
 * The last fencing number handed out on each database, in this process. Numbers are the
 * clock's milliseconds × 1024, or one more than the last when that is larger: no counter
 * entry that every new holder of every job would write (one such key made concurrent claims
 * of different jobs retry each other's commits until they ran out of time: 200 at once took
 * 2.7 s, and under load they failed with STORE_UNAVAILABLE). The protocol takes the larger
 * of this and one more than the job's last number, so each job's numbers still grow with
 * every new holder; across jobs they follow the clock (exactly, within one process).
 */
const lastFences = new WeakMap<object, number>();

function nextFence(kv: object, now: number): number {
  const next = Math.max((lastFences.get(kv) ?? 0) + 1, Math.floor(now) * 1024);
  lastFences.set(kv, next);
  return next;
}

/** How many times an operation reads again after another one changed its keys first. */
const ATTEMPTS = 200;

interface PendingValue {
  since: number;
  userParameters?: JsonObjectValue;
}

/**
 * Idempotency store on Deno KV (`Deno.openKv()`): each job's record is one entry, and
 * every claim, renewal, completion and release is one atomic operation that reads the
 * record, applies the protocol (src/lib/jobs/model.ts) and commits only if nothing changed
 * it meanwhile (versionstamp checks), reading again if something did. On Deno Deploy every
 * isolate shares the database; on one machine, a KV file keeps completions across
 * restarts. Needs `--unstable-kv` where Deno still asks for it.
 *
 * @example
 * ```ts
 * import { createReceiver } from 'jobhook/web';
 * import { DenoKvIdempotencyStore } from 'jobhook/deno';
 *
 * const store = new DenoKvIdempotencyStore({ kv: await Deno.openKv() });
 * Deno.serve(createReceiver({ publicKey: Deno.env.get('GATEWAY_PUBLIC_KEY')!, store, onEvent }));
 * ```
 */
export class DenoKvIdempotencyStore extends RecordStore implements PendingStore {
  private readonly kv: DenoKvLike;
  private readonly prefix: KvKey;
  private readonly timeoutMs: number;
  protected readonly clock: (() => number) | undefined;

  constructor(options: DenoKvStoreOptions) {
    super();
    checkOptionNames(options, DENO_KV_STORE_OPTIONS);
    const kv = options?.kv;
    if (typeof kv?.atomic !== 'function' || typeof kv.getMany !== 'function')
      throw new TypeError('kv must be a Deno.Kv: new DenoKvIdempotencyStore({ kv: await Deno.openKv() })');
    const prefix = options.prefix ?? ['jobhook'];
    if (!Array.isArray(prefix) || prefix.some((p) => typeof p !== 'string'))
      throw new TypeError('prefix must be an array of strings, e.g. ["jobhook"]');
    if (options.now !== undefined && typeof options.now !== 'function')
      throw new TypeError('now must be a function returning epoch milliseconds');
    this.kv = kv;
    this.prefix = [...prefix];
    this.timeoutMs = optionalNumber(options.operationTimeoutMs, 'operationTimeoutMs', 5000);
    this.clock = options.now;
  }

  private key(kind: 'job' | 'pending', jobId: string): KvKey {
    return [...this.prefix, kind, jobId];
  }

  private sinceKey(since: number, jobId: string): KvKey {
    return [...this.prefix, 'pending-since', since, jobId];
  }

  /**
   * Runs `attempt` until its commit goes through (another operation changed a key it
   * read: it reads again), as a store operation with a deadline.
   */
  private atomically<T>(operation: string, attempt: () => Promise<{ done: boolean; value: T }>): Promise<T> {
    return guarded('Deno KV', operation, this.timeoutMs, async () => {
      for (let n = 0; n < ATTEMPTS; n++) {
        const { done, value } = await attempt();
        if (done) return value;
      }
      throw new StoreUnavailableError(
        `Deno KV: ${operation} found its keys changed by other operations ${ATTEMPTS} times in a row; retry later.`,
      );
    });
  }

  protected apply<R extends JobRequest>(
    jobId: string,
    request: R,
    now: number | undefined,
  ): Promise<JobReply<R>> {
    const jobKey = this.key('job', jobId);
    const pendingKey = this.key('pending', jobId);
    return this.atomically(request.op, async () => {
      const [job, pending] = await this.kv.getMany([jobKey, pendingKey]);
      const at = now ?? Date.now();
      const before = (job!.value ?? undefined) as JobRecord | undefined;
      const { record, reply } = transition(before, request, at, () => nextFence(this.kv, at));
      if (record === before) return { done: true, value: reply };
      const op = this.kv.atomic().check(job!);
      if (record === undefined) op.delete(jobKey);
      else op.set(jobKey, record, { expireIn: Math.max(1, recordExpiry(record) - at) });
      if (record?.state === 'completed' && pending!.versionstamp !== null) {
        op.check(pending!).delete(pendingKey);
        op.delete(this.sinceKey((pending!.value as PendingValue).since, jobId));
      }
      return { done: (await op.commit()).ok, value: reply };
    });
  }

  /** Resolves when the database answers (readiness probes). */
  async ping(): Promise<void> {
    await guarded('Deno KV', 'ping', this.timeoutMs, () => this.kv.getMany([[...this.prefix, 'ping']]));
  }

  /** Changes a job's pending record (`next`: its new value, undefined to remove it) atomically. */
  private changePending(
    jobId: string,
    operation: string,
    next: (old: PendingValue | undefined) => PendingValue | undefined,
  ): Promise<void> {
    const pendingKey = this.key('pending', jobId);
    return this.atomically(operation, async () => {
      const [entry] = await this.kv.getMany([pendingKey]);
      const old = (entry!.value ?? undefined) as PendingValue | undefined;
      const value = next(old);
      if (old === undefined && value === undefined) return { done: true, value: undefined };
      const op = this.kv.atomic().check(entry!);
      if (old !== undefined) op.delete(this.sinceKey(old.since, jobId));
      if (value === undefined) op.delete(pendingKey);
      else op.set(pendingKey, value).set(this.sinceKey(value.since, jobId), true);
      return { done: (await op.commit()).ok, value: undefined };
    });
  }

  async trackPending(jobId: string, options: TrackPendingOptions = {}): Promise<void> {
    const { since, userParameters } = trackArgs(jobId, options);
    const value = { since, ...(userParameters === undefined ? {} : { userParameters }) };
    await this.changePending(jobId, 'trackPending', () => value);
  }

  /** Pending jobs recorded at or before `before`, oldest first. */
  async listPending(options: ListPendingOptions): Promise<PendingJob[]> {
    const { before, limit } = listArgs(options);
    return guarded('Deno KV', 'listPending', this.timeoutMs, async () => {
      const index = this.kv.list(
        { prefix: [...this.prefix, 'pending-since'], end: [...this.prefix, 'pending-since', before + 1] },
        { limit },
      );
      const ids: string[] = [];
      for await (const entry of index) ids.push(String(entry.key[entry.key.length - 1]));
      const entries: KvEntry[] = [];
      // getMany reads at most 10 keys at a time.
      for (let k = 0; k < ids.length; k += 10)
        entries.push(...(await this.kv.getMany(ids.slice(k, k + 10).map((id) => this.key('pending', id)))));
      return entries.flatMap((e, k) => {
        const p = e.value as PendingValue | null;
        return p === null ? [] : [{ jobId: ids[k]!, ...p }];
      });
    });
  }

  async forgetPending(jobId: string): Promise<void> {
    checkJobId(jobId);
    await this.changePending(jobId, 'forgetPending', () => undefined);
  }

  async deferPending(jobId: string, options: DeferPendingOptions): Promise<void> {
    const { since } = deferArgs(jobId, options);
    await this.changePending(jobId, 'deferPending', (old) =>
      old === undefined ? undefined : { ...old, since },
    );
  }
}

/** The names of {@link DenoKvStoreOptions}. */
export const DENO_KV_STORE_OPTIONS = {
  kv: true,
  prefix: true,
  operationTimeoutMs: true,
  now: true,
} as const satisfies OptionNamesOf<DenoKvStoreOptions>;
