/**
 * A body gathered as it arrives, counted against its place among the bodies in flight
 * (the ticket) by the bytes that arrived, never by the bytes a sender declared: a body
 * that trickles in holds only what it sent. A body declared larger than PREALLOCATE_AFTER
 * gets one buffer of its declared size once that much of it has arrived (and the ticket
 * can hold the declared size), then is filled in place: copying a large body at its end
 * held the event loop for hundreds of milliseconds on a loaded machine (the pages of a
 * fresh buffer are touched then); this spreads that over the chunks.
 */
import { concatBytes } from '../base/bytes.js';
import type { Ticket } from './guard.js';

/** Arrived bytes after which a declared size is allocated in one piece. */
export const PREALLOCATE_AFTER = 1024 * 1024;

export class BodyBuffer {
  private chunks: Uint8Array[] = [];
  private whole: Uint8Array | undefined;
  private size = 0;
  /** Bytes of an encoded body as sent, counted beside what they decode to. */
  private raw = 0;

  /**
   * `declared`: the Content-Length of an identity-coded body (undefined otherwise);
   * `alloc`: a buffer of n bytes, its contents not needed (Node: Buffer.allocUnsafeSlow).
   */
  constructor(
    private readonly ticket: Ticket,
    private readonly declared: number | undefined,
    private readonly alloc: (n: number) => Uint8Array = (n) => new Uint8Array(n),
  ) {}

  /** Takes a chunk: RECEIVER_BUSY (thrown) when the bytes that arrived no longer fit in flight. */
  add(chunk: Uint8Array): void {
    this.size += chunk.byteLength;
    this.ticket.cover(this.size + this.raw);
    if (this.whole === undefined && this.size >= PREALLOCATE_AFTER) this.preallocate();
    const { whole, size } = this;
    if (whole !== undefined && size <= whole.length) whole.set(chunk, size - chunk.byteLength);
    else this.chunks.push(chunk);
  }

  /** `bytes` more of an encoded body arrived as sent: counted with the decoded ones (RECEIVER_BUSY, thrown, past what is left). */
  addRaw(bytes: number): void {
    this.raw += bytes;
    this.ticket.cover(this.size + this.raw);
  }

  /** The body: the declared buffer when it arrived whole, else its pieces joined. */
  bytes(): Uint8Array {
    const { whole, size, chunks } = this;
    if (whole === undefined) return chunks.length === 0 ? new Uint8Array(0) : concatBytes(chunks);
    return size === whole.length && chunks.length === 0
      ? whole
      : concatBytes([whole.subarray(0, Math.min(size, whole.length)), ...chunks]);
  }

  /** One buffer of the declared size, when the ticket can hold it; else the chunks go on (nothing lost). */
  private preallocate(): void {
    const { declared } = this;
    if (declared === undefined || !Number.isInteger(declared) || declared <= this.size) return;
    try {
      this.ticket.cover(declared);
    } catch {
      return;
    }
    const whole = this.alloc(declared);
    let at = 0;
    for (const c of this.chunks) {
      whole.set(c, at);
      at += c.byteLength;
    }
    this.chunks = [];
    this.whole = whole;
  }
}
