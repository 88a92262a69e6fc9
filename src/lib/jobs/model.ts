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
 *   the store. The first claim by another token that finds it lapsed (within
 *   GRACE_WINDOW_MS of the lease end) marks it *stale* (`staleAt`) and waits `graceMs`
 *   from then; after that a claim *takes it over*. Until then the holder may still
 *   renew or complete it. `tookOver`: this claim took the job from a holder that may
 *   have applied its effect (a lapsed holder, or a tainted release), so a claim by the
 *   same token again (its first reply was lost) says so too.
 * - `released` by a token (the handler failed, or the claim's reply was lost and it was
 *   undone), kept until `until` so that a renewal or completion of that token arriving
 *   late is answered `superseded` and never holds the job again, and so that the next
 *   claim still learns whether the job may have run already (`tainted`: the released
 *   claim had taken the job over).
 * - `completed`, by a token, until the retention ends (then it is free again);
 *   `superseded`: that token's claim had been taken over (the job may have run twice),
 *   so the same completion retried is answered `superseded` again.
 *
 * Fencing: every acquisition of a job by a new token takes a new number from a counter
 * that only grows (one per store), and never less than one more than the record's, so a
 * takeover always carries a larger number than the claim it superseded; a holder
 * claiming again with its own token keeps its number. A renewal or completion by a
 * token that no longer holds the job is refused as `superseded`: that holder may have
 * applied its effect while another ran the job too.
 */

/**
 * How long after its lease end a lapsed claim still gets a takeover grace: the first
 * claim to find it lapsed later than this takes it over at once (reporting it), as if
 * the holder had had its grace. Stores keep lapsed claims much longer
 * (LAPSED_CLAIM_KEEP_MS), so the takeover is still known and reported.
 */
export const GRACE_WINDOW_MS = 60_000;

/** A job held by `token` until `leaseEnd` (epoch ms on the store's clock). */
export interface HeldRecord {
  readonly state: 'held';
  readonly token: string;
  /** The claim's fencing number: larger for every later holder of the job. */
  readonly fence: number;
  readonly leaseEnd: number;
  /** When a claim by another token first found the lease over (the takeover grace starts). */
  readonly staleAt?: number;
  /** This claim took the job from a holder that may have applied its effect: the job may run twice. */
  readonly tookOver: boolean;
}

/** A job released by `token` (its claim's `fence`), remembered until `until`. */
export interface ReleasedRecord {
  readonly state: 'released';
  readonly token: string;
  readonly fence: number;
  readonly until: number;
  /** The released claim had taken the job over, or was released tainted: the next holder may run it twice. */
  readonly tainted: boolean;
}

/** A job completed by `token` (unknown for marks written before fencing), remembered until `until`. */
export interface CompletedRecord {
  readonly state: 'completed';
  readonly token?: string;
  readonly fence?: number;
  readonly until: number;
  /** `token`'s claim had been superseded (taken over, or released) when it completed: it may have run twice. */
  readonly superseded?: boolean;
}

export type JobRecord = HeldRecord | ReleasedRecord | CompletedRecord;

export type JobRequest =
  /** Take the job (or take it again with the token that holds it) for `leaseMs`. */
  | { readonly op: 'claim'; readonly token: string; readonly leaseMs: number; readonly graceMs: number }
  /** Extend the holder's lease. `fence`: the number to keep should the record be gone. */
  | { readonly op: 'renew'; readonly token: string; readonly leaseMs: number; readonly fence?: number }
  /** Mark the job done by this holder, remembered for `retainMs`. */
  | { readonly op: 'complete'; readonly token: string; readonly retainMs: number; readonly fence?: number }
  /**
   * Give the claim up (the handler failed, or the claim's outcome was unknown); the release
   * is remembered for `keepMs`. `tainted`: the holder may have applied an effect that the
   * next holder repeats (a transaction rolled back after its handler finished), so the
   * next claim is a takeover.
   */
  | { readonly op: 'release'; readonly token: string; readonly keepMs: number; readonly tainted?: boolean };

export type ClaimReply =
  /** `tookOver`: the job was taken from a holder whose lease lapsed, or released by one that had taken it over (it may have applied its effect). */
  | {
      readonly status: 'acquired';
      readonly token: string;
      readonly fence: number;
      readonly tookOver: boolean;
    }
  /** Another token holds it: `retryAfterMs` until its lease or (when `stale`) the takeover grace ends. */
  | { readonly status: 'in_progress'; readonly retryAfterMs: number; readonly stale: boolean }
  | { readonly status: 'completed' };

/** `completed`: done by this token (a renewal after its own completion). */
export type RenewReply = 'renewed' | 'superseded' | 'completed';

/**
 * `superseded`: another token took the job over, or this token's claim was released; it
 * may have run twice. A superseded completion still records the job as done when nobody
 * holds it (the holder that superseded it has lapsed itself, or released it), so the job
 * does not run a third time; retried, it is answered `superseded` again.
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

/** The record as it stands at `now`: a completed or released mark past its time is gone. */
export function current(record: JobRecord | undefined, now: number): JobRecord | undefined {
  return record !== undefined && record.state !== 'held' && record.until <= now ? undefined : record;
}

/** Whether a held record's lease has run out at `now`. */
export function lapsed(record: HeldRecord, now: number): boolean {
  return record.leaseEnd <= now;
}

/** The protocol's one transition: `request` applied to a job's `record` at `now`. */
export function transition<R extends JobRequest>(
  stored: JobRecord | undefined,
  request: R,
  now: number,
  fences: FenceCounter,
): Transition<R> {
  const record = current(stored, now);
  switch (request.op) {
    case 'claim':
      return claim(record, request as Extract<JobRequest, { op: 'claim' }>, now, fences) as Transition<R>;
    case 'renew':
      return renew(record, request as Extract<JobRequest, { op: 'renew' }>, now, fences) as Transition<R>;
    case 'complete':
      return complete(record, request as Extract<JobRequest, { op: 'complete' }>, now) as Transition<R>;
    case 'release':
      return release(record, request as Extract<JobRequest, { op: 'release' }>, now) as Transition<R>;
  }
}

function held(token: string, fence: number, leaseEnd: number, tookOver: boolean): HeldRecord {
  return { state: 'held', token, fence, leaseEnd, tookOver };
}

/** A new holder's fencing number: the counter's next, and more than the record's (a counter that was reset cannot go back). */
function nextFence(record: JobRecord | undefined, fences: FenceCounter): number {
  const next = fences();
  const old = record?.fence;
  return old === undefined || next > old ? next : old + 1;
}

function acquired(
  token: string,
  fence: number,
  leaseEnd: number,
  tookOver: boolean,
): Transition<Extract<JobRequest, { op: 'claim' }>> {
  return {
    record: held(token, fence, leaseEnd, tookOver),
    reply: { status: 'acquired', token, fence, tookOver },
  };
}

function claim(
  record: JobRecord | undefined,
  r: Extract<JobRequest, { op: 'claim' }>,
  now: number,
  fences: FenceCounter,
): Transition<typeof r> {
  if (record?.state === 'completed') return { record, reply: { status: 'completed' } };
  // Released: free, but a claim that had taken the job over left it tainted.
  if (record?.state === 'released')
    return acquired(r.token, nextFence(record, fences), now + r.leaseMs, record.tainted);
  if (record?.state === 'held') {
    // Its own holder claiming again (a claim whose reply was lost): a fresh lease, same number, same taint.
    if (record.token === r.token) return acquired(r.token, record.fence, now + r.leaseMs, record.tookOver);
    if (!lapsed(record, now))
      return { record, reply: { status: 'in_progress', retryAfterMs: record.leaseEnd - now, stale: false } };
    // The first claim to find the lease over starts the grace (unless the lease ended
    // longer than the grace window ago); later ones do not restart it.
    if (r.graceMs > 0 && (record.staleAt !== undefined || now < record.leaseEnd + GRACE_WINDOW_MS)) {
      const marked: HeldRecord = record.staleAt === undefined ? { ...record, staleAt: now } : record;
      const wait = marked.staleAt! + r.graceMs - now;
      if (wait > 0)
        return { record: marked, reply: { status: 'in_progress', retryAfterMs: wait, stale: true } };
    }
    return acquired(r.token, nextFence(record, fences), now + r.leaseMs, true);
  }
  return acquired(r.token, nextFence(record, fences), now + r.leaseMs, false);
}

function renew(
  record: JobRecord | undefined,
  r: Extract<JobRequest, { op: 'renew' }>,
  now: number,
  fences: FenceCounter,
): Transition<typeof r> {
  if (record?.state === 'completed')
    return { record, reply: record.token === r.token ? 'completed' : 'superseded' };
  // Released (by this token or after it lost the job): a late renewal never holds it again.
  if (record?.state === 'released') return { record, reply: 'superseded' };
  if (record?.state === 'held') {
    if (record.token !== r.token) return { record, reply: 'superseded' };
    // Lapsed or not, nobody took it over: the lease is back (and any stale mark gone).
    return { record: held(r.token, record.fence, now + r.leaseMs, record.tookOver), reply: 'renewed' };
  }
  // Gone (kept no longer than a lapsed claim is): nobody holds it, so the holder holds it again.
  return { record: held(r.token, r.fence ?? fences(), now + r.leaseMs, false), reply: 'renewed' };
}

function complete(
  record: JobRecord | undefined,
  r: Extract<JobRequest, { op: 'complete' }>,
  now: number,
): Transition<typeof r> {
  const done = (superseded: boolean): CompletedRecord => ({
    state: 'completed',
    token: r.token,
    ...(r.fence === undefined ? {} : { fence: r.fence }),
    until: now + r.retainMs,
    ...(superseded ? { superseded: true } : {}),
  });
  if (record?.state === 'completed') {
    // Done by this token before (a retried completion: the same reply again), or by a version that kept no token.
    if (record.token === undefined) return { record, reply: 'completed' };
    return {
      record,
      reply: record.token === r.token && record.superseded !== true ? 'completed' : 'superseded',
    };
  }
  // Released: this claim was given up (or taken over and given up by the taker). Nobody
  // holds the job, and this holder did the work: record it, and say it may have run twice.
  if (record?.state === 'released') return { record: done(true), reply: 'superseded' };
  if (record?.state === 'held' && record.token !== r.token) {
    // Taken over: it may have run twice. The work is done here, though: when the new
    // holder's lease has lapsed as well, record it, so the job does not run a third time.
    return { record: lapsed(record, now) ? done(true) : record, reply: 'superseded' };
  }
  return { record: done(false), reply: 'completed' };
}

function release(
  record: JobRecord | undefined,
  r: Extract<JobRequest, { op: 'release' }>,
  now: number,
): Transition<typeof r> {
  if (record?.state === 'held' && record.token === r.token) {
    const released: ReleasedRecord = {
      state: 'released',
      token: r.token,
      fence: record.fence,
      until: now + r.keepMs,
      tainted: record.tookOver || r.tainted === true,
    };
    return { record: released, reply: 'released' };
  }
  return { record, reply: 'not_held' };
}
