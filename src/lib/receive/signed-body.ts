/**
 * The one signed-body flow of every adapter, in the order that keeps unsigned traffic
 * cheap: what the headers alone tell (a body over the limit: 413; an unknown coding:
 * 415), then the signature (401 before a byte of the body is read), then the body,
 * read by the adapter and counted among the bodies in flight by the bytes that arrived
 * (503 once they would pass maxInFlightBytes; a declared size holds nothing until its
 * bytes come, so bodies that trickle in cannot crowd out the others). A refusal before the body was read leaves it unread: the adapter's answer
 * closes the connection.
 */
import { BodyTooLargeError, SignatureMissingError } from '../base/errors.js';
import { lookalikes, openedBefore, signatureFoundUnder } from './evidence.js';
import type { OpenedSignature } from '../core/verify/core.js';
import type { HeadersInput } from '../core/verify/headers.js';
import { checkBodySize } from '../core/verify/signature.js';
import { contentCoding, declaredLength, type BodyLimits, type ContentCoding } from './body.js';
import type { Ticket } from './guard.js';
import type { Verification } from './verification.js';

/** How an adapter hands a request's body to the flow. */
export interface BodySource {
  readonly headers: HeadersInput;
  /**
   * Bytes in hand already: a body parser's (decoded already: `keptEncoded` false) or the
   * caller's own (the framework-agnostic receiver: still Content-Encoded). Undefined: the
   * body is still to be read.
   */
  readonly kept?: string | Uint8Array;
  readonly keptEncoded?: boolean;
  /**
   * Reads (or decodes) the body per `coding` within the limits, covering `ticket` with its
   * size as it grows; `declared`: its Content-Length when identity-coded.
   */
  read(coding: ContentCoding, ticket: Ticket, declared: number | undefined): Promise<Uint8Array>;
}

/** A signed request: its signature, its body, and its place among the bodies in flight (release it once done). */
export interface SignedBody {
  readonly headers: HeadersInput;
  readonly signature: OpenedSignature;
  readonly bytes: string | Uint8Array;
  readonly ticket: Ticket;
  /** Read by jobhook itself: nobody else holds the bytes (they may be moved to a worker). */
  readonly owned: boolean;
}

/** Reads a signed request's body through `source`, refusing as early as the headers allow. */
export async function signedBody(
  v: Verification,
  source: BodySource,
  limits: BodyLimits,
): Promise<SignedBody> {
  const { kept, headers } = source;
  const declared = declaredLength(headers);
  try {
    if (kept !== undefined) checkBodySize(kept, limits);
    else if (Number(declared) > limits.maxBodyBytes) throw new BodyTooLargeError(limits.maxBodyBytes);
  } catch (err) {
    throw await tooLarge(v, headers, err);
  }
  const coding: ContentCoding =
    kept !== undefined && source.keptEncoded !== true ? 'identity' : contentCoding(headers);
  let signature: OpenedSignature;
  try {
    signature = await v.open(headers);
  } catch (err) {
    throw await unopened(v, headers, err);
  }
  // Bytes in hand are held at once; a body still to be read holds what arrives of it.
  // Bytes in hand are held by the caller already: refusing them frees nothing, so they take no signature's share.
  const ticket =
    kept === undefined
      ? v.admit(0, signature)
      : v.admit(typeof kept === 'string' ? kept.length : kept.byteLength);
  if (kept !== undefined && coding === 'identity')
    return { headers, signature, bytes: kept, ticket, owned: false };
  try {
    return {
      headers,
      signature,
      bytes: await source.read(coding, ticket, coding === 'identity' ? declared : undefined),
      ticket,
      owned: true,
    };
  } catch (err) {
    ticket.release();
    throw openedBefore(err);
  }
}

/**
 * A body too large, refused on its size before its signature was opened: opened now
 * (one public-key operation), so the log recommends a larger maxBodyBytes only when
 * the request was signed with the gateway's key (anyone can declare 100 MB).
 */
async function tooLarge(v: Verification, headers: HeadersInput, err: unknown): Promise<unknown> {
  try {
    await v.open(headers);
    return openedBefore(err);
  } catch {
    return err;
  }
}

/**
 * A request without the signature header: whether a signature that opens with the
 * configured key came under another name (a proxy renamed the header). Only such a
 * signature makes the log name a header: whatever an unsigned sender puts in a
 * header called "…signature…" does not open.
 */
async function unopened(v: Verification, headers: HeadersInput, err: unknown): Promise<unknown> {
  if (!(err instanceof SignatureMissingError)) return err;
  for (const [name, value] of lookalikes(headers, v.signatureHeader)) {
    if (await v.opens(value)) {
      signatureFoundUnder(err, name);
      break;
    }
  }
  return err;
}
