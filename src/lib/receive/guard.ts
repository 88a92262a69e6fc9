/**
 * What a captured genuine signature can cost a receiver. Anyone who read one
 * `X-Service-Signature` can send it with any body: the signature opens, so the body's
 * canonical work would be done. The guard bounds that, per receiver:
 * - admission: the body bytes being read and verified at once are bounded
 *   (`maxInFlightBytes`), decided from Content-Length before a byte is buffered, counted
 *   as chunked bodies arrive; past it RECEIVER_BUSY (503, `Retry-After`). A share is kept
 *   for small bodies (genuine deliveries are small), so large ones cannot take it all;
 * - one verification in flight per recovered digest: concurrent requests carrying the
 *   same signature wait for it and share its result; one that fails (its body was not
 *   what was signed) lets the next verify its own body, so a replay never blocks the
 *   genuine delivery;
 * - known digests: a digest this receiver verified and whose job completed is answered
 *   without canonical work, until the replay window closes on its event (bounded, least
 *   recently used first out): `duplicate` for the bytes that verified (the gateway's
 *   retries), SIGNATURE_INVALID for any other body (it is not what was verified; the job
 *   is done, so refusing it loses nothing). The raw bytes are hashed, not canonicalized.
 */
import { ReceiverBusyError } from '../errors.js';
import { optionalNumber } from '../options.js';
import type { OpenedSignature } from '../verify/core.js';

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

const busy = (what: string) => new ReceiverBusyError(`${what}; retry later.`);

/** The key of a signature: what its keys recovered (the signed digest's hash), per key. */
export function digestKey(signature: OpenedSignature): string {
  let key = '';
  for (const { keyIndex, hash } of signature.opened) {
    key += `${keyIndex}:`;
    for (const b of hash) key += (b < 16 ? '0' : '') + b.toString(16);
    key += ';';
  }
  return key;
}

export class DeliveryGuard {
  /** Bytes held by requests now. */
  inFlight = 0;
  readonly max: number;
  /** What large bodies may hold at most: the rest is kept for small ones. */
  private readonly largeMax: number;
  private readonly flights = new Map<string, Promise<unknown>>();
  private readonly known = new Map<string, KnownDigest>();

  constructor(options: AdmissionOptions, maxBodyBytes: number) {
    this.max = optionalNumber(options.maxInFlightBytes, 'maxInFlightBytes', Math.max(DEFAULT_MAX_IN_FLIGHT_BYTES, maxBodyBytes));
    if (this.max < maxBodyBytes) throw new TypeError(`maxInFlightBytes (${this.max}) must be at least maxBodyBytes (${maxBodyBytes}): a body of maxBodyBytes would never be admitted`);
    this.largeMax = Math.max(maxBodyBytes, this.max - Math.min(this.max / 8, 8 * 1024 * 1024));
  }

  /** Whether `total` bytes can be held by one request that holds `held` of them now. */
  private fits(held: number, total: number): boolean {
    // Always room for one body: nothing else in flight.
    if (this.inFlight === held) return true;
    return this.inFlight - held + total <= (total <= SMALL_BODY_BYTES ? this.max : this.largeMax);
  }

  /**
   * Admits a request whose body declares `declared` bytes (Content-Length; undefined
   * when unknown: counted as it arrives). RECEIVER_BUSY (503) when it does not fit.
   */
  admit(declared: number | undefined): Ticket {
    const first = declared !== undefined && Number.isFinite(declared) && declared > 0 ? declared : 0;
    if (!this.fits(0, first)) throw busy(`${this.inFlight} body bytes are being received and verified (maxInFlightBytes ${this.max})`);
    let held = first;
    let released = false;
    this.inFlight += held;
    return {
      cover: (bytes) => {
        if (released || bytes <= held) return;
        if (!this.fits(held, bytes)) throw busy(`the receiver holds ${this.inFlight} body bytes (maxInFlightBytes ${this.max})`);
        this.inFlight += bytes - held;
        held = bytes;
      },
      release: () => {
        if (released) return;
        released = true;
        this.inFlight -= held;
      },
    };
  }

  /**
   * Runs `verify` for a signature unless a verification of the same digest is in
   * flight: then waits for it and shares its result (`own` false: this request's body
   * was not looked at). One that fails does not count: the next waiter verifies its own body.
   */
  async once<T>(key: string, verify: () => T | Promise<T>): Promise<{ result: T; own: boolean }> {
    for (let current = this.flights.get(key); current !== undefined; current = this.flights.get(key)) {
      try {
        return { result: (await current) as T, own: false };
      } catch {
        // That body was not what was signed (or could not be verified): verify this one.
      }
    }
    const flight = (async () => verify())();
    this.flights.set(key, flight);
    try {
      return { result: await flight, own: true };
    } finally {
      if (this.flights.get(key) === flight) this.flights.delete(key);
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
    const bodies = entry === undefined ? [body] : entry.bodies.includes(body) ? entry.bodies : [...entry.bodies, body].slice(-4);
    this.known.set(key, { jobId, bodies, until: Math.max(until, entry?.until ?? 0) });
    if (this.known.size > KNOWN_DIGESTS) this.known.delete(this.known.keys().next().value!);
  }
}
