/**
 * What a captured genuine signature can cost a receiver. Anyone who read one
 * `X-Service-Signature` can send it with any body: the signature opens, so the body's
 * canonical work would be done. The guard bounds that, per receiver:
 * - admission: the body bytes being read and verified at once are bounded
 *   (`maxInFlightBytes`), counted as they arrive (a declared Content-Length holds
 *   nothing: bodies that trickle in cannot crowd out the others); past it
 *   RECEIVER_BUSY (503, `Retry-After`). A share is kept for small bodies (genuine
 *   deliveries are small), so large ones cannot take it all;
 * - a share per signature: the requests carrying one signature hold at most
 *   SIGNATURE_REQUESTS places and, together, one body of maxBodyBytes (a request alone
 *   always fits its signature's share). The gateway sends a delivery a few times at most
 *   (its retries racing a slow attempt); a captured signature replayed over a thousand
 *   connections gets the same share, so the bodies in flight under other signatures
 *   (the genuine deliveries) keep the rest. Past it RECEIVER_BUSY with `signature` set:
 *   the log says what is happening, not "raise the limit";
 * - one verification in flight per signature and body: concurrent requests carrying the
 *   same signature and the same bytes (the gateway's retry racing a slow first attempt)
 *   wait for it and share its result. A request with other bytes is verified on its own,
 *   at once: it never gets another request's result, and the genuine delivery never
 *   waits behind replays of its signature;
 * - known digests: a digest this receiver verified and whose job completed is answered
 *   without canonical work, until the replay window closes on its event (bounded, least
 *   recently used first out): `duplicate` for the bytes that verified (the gateway's
 *   retries), SIGNATURE_INVALID for any other body (it is not what was verified; the job
 *   is done, so refusing it loses nothing). The raw bytes are hashed, not canonicalized.
 */
import { equalBytes } from '../base/bytes.js';
import { ReceiverBusyError } from '../base/errors.js';
import { optionalNumber, type OptionNamesOf } from '../base/options.js';
import type { OpenedSignature } from '../core/verify/core.js';

/** Options of every receiver for bounding what bodies in flight hold. */
export interface AdmissionOptions {
  /**
   * The body bytes a receiver reads and verifies at once, over all its requests
   * (default 64 MiB, at least `maxBodyBytes`). A request that would pass it is answered
   * 503 RECEIVER_BUSY with `Retry-After` before its body is read (the gateway retries).
   */
  maxInFlightBytes?: number;
}

export const DEFAULT_MAX_IN_FLIGHT_BYTES = 64 * 1024 * 1024;
/** Bodies up to this size may use the share kept for small bodies. */
const SMALL_BODY_BYTES = 64 * 1024;
/** `Retry-After` of a busy answer (s): the bodies in flight are read and verified within seconds. */
export const BUSY_RETRY_AFTER_SECONDS = 2;
/** Completed digests remembered. */
const KNOWN_DIGESTS = 10_000;
/** Requests one signature may have in flight: a delivery and its retries racing a slow attempt. */
export const SIGNATURE_REQUESTS = 8;
/** How long a refusal for lack of room marks the guard busy (`health().admission.busy`), ms. */
const BUSY_MARK_MS = 10_000;

/** What one signature's requests hold now. */
interface Holder {
  requests: number;
  bytes: number;
}

/** What the bodies in flight hold, for `health()` and the log. */
export interface AdmissionState {
  /** Body bytes held now (raw and decoded), and maxInFlightBytes. */
  bytes: number;
  maxBytes: number;
  /** Requests holding a place now, and under how many signatures. */
  requests: number;
  signatures: number;
  /** The most requests and bytes one signature holds now. */
  largestSignature: { requests: number; bytes: number };
  /** Deliveries refused RECEIVER_BUSY since the receiver started: the budget full, one signature's share full. */
  refused: { full: number; signature: number };
  /** A delivery was refused for lack of room within the last 10 s. */
  busy: boolean;
}

/** A digest whose job completed here: its job, and the SHA-256 (hex) of each raw body that verified under it. */
export interface KnownDigest {
  jobId: string;
  bodies: string[];
  until: number;
}

/** The bytes one request holds in flight; `release` is idempotent. */
export interface Ticket {
  /** The body has `bytes` so far (raw or decoded): RECEIVER_BUSY when that passes what is left. */
  cover(bytes: number): void;
  release(): void;
}

/** `maxInFlightBytes` checked (TypeError for mistakes) and defaulted, once. */
export function resolveAdmission(options: AdmissionOptions, maxBodyBytes: number): number {
  const max = optionalNumber(
    options.maxInFlightBytes,
    'maxInFlightBytes',
    Math.max(DEFAULT_MAX_IN_FLIGHT_BYTES, maxBodyBytes),
  );
  if (max < maxBodyBytes)
    throw new TypeError(
      `maxInFlightBytes (${max}) must be at least maxBodyBytes (${maxBodyBytes}): a body of maxBodyBytes would never be admitted`,
    );
  return max;
}

const busy = (what: string) => new ReceiverBusyError(`${what}; retry later.`);

/** A refusal because one signature's requests hold their whole share: a captured signature replayed, not a full receiver. */
export class SignatureShareError extends ReceiverBusyError {
  constructor(
    readonly requests: number,
    readonly bytes: number,
  ) {
    super(
      `${requests} requests carrying this signature hold ${bytes} body bytes (at most ${SIGNATURE_REQUESTS} requests and one body per signature); retry later.`,
    );
  }
}

const HEX = Array.from({ length: 256 }, (_, b) => (b < 16 ? '0' : '') + b.toString(16));

/** The key of a signature: what its keys recovered (the signed digest's hash), per key; made once per signature. */
export function digestKey(signature: OpenedSignature): string {
  if (signature.key !== undefined) return signature.key;
  let key = '';
  for (const { keyIndex, hash } of signature.opened) {
    key += `${keyIndex}:`;
    for (const b of hash) key += HEX[b];
    key += ';';
  }
  signature.key = key;
  return key;
}

/** A verification in flight, and the bytes it verifies. */
class Flight {
  /** The body's size when the flight began: a body moved to a worker since reads as empty. */
  private readonly size: number;
  constructor(
    private readonly body: string | Uint8Array,
    readonly result: Promise<unknown>,
  ) {
    this.size = typeof body === 'string' ? body.length : body.byteLength;
    // A failure is its waiters' to hear; nobody may be waiting.
    result.catch(() => undefined);
  }

  /** Whether `other` is the same bytes as this flight's body (compared, not hashed: a replay costs what it sends). */
  holds(other: string | Uint8Array): boolean {
    const mine = this.body;
    if (typeof mine === 'string' || typeof other === 'string') return mine === other;
    // A body moved to a worker is detached (byteLength 0): nothing to compare against.
    return mine.byteLength === this.size && equalBytes(mine, other);
  }
}

export class DeliveryGuard {
  /** Bytes held by requests now. */
  inFlight = 0;
  readonly max: number;
  /** What large bodies may hold at most: the rest is kept for small ones. */
  private readonly largeMax: number;
  /** What one signature's requests may hold together. */
  private readonly signatureMax: number;
  private readonly flights = new Map<string, Flight[]>();
  private readonly known = new Map<string, KnownDigest>();
  /** Per signature: its requests and bytes in flight (removed when its last request releases). */
  private readonly holders = new Map<string, Holder>();
  private requests = 0;
  private readonly refusals = { full: 0, signature: 0 };
  private lastRefusal = -Infinity;

  /** `max`: maxInFlightBytes, resolved (resolveAdmission). */
  constructor(max: number, maxBodyBytes: number) {
    this.max = max;
    this.largeMax = Math.max(maxBodyBytes, this.max - Math.min(this.max / 8, 8 * 1024 * 1024));
    this.signatureMax = maxBodyBytes + SMALL_BODY_BYTES;
  }

  /** Whether `total` bytes can be held by one request that holds `held` of them now. */
  private fits(held: number, total: number): boolean {
    // Always room for one body: nothing else in flight.
    if (this.inFlight === held) return true;
    return this.inFlight - held + total <= (total <= SMALL_BODY_BYTES ? this.max : this.largeMax);
  }

  /** RECEIVER_BUSY, counted: the budget is full, or (`holder`) one signature's share is. */
  private refuse(holder: Holder | undefined, what: () => string): never {
    this.lastRefusal = performance.now();
    if (holder !== undefined) {
      this.refusals.signature++;
      throw new SignatureShareError(holder.requests, holder.bytes);
    }
    this.refusals.full++;
    throw busy(what());
  }

  /** Whether one more request of `holder`'s signature, or `total` bytes for one that holds `held`, passes its share. */
  private pastShare(holder: Holder | undefined, held: number, total: number, joining: boolean): boolean {
    if (holder === undefined) return false;
    if (joining) return holder.requests >= SIGNATURE_REQUESTS || holder.bytes + total > this.signatureMax;
    // A request alone always fits its signature's share.
    return holder.bytes !== held && holder.bytes - held + total > this.signatureMax;
  }

  /**
   * Admits a request holding `inHand` body bytes already (0 for a body still to be read:
   * its ticket covers the bytes as they arrive), under the signature `key` (its share of
   * the budget). RECEIVER_BUSY (503) when they do not fit.
   */
  admit(inHand: number | undefined, key?: string): Ticket {
    const first = inHand !== undefined && Number.isFinite(inHand) && inHand > 0 ? inHand : 0;
    let holder = key === undefined ? undefined : this.holders.get(key);
    if (this.pastShare(holder, 0, first, true)) this.refuse(holder, () => '');
    if (!this.fits(0, first))
      this.refuse(
        undefined,
        () => `${this.inFlight} body bytes are being received and verified (maxInFlightBytes ${this.max})`,
      );
    if (key !== undefined && holder === undefined)
      this.holders.set(key, (holder = { requests: 0, bytes: 0 }));
    let held = first;
    let released = false;
    this.inFlight += held;
    this.requests++;
    if (holder !== undefined) {
      holder.requests++;
      holder.bytes += held;
    }
    return {
      cover: (bytes) => {
        if (released || bytes <= held) return;
        if (this.pastShare(holder, held, bytes, false)) this.refuse(holder, () => '');
        if (!this.fits(held, bytes))
          this.refuse(
            undefined,
            () => `the receiver holds ${this.inFlight} body bytes (maxInFlightBytes ${this.max})`,
          );
        this.inFlight += bytes - held;
        if (holder !== undefined) holder.bytes += bytes - held;
        held = bytes;
      },
      release: () => {
        if (released) return;
        released = true;
        this.inFlight -= held;
        this.requests--;
        if (holder === undefined) return;
        holder.bytes -= held;
        if (--holder.requests === 0) this.holders.delete(key!);
      },
    };
  }

  /** What the bodies in flight hold now (walks the signatures in flight: for health() and the log, not per request). */
  state(): AdmissionState {
    const largest = { requests: 0, bytes: 0 };
    for (const h of this.holders.values())
      if (h.requests > largest.requests || (h.requests === largest.requests && h.bytes > largest.bytes)) {
        largest.requests = h.requests;
        largest.bytes = h.bytes;
      }
    return {
      bytes: this.inFlight,
      maxBytes: this.max,
      requests: this.requests,
      signatures: this.holders.size,
      largestSignature: largest,
      refused: { ...this.refusals },
      busy: performance.now() - this.lastRefusal < BUSY_MARK_MS,
    };
  }

  /**
   * Runs `verify` for a signature and body unless a verification of the same signature
   * with the same bytes is in flight: then waits for it and shares its result (`own`
   * false). Only identical bytes share: whatever verified for one request says nothing
   * of another body, so a request with other bytes is verified on its own, without
   * waiting for the others.
   */
  async once<T>(
    key: string,
    body: string | Uint8Array,
    verify: () => T | Promise<T>,
  ): Promise<{ result: T; own: boolean }> {
    const same = this.flights.get(key)?.find((f) => f.holds(body));
    if (same !== undefined) return { result: (await same.result) as T, own: false };
    const verified = verify();
    // Done on this thread at once: nothing can have come to share it.
    if (!(verified instanceof Promise)) return { result: verified, own: true };
    const result = verified;
    const flight = new Flight(body, result);
    const list = this.flights.get(key);
    if (list === undefined) this.flights.set(key, [flight]);
    else list.push(flight);
    try {
      return { result: await result, own: true };
    } finally {
      const now = this.flights.get(key);
      const at = now?.indexOf(flight) ?? -1;
      if (at >= 0) now!.splice(at, 1);
      if (now?.length === 0) this.flights.delete(key);
    }
  }

  /** A digest this receiver verified and completed, while its replay window is open. */
  completed(key: string, now: number): KnownDigest | undefined {
    const entry = this.known.get(key);
    if (entry === undefined) return undefined;
    this.known.delete(key);
    if (entry.until <= now) return undefined;
    this.known.set(key, entry);
    return entry;
  }

  /** Remembers that the job of a digest completed with the raw body hashed `body`, until `until` (epoch ms). */
  remember(key: string, jobId: string, body: string, until: number): void {
    const entry = this.known.get(key);
    this.known.delete(key);
    const bodies =
      entry === undefined
        ? [body]
        : entry.bodies.includes(body)
          ? entry.bodies
          : [...entry.bodies, body].slice(-4);
    this.known.set(key, { jobId, bodies, until: Math.max(until, entry?.until ?? 0) });
    if (this.known.size > KNOWN_DIGESTS) this.known.delete(this.known.keys().next().value!);
  }
}

/** The names of {@link AdmissionOptions}. */
export const ADMISSION_OPTIONS = {
  maxInFlightBytes: true,
} as const satisfies OptionNamesOf<AdmissionOptions>;
