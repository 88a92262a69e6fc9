/**
 * The claim protocol, once: what a store does with one job's record when a holder
 * claims, renews, completes or releases it at a given time. Pure (no I/O, no clock of
 * its own). The memory store runs it; the Redis script and the PostgreSQL statements
 * implement the same function and are held to it by a model-based test
 * (test/jobs/model-based.test.ts) on real servers.
 *
 * States of a job's record (absent = free):
 * - `held` by a token, with a fencing number and a lease end. Once the lease end has
 *   passed the claim has *lapsed*: its holder may be dead, or alive and cut off from
 *   the store. The first claim by another token that finds it lapsed marks it *stale*
 *   (`staleAt`) and waits `graceMs` from then; after that a claim *takes it over*.
 *   Until then the holder may still renew or complete it.
 * - `completed`, by a token, until the retention ends (then it is free again).
 *
 * Fencing: every acquisition of a job by a new token takes a new number from a counter
 * that only grows (one per store), so a takeover always carries a larger number than
 * the claim it superseded; a holder claiming again with its own token keeps its number.
 * A renewal or completion by a token that no longer holds the job is refused as
 * `superseded`: that holder may have applied its effect while another ran the job too.
 */

/** A job held by `token` until `leaseEnd` (epoch ms on the store's clock). */
export interface HeldRecord {
  readonly state: 'held';
  readonly token: string;
  /** The claim's fencing number: larger for every later holder of the job. */
  readonly fence: number;
  readonly leaseEnd: number;
  /** When a claim by another token first found the lease over (the takeover grace starts). */
  readonly staleAt?: number;
}

/** A job completed by `token` (unknown for marks written before fencing), remembered until `until`. */
export interface CompletedRecord {
  readonly state: 'completed';
  readonly token?: string;
  readonly fence?: number;
  readonly until: number;
}

export type JobRecord = HeldRecord | CompletedRecord;

export type JobRequest =
  /** Take the job (or take it again with the token that holds it) for `leaseMs`. */
  | { readonly op: 'claim'; readonly token: string; readonly leaseMs: number; readonly graceMs: number }
  /** Extend the holder's lease. `fence`: the number to keep should the record be gone. */
  | { readonly op: 'renew'; readonly token: string; readonly leaseMs: number; readonly fence?: number }
  /** Mark the job done by this holder, remembered for `retainMs`. */
  | { readonly op: 'complete'; readonly token: string; readonly retainMs: number; readonly fence?: number }
  /** Give the claim up (the handler failed, or the claim's outcome was unknown). */
  | { readonly op: 'release'; readonly token: string };

export type ClaimReply =
  /** `tookOver`: the job was taken from another holder whose lease lapsed (it may have applied its effect). */
  | { readonly status: 'acquired'; readonly token: string; readonly fence: number; readonly tookOver: boolean }
  /** Another token holds it: `retryAfterMs` until its lease or (when `stale`) the takeover grace ends. */
  | { readonly status: 'in_progress'; readonly retryAfterMs: number; readonly stale: boolean }
  | { readonly status: 'completed' };

/** `completed`: done by this token (a renewal after its own completion). */
export type RenewReply = 'renewed' | 'superseded' | 'completed';

/**
 * `superseded`: another token took the job over; it may have run twice. A superseded
 * completion still records the job as done when the holder that superseded it has
 * lapsed itself (it may be gone), so the job does not run a third time.
 */
export type CompleteReply = 'completed' | 'superseded';

export type ReleaseReply = 'released' | 'not_held';

export type JobReply<R extends JobRequest> = R['op'] extends 'claim'
  ? ClaimReply
  : R['op'] extends 'renew'
    ? RenewReply
    : R['op'] extends 'complete'
      ? CompleteReply
      : ReleaseReply;

/** Hands out fencing numbers: each call larger than every earlier one. */
export type FenceCounter = () => number;

export interface Transition<R extends JobRequest> {
  /** The record after the request (undefined: the job is free). */
  readonly record: JobRecord | undefined;
  readonly reply: JobReply<R>;
}

/** The record as it stands at `now`: a completed mark past its retention is gone. */
export function current(record: JobRecord | undefined, now: number): JobRecord | undefined {
  return record?.state === 'completed' && record.until <= now ? undefined : record;
}

/** Whether a held record's lease has run out at `now`. */
export function lapsed(record: HeldRecord, now: number): boolean {
  return record.leaseEnd <= now;
}

/** The protocol's one transition: `request` applied to a job's `record` at `now`. */
export function transition<R extends JobRequest>(stored: JobRecord | undefined, request: R, now: number, fences: FenceCounter): Transition<R> {
  const record = current(stored, now);
  switch (request.op) {
    case 'claim':
      return claim(record, request as Extract<JobRequest, { op: 'claim' }>, now, fences) as Transition<R>;
    case 'renew':
      return renew(record, request as Extract<JobRequest, { op: 'renew' }>, now, fences) as Transition<R>;
    case 'complete':
      return complete(record, request as Extract<JobRequest, { op: 'complete' }>, now) as Transition<R>;
    case 'release':
      return release(record, request as Extract<JobRequest, { op: 'release' }>) as Transition<R>;
  }
}

function held(token: string, fence: number, leaseEnd: number): HeldRecord {
  return { state: 'held', token, fence, leaseEnd };
}

function claim(record: JobRecord | undefined, r: Extract<JobRequest, { op: 'claim' }>, now: number, fences: FenceCounter): Transition<typeof r> {
  if (record?.state === 'completed') return { record, reply: { status: 'completed' } };
  if (record?.state === 'held') {
    // Its own holder claiming again (a claim whose reply was lost): a fresh lease, same number.
    if (record.token === r.token) return { record: held(r.token, record.fence, now + r.leaseMs), reply: { status: 'acquired', token: r.token, fence: record.fence, tookOver: false } };
    if (!lapsed(record, now)) return { record, reply: { status: 'in_progress', retryAfterMs: record.leaseEnd - now, stale: false } };
    if (r.graceMs > 0) {
      // The first claim to find the lease over starts the grace; later ones do not restart it.
      const marked: HeldRecord = record.staleAt === undefined ? { ...record, staleAt: now } : record;
      const wait = marked.staleAt! + r.graceMs - now;
      if (wait > 0) return { record: marked, reply: { status: 'in_progress', retryAfterMs: wait, stale: true } };
    }
    const fence = fences();
    return { record: held(r.token, fence, now + r.leaseMs), reply: { status: 'acquired', token: r.token, fence, tookOver: true } };
  }
  const fence = fences();
  return { record: held(r.token, fence, now + r.leaseMs), reply: { status: 'acquired', token: r.token, fence, tookOver: false } };
}

function renew(record: JobRecord | undefined, r: Extract<JobRequest, { op: 'renew' }>, now: number, fences: FenceCounter): Transition<typeof r> {
  if (record?.state === 'completed') return { record, reply: record.token === r.token ? 'completed' : 'superseded' };
  if (record?.state === 'held') {
    if (record.token !== r.token) return { record, reply: 'superseded' };
    // Lapsed or not, nobody took it over: the lease is back (and any stale mark gone).
    return { record: held(r.token, record.fence, now + r.leaseMs), reply: 'renewed' };
  }
  // Gone (kept no longer than a lapsed claim is): nobody holds it, so the holder holds it again.
  return { record: held(r.token, r.fence ?? fences(), now + r.leaseMs), reply: 'renewed' };
}

function complete(record: JobRecord | undefined, r: Extract<JobRequest, { op: 'complete' }>, now: number): Transition<typeof r> {
  const done: CompletedRecord = { state: 'completed', token: r.token, ...(r.fence === undefined ? {} : { fence: r.fence }), until: now + r.retainMs };
  if (record?.state === 'completed') {
    // Done by this token before (a retried completion), or by a version that kept no token.
    return { record, reply: record.token === undefined || record.token === r.token ? 'completed' : 'superseded' };
  }
  if (record?.state === 'held' && record.token !== r.token) {
    // Taken over: it may have run twice. The work is done here, though: when the new
    // holder's lease has lapsed as well, record it, so the job does not run a third time.
    return { record: lapsed(record, now) ? done : record, reply: 'superseded' };
  }
  return { record: done, reply: 'completed' };
}

function release(record: JobRecord | undefined, r: Extract<JobRequest, { op: 'release' }>): Transition<typeof r> {
  if (record?.state === 'held' && record.token === r.token) return { record: undefined, reply: 'released' };
  return { record, reply: 'not_held' };
}
