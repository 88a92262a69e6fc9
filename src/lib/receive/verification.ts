/**
 * Verifying one request, as every receiver and the middleware do it: the signature
 * opened on the headers alone, the body admitted against the bytes in flight, verified
 * (sharing the work only with requests carrying the same signature and the same bytes),
 * and a signature already verified and completed here answered without canonical work.
 */
import { SignatureInvalidError } from '../base/errors.js';
import type { OpenedSignature } from '../core/verify/core.js';
import type { HeadersInput } from '../core/verify/headers.js';
import { Offloader, type Verified, type VerifyRuntime } from '../runtime/verify/offload.js';
import type { VerificationConfig } from './config.js';
import { DeliveryGuard, digestKey, type KnownDigest, type Ticket } from './guard.js';

/** What a known signature's replay comes to: the gateway's retry of a completed job, or another body (401). */
export type KnownReplay =
  { kind: 'duplicate'; jobId: string } | { kind: 'refused'; error: SignatureInvalidError };

/** A verification, and whether this request did it (false: it shared one of the same bytes). */
export interface OwnVerified extends Verified {
  own: boolean;
}

const encoder = new TextEncoder();
const bytesOf = (body: string | Uint8Array): Uint8Array =>
  typeof body === 'string' ? encoder.encode(body) : body;

/** What a known signature's replay with a body hashed `hash` comes to. */
function replayOf(known: KnownDigest, hash: string): KnownReplay {
  if (known.bodies.includes(hash)) return { kind: 'duplicate', jobId: known.jobId };
  return {
    kind: 'refused',
    error: new SignatureInvalidError(
      `The event this signature covers (job ${known.jobId}) was verified and completed here with another body: this one is not what was signed.`,
      'replayed',
    ),
  };
}

export class Verification<K = unknown> {
  /** Bodies in flight, verifications per signature and body, signatures known completed. */
  readonly guard: DeliveryGuard;
  readonly offload: Offloader;
  private readonly hashRaw: (bytes: Uint8Array) => string | Promise<string>;

  constructor(config: VerificationConfig<K>, runtime: VerifyRuntime<K>) {
    this.offload = new Offloader(
      runtime.verifier(config.publicKey, config.verify),
      config.workers,
      config.log,
      runtime.builtins(),
    );
    this.guard = new DeliveryGuard(config.maxInFlightBytes, config.body.maxBodyBytes);
    this.hashRaw = runtime.hashRaw;
  }

  /** The signature, on the headers alone: a 401 WebhookError before a byte of the body is read. */
  open(headers: HeadersInput): OpenedSignature | Promise<OpenedSignature> {
    return this.offload.open(headers);
  }

  /** A place among the bodies in flight, holding `inHand` bytes already (RECEIVER_BUSY past maxInFlightBytes). */
  admit(inHand: number): Ticket {
    return this.guard.admit(inHand);
  }

  /**
   * Verifies `body` against its opened signature, sharing a verification in flight only
   * with the same signature and bytes. `movable`: the body's memory is this request's
   * alone (it may be moved to a worker).
   */
  async verify(
    body: string | Uint8Array,
    signature: OpenedSignature,
    movable: boolean,
  ): Promise<OwnVerified> {
    const shared = await this.guard.once(digestKey(signature), body, () =>
      this.offload.verifyOpened(body, signature, movable),
    );
    return { ...shared.result, own: shared.own };
  }

  /**
   * A signature verified and completed here, while its replay window is open: `duplicate`
   * for the bytes that verified (the gateway's retry), SIGNATURE_INVALID for any other body
   * (it is not what was verified; the job is done, so refusing it loses nothing). Undefined
   * for a signature not known: verify it. Synchronous unless the runtime hashes with
   * promises (WebCrypto): a signature not known costs a Map lookup, no promise.
   */
  known(
    signature: OpenedSignature,
    body: string | Uint8Array,
    now: number,
  ): KnownReplay | Promise<KnownReplay> | undefined {
    const known = this.guard.completed(digestKey(signature), now);
    if (known === undefined) return undefined;
    const hash = this.hashRaw(bytesOf(body));
    return typeof hash === 'string' ? replayOf(known, hash) : hash.then((h) => replayOf(known, h));
  }

  /**
   * Remembers that the job of a signature completed with `body` until `until` (epoch ms).
   * A body moved to a worker was hashed there; one verified here is hashed now (a promise
   * only where the runtime hashes with promises).
   */
  remember(
    signature: OpenedSignature,
    jobId: string,
    verified: Verified,
    body: string | Uint8Array,
    until: number,
  ): void | Promise<void> {
    const rawHash =
      verified.rawSha256 ??
      (typeof body === 'string' || body.byteLength > 0 ? this.hashRaw(bytesOf(body)) : undefined);
    if (rawHash === undefined) return;
    if (typeof rawHash === 'string') return this.guard.remember(digestKey(signature), jobId, rawHash, until);
    return rawHash.then((h) => this.guard.remember(digestKey(signature), jobId, h, until));
  }

  /** Verifications on a worker now, and waiting for one. */
  workers(): { busy: number; queued: number } {
    return this.offload.busy();
  }

  /** Stops the verification workers. */
  close(): Promise<void> {
    return this.offload.close();
  }
}
