/**
 * The one signed-body flow of every adapter, in the order that keeps unsigned traffic
 * cheap: what the headers alone tell (a body over the limit: 413; an unknown coding:
 * 415), then the signature (401 before a byte of the body is read), then the body,
 * read by the adapter and counted among the bodies in flight by the bytes that arrived
 * (503 once they would pass maxInFlightBytes; a declared size holds nothing until its
 * bytes come, so bodies that trickle in cannot crowd out the others). A refusal before the body was read leaves it unread: the adapter's answer
 * closes the connection.
 */
import { BodyTooLargeError } from '../base/errors.js';
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
  if (kept !== undefined) checkBodySize(kept, limits);
  else if (Number(declared) > limits.maxBodyBytes) throw new BodyTooLargeError(limits.maxBodyBytes);
  const coding: ContentCoding =
    kept !== undefined && source.keptEncoded !== true ? 'identity' : contentCoding(headers);
  const signature = await v.open(headers);
  // Bytes in hand are held at once; a body still to be read holds what arrives of it.
  const ticket = v.admit(kept === undefined ? 0 : typeof kept === 'string' ? kept.length : kept.byteLength);
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
    throw err;
  }
}
