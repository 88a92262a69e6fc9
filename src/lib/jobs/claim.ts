/**
 * One claim held by this process while its handler runs and its completion is stored:
 * the lease renewed on a heartbeat, and self-fencing on the monotonic clock. A holder
 * that has not confirmed its lease within the lease minus a safety margin treats the
 * claim as lost at once (`holds()` false, `signal` aborted), before the store can let
 * another holder take it: after a process pause, `holds()` says so the moment the
 * process resumes, before any timer or renewal has run.
 */
import { ClaimLostError, StoreUnavailableError } from '../base/errors.js';
import type { IdempotencyStore } from './store.js';
import type { Clock } from './clock.js';
import { renewReply } from './replies.js';

/**
 * - `held`: the handler runs; the lease is renewed every third of it.
 * - `finishing`: the handler is done; the lease is kept until the completion is stored.
 * - `lost`: a renewal found the job taken over by another token (superseded).
 * - `ended`: completed, released or rolled back: nothing more is renewed.
 */
export type ClaimState = 'held' | 'finishing' | 'lost' | 'ended';

/** What a claim needs from its runner. */
export interface ClaimOwner {
  readonly store: IdempotencyStore;
  readonly leaseMs: number;
  /** How long before the lease ends (as this process counts it) the holder stops trusting it. */
  readonly selfFenceMarginMs: number;
  readonly clock: Clock;
  /** The first renewal failure in a row (the store is down). */
  renewFailed(jobId: string, error: unknown): void;
  /** A renewal found the job taken over, or the lease could not be confirmed in time. */
  lostClaim(jobId: string, why: 'superseded' | 'unconfirmed'): void;
}

/** How soon a lease renewal that failed is tried again (the store may be back). */
const RENEW_RETRY_MS = 250;

export class HeldClaim {
  state: ClaimState = 'held';
  /** Made when `signal` is first read: most handlers never read it, and most claims end unaborted. */
  private controller: AbortController | undefined;
  /** Why the claim was given up, once it was (the signal's reason). */
  private abortedWith: Error | undefined;
  /**
   * The signal fired while the handler ran: final. The handler may have stopped part way,
   * so this holder never records the job as processed (its run ends as a possible double
   * for the retry), even if a later renewal confirms the lease again.
   */
  abortedWhileRunning = false;
  /** Monotonic ms at which the request that last confirmed the lease was sent. */
  private confirmedAt: number;
  private beatTimer: ReturnType<typeof setTimeout> | undefined;
  private fenceTimer: ReturnType<typeof setTimeout> | undefined;
  private inFlight: Promise<void> | undefined;
  private failures = 0;
  private renewing = true;
  private readonly every: number;
  /** Monotonic ms at which the last renewal (or the claim) was sent. */
  private lastSentAt: number;
  /** Told after each renewal that confirmed the lease while the handler runs (a transaction kept alive). */
  onRenewed: (() => void) | undefined;

  constructor(
    private readonly owner: ClaimOwner,
    readonly jobId: string,
    readonly token: string,
    readonly fence: number,
    /** When the claim request that acquired the job was sent (monotonic ms). */
    sentAt: number,
  ) {
    this.confirmedAt = sentAt;
    this.every = Math.max(1, Math.floor(owner.leaseMs / 3));
    // Renewals are sent every third of the lease counted from when the last one was sent
    // (the claim's request first), not from its reply: with slow round trips the lease is
    // still confirmed well before the self-fence.
    this.lastSentAt = sentAt;
    if (typeof owner.store.renew === 'function') this.next(this.sinceLastSent());
    this.armFence();
  }

  /** Aborted when this process lost the claim, or could not confirm its lease in time. */
  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.abortedWith !== undefined) this.controller.abort(this.abortedWith);
    }
    return this.controller.signal;
  }

  /**
   * Whether this process still holds the claim, from the clock: the lease was confirmed
   * (claimed or renewed) less than the lease minus the safety margin ago, and no renewal
   * found the job taken over. Ask it right before an effect that must not happen twice.
   */
  holds(): boolean {
    if (this.state !== 'held' && this.state !== 'finishing') return false;
    if (this.abortedWhileRunning) return false;
    return this.owner.clock.monotonic() < this.deadline();
  }

  /** The handler is done: keep the lease until the completion is stored, quietly. */
  finishing(): void {
    if (this.state === 'held') this.state = 'finishing';
  }

  /**
   * Stops renewing, keeping the state, without waiting for a renewal in flight: a
   * transaction about to write its completion must not wait for one (it may be queued
   * for a connection the transactions hold). One that lands later finds the job completed
   * by this token, or blocks on the row until the commit: harmless either way.
   */
  stopRenewing(): void {
    this.renewing = false;
    clearTimeout(this.beatTimer);
  }

  /**
   * The claim is over (completed, released or rolled back): no more renewals, no more
   * trust; resolves once no renewal is in flight (one landing after a release would hold
   * the job again).
   */
  async end(): Promise<void> {
    this.stop();
    await this.inFlight;
  }

  /**
   * The claim is over, without waiting for a renewal in flight: before a COMMIT, whose
   * transaction holds the row lock such a renewal may be waiting for (it then finds the job
   * completed by this token).
   */
  stop(): void {
    if (this.state !== 'lost') this.state = 'ended';
    clearTimeout(this.fenceTimer);
    this.stopRenewing();
  }

  private deadline(): number {
    return this.confirmedAt + this.owner.leaseMs - this.owner.selfFenceMarginMs;
  }

  /** Aborts the signal (the handler's deadline passed, say): final for this holder. */
  abort(error: Error): void {
    if (this.abortedWith !== undefined) return;
    if (this.state === 'held') this.abortedWhileRunning = true;
    this.abortedWith = error;
    this.controller?.abort(error);
  }

  /** Aborts the signal when the lease is not confirmed again before the deadline. */
  private armFence(): void {
    clearTimeout(this.fenceTimer);
    if (this.state === 'ended' || this.state === 'lost') return;
    const wait = Math.max(0, this.deadline() - this.owner.clock.monotonic());
    this.fenceTimer = setTimeout(() => {
      if (this.state !== 'held' && this.state !== 'finishing') return;
      if (this.holds()) return this.armFence();
      if (this.state === 'held' && this.abortedWith === undefined)
        this.owner.lostClaim(this.jobId, 'unconfirmed');
      this.abort(
        new ClaimLostError(
          `The lease on job ${this.jobId} could not be confirmed in time (the store did not answer, or this process was paused).`,
        ),
      );
    }, wait);
    (this.fenceTimer as { unref?: () => void }).unref?.();
  }

  private next(ms: number): void {
    if (this.state === 'ended' || this.state === 'lost') return;
    if (!this.renewing) return;
    this.beatTimer = setTimeout(() => {
      this.inFlight = this.beat().then((again) => {
        this.inFlight = undefined;
        if (again) this.next(this.failures > 0 ? Math.min(this.every, RENEW_RETRY_MS) : this.sinceLastSent());
      });
    }, ms);
    (this.beatTimer as { unref?: () => void }).unref?.();
  }

  /** How long until the next renewal is due: a third of the lease after the last was sent. */
  private sinceLastSent(): number {
    return Math.max(0, this.lastSentAt + this.every - this.owner.clock.monotonic());
  }

  /** One renewal; resolves whether to keep renewing. */
  private async beat(): Promise<boolean> {
    const sentAt = this.owner.clock.monotonic();
    this.lastSentAt = sentAt;
    try {
      const reply = renewReply(
        await this.owner.store.renew!(this.jobId, this.token, {
          leaseMs: this.owner.leaseMs,
          fence: this.fence,
        }),
      );
      this.failures = 0;
      if (this.state === 'ended' || this.state === 'lost') return false;
      if (reply === 'renewed') {
        this.confirmedAt = Math.max(this.confirmedAt, sentAt);
        this.armFence();
        if (this.state === 'held' && this.renewing) this.onRenewed?.();
        return true;
      }
      if (reply === 'completed') return false; // its own completion landed (its reply may still be on the way)
      this.state = 'lost';
      clearTimeout(this.fenceTimer);
      this.owner.lostClaim(this.jobId, 'superseded');
      this.abort(new ClaimLostError(`The claim on job ${this.jobId} was taken over by another delivery.`));
      return false;
    } catch (err) {
      // The first failure in a row is reported; the rest repeat it while the store is down.
      if (this.failures++ === 0 && this.state === 'held')
        this.owner.renewFailed(
          this.jobId,
          err instanceof Error ? err : new StoreUnavailableError(String(err)),
        );
      return true;
    }
  }
}
