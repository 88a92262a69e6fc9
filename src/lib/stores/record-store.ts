/**
 * What stores that keep each job's record as a value (a Durable Object's rows, Deno KV
 * entries) share: the arguments checked as every store checks them, the request handed to
 * the protocol's own transition function (src/lib/jobs/model.ts), and its reply turned
 * into the contract's. Such a store only says how one job's record is read and written
 * atomically (`apply`); it runs the model itself, like the memory store, so there is no
 * second implementation of the protocol to hold to it.
 */
import {
  GRACE_WINDOW_MS,
  type ClaimReply,
  type CompleteReply,
  type JobRecord,
  type JobReply,
  type JobRequest,
  type RenewReply,
} from '../jobs/model.js';
import {
  claimArgs,
  completeArgs,
  LAPSED_CLAIM_KEEP_MS,
  releaseArgs,
  renewArgs,
  type ClaimOptions,
  type ClaimResult,
  type CompleteOptions,
  type ReleaseOptions,
  type RenewOptions,
} from '../jobs/store.js';

export abstract class RecordStore {
  /** The store's clock when it was given one (tests), else undefined: the backend's own. */
  protected abstract readonly clock: (() => number) | undefined;

  /**
   * Applies `request` to the job's record atomically (read, `transition`, write) at `now`
   * (undefined: the backend's clock) and gives the model's reply.
   */
  protected abstract apply<R extends JobRequest>(
    jobId: string,
    request: R,
    now: number | undefined,
  ): Promise<JobReply<R>>;

  // The clock is read before anything is awaited: a test's clock is the time the call was made.
  private run<R extends JobRequest>(jobId: string, request: R): Promise<JobReply<R>> {
    return this.apply(jobId, request, this.clock?.());
  }

  async claim(jobId: string, options: ClaimOptions): Promise<ClaimResult> {
    const { leaseMs, token, graceMs } = claimArgs(jobId, options);
    return claimResult(await this.run(jobId, { op: 'claim', token, leaseMs, graceMs }));
  }

  async renew(jobId: string, token: string, options: RenewOptions): Promise<RenewReply> {
    const { leaseMs, fence } = renewArgs(jobId, token, options);
    return this.run(jobId, { op: 'renew', token, leaseMs, ...(fence === undefined ? {} : { fence }) });
  }

  async complete(jobId: string, token: string, options: CompleteOptions): Promise<CompleteReply> {
    const { retainMs, fence } = completeArgs(jobId, token, options);
    return this.run(jobId, { op: 'complete', token, retainMs, ...(fence === undefined ? {} : { fence }) });
  }

  async release(jobId: string, token: string, options?: ReleaseOptions): Promise<boolean> {
    const { tainted } = releaseArgs(jobId, token, options);
    const reply = await this.run(jobId, { op: 'release', token, keepMs: LAPSED_CLAIM_KEEP_MS, tainted });
    return reply === 'released';
  }
}

/** The model's claim reply as the contract gives it (flags only when true). */
export function claimResult(reply: ClaimReply): ClaimResult {
  if (reply.status === 'acquired')
    return {
      status: 'acquired',
      token: reply.token,
      fence: reply.fence,
      ...(reply.tookOver ? { tookOver: true } : {}),
    };
  if (reply.status === 'completed') return { status: 'completed' };
  return { status: 'in_progress', retryAfterMs: reply.retryAfterMs, ...(reply.stale ? { stale: true } : {}) };
}

/**
 * When a record may be dropped (epoch ms on the store's clock): a completion or release at
 * its `until`; a claim LAPSED_CLAIM_KEEP_MS past its lease end (past the stale mark's
 * grace window too), so a claim coming that much later still finds it lapsed and reports
 * the takeover, as the Redis store keeps it.
 */
export function recordExpiry(record: JobRecord): number {
  if (record.state !== 'held') return record.until;
  const end = Math.max(record.leaseEnd, (record.staleAt ?? 0) + GRACE_WINDOW_MS);
  return end + LAPSED_CLAIM_KEEP_MS;
}
