import { checkOptionNames, optionalNumber, type OptionNamesOf } from '../base/options.js';
import type { JobReply, JobRequest } from '../jobs/model.js';
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
import type { ObjectRequest } from './durable-object.js';
import { storeFailure } from './diagnose.js';
import { guarded } from './timeout.js';
import { RecordStore } from './record-store.js';

/** The parts of Cloudflare's `DurableObjectNamespace` binding the store uses. */
export interface DurableObjectNamespaceLike {
  idFromName(name: string): unknown;
  get(id: never): { fetch(input: string, init?: RequestInit): Promise<Response> };
}

export interface DurableObjectStoreOptions {
  /** The Durable Object namespace binding of `JobhookIdempotencyObject` (`env.JOBHOOK`). */
  namespace: DurableObjectNamespaceLike;
  /** The objects' name (default `jobhook`): stores with different names share nothing. */
  name?: string;
  /**
   * How many objects the jobs are spread over, by a hash of the job id (default 1). One
   * object answers one request at a time: a shard carries a few hundred deliveries a
   * second (BENCHMARKS.md). Fixed for the store's life: another count sends a job to
   * another object, which knows nothing of its claims and completions. With more than
   * one shard, fencing numbers grow per job (what fencing needs), not across jobs.
   */
  shards?: number;
  /** Deadline of one store operation before it fails with STORE_UNAVAILABLE (default 5,000 ms). */
  operationTimeoutMs?: number;
  /**
   * A clock in epoch ms to use instead of the object's own (tests of the protocol's
   * timing). Leave it out in production: a shard's object is then the one clock of its jobs.
   */
  now?: () => number;
}

/**
 * Idempotency store for Cloudflare Workers, on Durable Objects: every isolate and every
 * location of your Worker shares it. Each job's claims, renewals, completions and releases
 * are single requests to the object that keeps the job (`JobhookIdempotencyObject`, which
 * your Worker exports), atomic there and on disk before they are answered; a completion
 * is kept for its retention, through restarts and deployments.
 *
 * @example
 * ```js
 * import { createReceiver } from 'jobhook/web';
 * import { DurableObjectIdempotencyStore } from 'jobhook/cloudflare';
 * export { JobhookIdempotencyObject } from 'jobhook/cloudflare';
 *
 * let receive;
 * export default {
 *   fetch(request, env) {
 *     receive ??= createReceiver({
 *       publicKey: env.GATEWAY_PUBLIC_KEY,
 *       store: new DurableObjectIdempotencyStore({ namespace: env.JOBHOOK }),
 *       onEvent: async (event) => { await save(event); },
 *     });
 *     return receive(request);
 *   },
 * };
 * ```
 */
export class DurableObjectIdempotencyStore extends RecordStore implements PendingStore {
  private readonly namespace: DurableObjectNamespaceLike;
  private readonly ids: unknown[];
  private readonly timeoutMs: number;
  protected readonly clock: (() => number) | undefined;
  private readonly backend: string;

  constructor(options: DurableObjectStoreOptions) {
    super();
    checkOptionNames(options, DURABLE_OBJECT_STORE_OPTIONS);
    const ns = options?.namespace;
    if (typeof ns?.idFromName !== 'function' || typeof ns.get !== 'function')
      throw new TypeError(
        'namespace must be the Durable Object namespace binding of JobhookIdempotencyObject (env.JOBHOOK, declared under [[durable_objects.bindings]] in wrangler.toml)',
      );
    const name = options.name ?? 'jobhook';
    if (typeof name !== 'string' || name === '') throw new TypeError('name must be a non-empty string');
    const shards = optionalNumber(options.shards, 'shards', 1, { integer: true });
    if (options.now !== undefined && typeof options.now !== 'function')
      throw new TypeError('now must be a function returning epoch milliseconds');
    this.namespace = ns;
    this.ids = Array.from({ length: shards }, (_, k) => ns.idFromName(`${name}:${k}`));
    this.timeoutMs = optionalNumber(options.operationTimeoutMs, 'operationTimeoutMs', 5000);
    this.clock = options.now;
    this.backend = `Durable Object ${JSON.stringify(name)}`;
  }

  /** The shard of a job: FNV-1a of its UTF-16 units, modulo the shards. */
  private shardOf(jobId: string): number {
    if (this.ids.length === 1) return 0;
    let h = 0x811c9dc5;
    for (let i = 0; i < jobId.length; i++) h = Math.imul(h ^ jobId.charCodeAt(i), 0x01000193);
    return (h >>> 0) % this.ids.length;
  }

  /** One request to a shard's object (a stub per request: Workers tie stubs to the request that made them). */
  private send<T>(shard: number, body: ObjectRequest, operation: string): Promise<T> {
    return guarded(this.backend, operation, this.timeoutMs, async () => {
      let answer: { ok?: T; error?: string };
      let status: number;
      try {
        const stub = this.namespace.get(this.ids[shard] as never);
        const res = await stub.fetch('https://jobhook.durable-object/', {
          method: 'POST',
          body: JSON.stringify(body),
        });
        status = res.status;
        answer = (await res.json()) as { ok?: T; error?: string };
      } catch (err) {
        // Not a TypeError of ours: the object or the network failed (fetch throws TypeErrors too).
        throw storeFailure(this.backend, operation, err);
      }
      if (status !== 200 || !('ok' in answer))
        throw new Error(`the object answered ${status}: ${String(answer.error).slice(0, 300)}`);
      return answer.ok as T;
    });
  }

  protected apply<R extends JobRequest>(
    jobId: string,
    request: R,
    now: number | undefined,
  ): Promise<JobReply<R>> {
    const body: ObjectRequest = { op: 'apply', jobId, request, ...(now === undefined ? {} : { now }) };
    return this.send(this.shardOf(jobId), body, request.op);
  }

  /** Resolves when the first shard's object answers (readiness probes). */
  async ping(): Promise<void> {
    await this.send(0, { op: 'ping' }, 'ping');
  }

  async trackPending(jobId: string, options: TrackPendingOptions = {}): Promise<void> {
    const { since, userParameters } = trackArgs(jobId, options);
    const body: ObjectRequest = {
      op: 'track',
      jobId,
      since,
      ...(userParameters === undefined ? {} : { userParameters }),
    };
    await this.send(this.shardOf(jobId), body, 'trackPending');
  }

  /** Pending jobs of every shard, oldest first. */
  async listPending(options: ListPendingOptions): Promise<PendingJob[]> {
    const { before, limit } = listArgs(options);
    const lists = await Promise.all(
      this.ids.map((_, k) => this.send<PendingJob[]>(k, { op: 'list', before, limit }, 'listPending')),
    );
    const all = lists.flat();
    all.sort((a, b) => a.since - b.since || (a.jobId < b.jobId ? -1 : a.jobId > b.jobId ? 1 : 0));
    return all.slice(0, limit);
  }

  async forgetPending(jobId: string): Promise<void> {
    checkJobId(jobId);
    await this.send(this.shardOf(jobId), { op: 'forget', jobId }, 'forgetPending');
  }

  async deferPending(jobId: string, options: DeferPendingOptions): Promise<void> {
    const { since } = deferArgs(jobId, options);
    await this.send(this.shardOf(jobId), { op: 'defer', jobId, since }, 'deferPending');
  }
}

/** The names of {@link DurableObjectStoreOptions}. */
export const DURABLE_OBJECT_STORE_OPTIONS = {
  namespace: true,
  name: true,
  shards: true,
  operationTimeoutMs: true,
  now: true,
} as const satisfies OptionNamesOf<DurableObjectStoreOptions>;
