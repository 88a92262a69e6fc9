import { UsageError } from './io.js';
import { DEFAULT_SIGNATURE_HEADER } from '../protocol.js';

/** One captured delivery: the headers as received and the exact body bytes. */
export interface Capture {
  source: string;
  /** Position in the source (line of a JSONL file, else 0). */
  index: number;
  headers: Record<string, string>;
  body: Uint8Array;
}

export interface CaptureOptions {
  /** Treat the input as one capture object per line. */
  jsonl?: boolean;
  /** Signature for a bare JSON body (required then). */
  signature?: string;
  /** Header that carries `signature` (default X-Service-Signature). */
  signatureHeader?: string;
}

const REQUEST_LINE = /^[A-Z]+ \S+ HTTP\/1\.[01]\r?\n/;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function isCaptureObject(v: unknown): v is { headers: Record<string, unknown>; body?: unknown; bodyBase64?: unknown } {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && typeof (v as { headers?: unknown }).headers === 'object' && (v as { headers?: unknown }).headers !== null && ('body' in v || 'bodyBase64' in v);
}

function fromObject(v: { headers: Record<string, unknown>; body?: unknown; bodyBase64?: unknown }, source: string, index: number): Capture {
  const headers: Record<string, string> = {};
  for (const [k, value] of Object.entries(v.headers)) {
    if (typeof value === 'string') headers[k] = value;
    else if (Array.isArray(value)) headers[k] = value.map(String).join(', ');
    else if (value !== null && value !== undefined) headers[k] = String(value);
  }
  let body: Uint8Array;
  if (typeof v.bodyBase64 === 'string') body = new Uint8Array(Buffer.from(v.bodyBase64, 'base64'));
  else if (typeof v.body === 'string') body = encoder.encode(v.body);
  else throw new UsageError(`${source}${index ? `:${index + 1}` : ''}: a capture needs "body" (text) or "bodyBase64"`);
  return { source, index, headers, body };
}

function dechunk(bytes: Uint8Array, source: string): Uint8Array {
  const out: number[] = [];
  let at = 0;
  for (;;) {
    let lineEnd = at;
    while (lineEnd < bytes.length && bytes[lineEnd] !== 0x0a) lineEnd++;
    const size = parseInt(decoder.decode(bytes.subarray(at, lineEnd)).trim().split(';')[0]!, 16);
    if (Number.isNaN(size) || lineEnd >= bytes.length) throw new UsageError(`${source}: malformed chunked body`);
    at = lineEnd + 1;
    if (size === 0) return Uint8Array.from(out);
    for (let k = 0; k < size; k++) out.push(bytes[at + k]!);
    at += size;
    if (bytes[at] === 0x0d) at++;
    if (bytes[at] === 0x0a) at++;
  }
}

function fromHttpDump(bytes: Uint8Array, source: string): Capture {
  let split = -1;
  let sep = 0;
  for (let k = 0; k + 1 < bytes.length; k++) {
    if (bytes[k] === 0x0a && bytes[k + 1] === 0x0a) {
      split = k;
      sep = 2;
      break;
    }
    if (bytes[k] === 0x0d && bytes[k + 1] === 0x0a && bytes[k + 2] === 0x0d && bytes[k + 3] === 0x0a) {
      split = k;
      sep = 4;
      break;
    }
  }
  if (split < 0) throw new UsageError(`${source}: HTTP request without the blank line that ends the headers`);
  const lines = decoder.decode(bytes.subarray(0, split)).split(/\r?\n/).slice(1);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon <= 0) throw new UsageError(`${source}: malformed header line ${JSON.stringify(line)}`);
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    const existing = Object.keys(headers).find((h) => h.toLowerCase() === name.toLowerCase());
    if (existing !== undefined) headers[existing] += `, ${value}`;
    else headers[name] = value;
  }
  let body = bytes.subarray(split + sep);
  const te = Object.entries(headers).find(([h]) => h.toLowerCase() === 'transfer-encoding')?.[1];
  const cl = Object.entries(headers).find(([h]) => h.toLowerCase() === 'content-length')?.[1];
  if (te !== undefined && /chunked/i.test(te)) body = dechunk(body, source);
  else if (cl !== undefined && Number(cl) <= body.length) body = body.subarray(0, Number(cl));
  return { source, index: 0, headers, body: new Uint8Array(body) };
}

function bare(bytes: Uint8Array, source: string, options: CaptureOptions, index = 0): Capture {
  if (options.signature === undefined) {
    throw new UsageError(`${source}: a bare JSON body has no headers; pass its signature with --signature HEX (or give a capture object {"headers":…,"body":…})`);
  }
  return { source, index, headers: { [options.signatureHeader ?? DEFAULT_SIGNATURE_HEADER]: options.signature }, body: bytes };
}

function jsonLines(text: string, source: string): Capture[] {
  const out: Capture[] = [];
  const lines = text.split('\n');
  for (let k = 0; k < lines.length; k++) {
    const line = lines[k]!.trim();
    if (line === '') continue;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch (err) {
      throw new UsageError(`${source}:${k + 1}: not a JSON capture object (${(err as Error).message})`);
    }
    if (!isCaptureObject(v)) throw new UsageError(`${source}:${k + 1}: expected {"headers":…,"body":…}`);
    out.push(fromObject(v, source, k));
  }
  return out;
}

/**
 * Reads the deliveries in one input, detecting its form: a capture object
 * `{ headers, body | bodyBase64 }`, a raw HTTP/1.1 request dump, JSON lines of
 * capture objects (`.jsonl` or `jsonl: true`), or a bare JSON body (with `signature`).
 */
export function parseCaptures(bytes: Uint8Array, source: string, options: CaptureOptions = {}): Capture[] {
  const text = decoder.decode(bytes);
  if (options.jsonl || source.endsWith('.jsonl')) return jsonLines(text, source);
  if (REQUEST_LINE.test(text)) return [fromHttpDump(bytes, source)];
  const trimmed = text.trimStart();
  if (trimmed.startsWith('{')) {
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      // Several capture objects, one per line, without the .jsonl name?
      const first = trimmed.split('\n', 1)[0]!;
      try {
        if (isCaptureObject(JSON.parse(first))) return jsonLines(text, source);
      } catch {
        // a malformed bare body: verification will say where
      }
      return [bare(bytes, source, options)];
    }
    if (isCaptureObject(v)) return [fromObject(v, source, 0)];
  }
  return [bare(bytes, source, options)];
}
