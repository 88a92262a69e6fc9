/**
 * Where a verification runs, decided in one place for every adapter: on the calling
 * thread when its canonical work is cheap, on a worker when it would hold the event
 * loop. Raw size alone misleads both ways: a 193 KB nested body is 95 MB of canonical
 * text over four dialects, and a 24 MB body of floats formats each number per dialect.
 * So a body under the size threshold is parsed (cheap at that size) and its work
 * estimated from the layout: the canonical bytes of every dialect worth hashing, plus
 * the floats each of them formats. Runtime-neutral.
 */
import type { ResolvedOptions } from './options.js';
import { candidateDialects, parseBody, type ParsedBody } from './core.js';

/**
 * Canonical work done on the calling thread at most, in canonical bytes (a float
 * formatted counts FLOAT_BYTES): ~2–10 ms here (1.5–10 ns a byte: nested layout is cheapest,
 * escaped non-ASCII text dearest; a float ~0.7 µs a dialect), measured with bench/replay-flood.mjs.
 */
export const LOCAL_WORK_BYTES = 1024 * 1024;
/** What formatting one float costs, in canonical bytes written (shortest round-trip digits, then per-dialect layout). */
const FLOAT_BYTES = 400;

/** The canonical work of a parsed body, in bytes written (see LOCAL_WORK_BYTES). */
function workOf(parsed: ParsedBody, body: string | Uint8Array, resolved: ResolvedOptions): number {
  const { flags } = parsed;
  const dialects = candidateDialects(flags, resolved.dialects).length;
  const size = typeof body === 'string' ? body.length : body.byteLength;
  const floats = flags.dialectNumbers ? countFloats(body) : 0;
  return dialects * (size + flags.layoutBytes + floats * FLOAT_BYTES);
}

/** The canonical work of a body, in bytes written (see LOCAL_WORK_BYTES); undefined when it does not parse (refused at once where it is). */
export function canonicalWork(body: string | Uint8Array, resolved: ResolvedOptions): number | undefined {
  let parsed;
  try {
    parsed = parseBody(body, resolved);
  } catch {
    return undefined;
  }
  try {
    return workOf(parsed, body, resolved);
  } finally {
    parsed.dispose();
  }
}

/**
 * Where to verify: on a worker for bodies of `threshold` bytes and more (parsing them
 * alone is work), and for smaller ones whose canonical work passes LOCAL_WORK_BYTES;
 * here otherwise, with the body as the estimate parsed it (`parsed`, to verify without
 * parsing it again; the caller disposes it) when it was parsed. Bodies over the limit
 * stay here unparsed (refused at once); a body that does not parse comes back with its
 * error (`refused`), to be refused without being parsed again.
 */
export function placement(
  body: string | Uint8Array,
  resolved: ResolvedOptions,
  threshold: number,
): { worker: true } | { worker: false; parsed?: ParsedBody; refused?: unknown } {
  const n = typeof body === 'string' ? body.length : body.byteLength;
  if (n > resolved.maxBodyBytes || threshold === Infinity) return { worker: false };
  if (n >= threshold) return { worker: true };
  // Below this no body can cost much (its layout is bounded by its nesting).
  if (n < 256) return { worker: false };
  let parsed;
  try {
    parsed = parseBody(body, resolved);
  } catch (err) {
    return { worker: false, refused: err };
  }
  if (workOf(parsed, body, resolved) <= LOCAL_WORK_BYTES) return { worker: false, parsed };
  parsed.dispose();
  return { worker: true };
}

/** Whether to verify on a worker (placement(), without keeping the parsed body). */
export function onWorker(body: string | Uint8Array, resolved: ResolvedOptions, threshold: number): boolean {
  const where = placement(body, resolved, threshold);
  if (!where.worker) where.parsed?.dispose();
  return where.worker;
}

/** Number tokens with a fraction or an exponent (the ones each dialect formats), outside strings. */
export function countFloats(body: string | Uint8Array): number {
  const at = typeof body === 'string' ? (i: number) => body.charCodeAt(i) : (i: number) => body[i]!;
  const n = typeof body === 'string' ? body.length : body.byteLength;
  let floats = 0;
  let inString = false;
  let inNumber = false;
  let fraction = false;
  for (let i = 0; i < n; i++) {
    const c = at(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) {
      inString = true;
      inNumber = false;
    } else if ((c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2b) {
      if (!inNumber) {
        inNumber = true;
        fraction = false;
      }
    } else if (inNumber && (c === 0x2e || c === 0x65 || c === 0x45)) {
      if (!fraction) floats++;
      fraction = true;
    } else inNumber = false;
  }
  return floats;
}
