import { inputName, UsageError } from './io.js';
import { captureOf, scanDocument, type JsonDocument } from './capture-object.js';
import { harDeliveries } from './har.js';
import { JsonScanError } from './json-scan.js';
import { DEFAULT_MAX_BODY_BYTES, DEFAULT_SIGNATURE_HEADER } from '../../index.js';
import { concatBytes } from '../../lib/entries/tools-door.js';

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
  /** Largest body the verifier takes (default 25 MiB): bounds a chunked body and what one capture may read. */
  maxBodyBytes?: number;
}

/**
 * Input one capture may take: its body written at worst 6 bytes per byte (`\u0000`
 * in a JSON string, 1-byte chunks in an HTTP dump), plus 1 MiB of headers. A longer
 * capture cannot hold a body the verifier takes, so it is not read further.
 */
export function maxCaptureBytes(maxBodyBytes: number): number {
  return 6 * maxBodyBytes + 1024 * 1024;
}

const CAPTURE_LIMIT_WHY =
  'more than a capture of a body within maxBodyBytes takes: 6 × that + 1 MiB; --max-body-bytes raises it';

/** Chunk extensions are ignored, and their total is bounded as Node's HTTP server bounds it (HPE_CHUNK_EXTENSIONS_OVERFLOW). */
const MAX_CHUNK_EXTENSION_BYTES = 16 * 1024;

const REQUEST_LINE = /^[A-Z]+ \S+ HTTP\/1\.[01]\r?\n/;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const decoder = new TextDecoder();

/** One line of a JSON lines input (`index` counts from 0) as a capture. */
function fromLine(bytes: Uint8Array, source: string, index: number): Capture {
  const where = `${source}:${index + 1}`;
  let document: JsonDocument;
  try {
    document = scanDocument(bytes);
  } catch (err) {
    if (!(err instanceof JsonScanError)) throw err;
    throw new UsageError(`${where}: not a JSON capture object (${err.message})`);
  }
  if (document.kind !== 'capture') throw new UsageError(`${where}: expected {"headers":…,"body":…}`);
  return { source, index, ...captureOf(document, where) };
}

// ---------------------------------------------------------------------------------
// Raw HTTP/1.1 request dumps (RFC 9112)

/** A line of `bytes` from `at`: [start, end) without its CRLF (or bare LF, RFC 9112 §2.2); undefined when no LF ends it. */
function lineAt(bytes: Uint8Array, at: number): { start: number; end: number; next: number } | undefined {
  const lf = bytes.indexOf(0x0a, at);
  if (lf < 0) return undefined;
  return { start: at, end: lf > at && bytes[lf - 1] === 0x0d ? lf - 1 : lf, next: lf + 1 };
}

function latin1(bytes: Uint8Array, start: number, end: number): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start).toString('latin1');
}

/** A field line `name: value` (RFC 9112 §5.1), or a UsageError naming it. */
function fieldLine(text: string, source: string, what: string): [string, string] {
  const colon = text.indexOf(':');
  if (colon <= 0 || !TOKEN.test(text.slice(0, colon))) {
    throw new UsageError(
      `${source}: malformed ${what} line ${JSON.stringify(text)} (a field name, then ':' without whitespace before it)`,
    );
  }
  // CR and NUL in a field value are invalid and dangerous (RFC 9110 §5.5): refused, never passed on.
  if (/[\r\0]/.test(text))
    throw new UsageError(`${source}: the ${what} line ${JSON.stringify(text)} holds a CR or NUL`);
  return [text.slice(0, colon), text.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '')];
}

function isHexDigit(b: number): boolean {
  return (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66);
}

const TOKEN_BYTE = new Uint8Array(128).map((_, b) => (TOKEN.test(String.fromCharCode(b)) ? 1 : 0));

function isTokenByte(b: number): boolean {
  return TOKEN_BYTE[b] === 1;
}

/**
 * Checks the chunk extensions of a chunk-size line from `at` to `end` (RFC 9112 §7.1.1:
 * `*( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] )`) and returns their
 * length; they are ignored. Blanks after the size alone are tolerated.
 */
function chunkExtensions(bytes: Uint8Array, at: number, end: number, fail: (why: string) => never): number {
  const blanks = (i: number) => {
    while (i < end && (bytes[i] === 0x20 || bytes[i] === 0x09)) i++;
    return i;
  };
  const token = (i: number) => {
    const from = i;
    while (i < end && isTokenByte(bytes[i]!)) i++;
    if (i === from) fail('a chunk extension without a name or value');
    return i;
  };
  let i = blanks(at);
  while (i < end) {
    if (bytes[i] !== 0x3b) fail('a malformed chunk extension (";" expected after the chunk size)');
    i = blanks(token(blanks(i + 1)));
    if (i < end && bytes[i] === 0x3d) {
      i = blanks(i + 1);
      if (bytes[i] !== 0x22) i = token(i);
      else {
        // quoted-string: qdtext or a quoted-pair, up to the closing quote
        for (i++; ; i++) {
          if (i < end && bytes[i] === 0x5c) i++;
          else if (i < end && bytes[i] === 0x22) break;
          if (i >= end) fail('an unterminated quoted chunk extension value');
          const b = bytes[i]!;
          if ((b < 0x20 && b !== 0x09) || b === 0x7f)
            fail('a control character in a quoted chunk extension value');
        }
        i++;
      }
      i = blanks(i);
    }
  }
  return end - at;
}

/**
 * Removes the chunked coding (RFC 9112 §7.1): each chunk's hex size is read with a
 * bound (no integer overflow), its data must be there in full (a truncated capture
 * is an error that says so, never zero-filled), the body stops at `maxBodyBytes`,
 * extensions are checked and ignored, trailer fields are checked and discarded.
 */
function dechunk(bytes: Uint8Array, from: number, source: string, maxBodyBytes: number): Uint8Array {
  // The body is no longer than what follows the headers, nor than the limit: one buffer, no copy per chunk.
  const body = new Uint8Array(Math.min(bytes.length - from, maxBodyBytes));
  let size = 0;
  let extensions = 0;
  let at = from;
  let n = 0;
  const fail = (why: string): never => {
    throw new UsageError(`${source}: chunked body, chunk ${n}: ${why}`);
  };
  for (;;) {
    n++;
    const line = lineAt(bytes, at);
    if (line === undefined)
      fail(
        at === bytes.length
          ? 'the capture ends before it (truncated: no last chunk "0")'
          : 'the chunk-size line is not terminated (truncated capture?)',
      );
    const { start, end, next } = line!;
    let digitsEnd = start;
    while (digitsEnd < end && isHexDigit(bytes[digitsEnd]!)) digitsEnd++;
    if (digitsEnd === start)
      fail(
        `no hex chunk size at the start of ${JSON.stringify(latin1(bytes, start, Math.min(end, start + 40)))}`,
      );
    let significant = start;
    while (significant < digitsEnd - 1 && bytes[significant] === 0x30) significant++;
    const hex = latin1(bytes, significant, digitsEnd);
    // 12 hex digits exceed any body a verifier takes; more are not converted (no precision loss, no overflow).
    const chunkSize = hex.length > 12 ? Infinity : parseInt(hex, 16);
    extensions += chunkExtensions(bytes, digitsEnd, end, fail);
    if (extensions > MAX_CHUNK_EXTENSION_BYTES)
      fail(
        `chunk extensions longer than ${MAX_CHUNK_EXTENSION_BYTES} bytes in all (Node's HTTP server refuses them too)`,
      );
    at = next;
    if (chunkSize === 0) break;
    const declared =
      chunkSize === Infinity ? `a size of ${hex.length} hex digits` : `${chunkSize} bytes (0x${hex})`;
    const available = bytes.length - at;
    if (chunkSize > available)
      fail(`it declares ${declared} but only ${available} follow: the capture is truncated`);
    if (chunkSize > maxBodyBytes - size) {
      throw new UsageError(
        `${source}: the chunked body is larger than maxBodyBytes (${maxBodyBytes} bytes), which the verifier refuses; --max-body-bytes raises the limit`,
      );
    }
    body.set(bytes.subarray(at, at + chunkSize), size);
    size += chunkSize;
    at += chunkSize;
    if (at === bytes.length)
      fail(`the capture ends after its ${chunkSize} bytes of data (truncated: no CRLF, no last chunk)`);
    if (bytes[at] === 0x0d && bytes[at + 1] === 0x0a) at += 2;
    else if (bytes[at] === 0x0a) at += 1;
    else fail(`its ${declared} of data are not followed by CRLF: the size does not match the data`);
  }
  skipTrailers(bytes, at, source);
  return body.slice(0, size);
}

/** Trailer fields, then the empty line that ends the message (the end of the capture will do). */
function skipTrailers(bytes: Uint8Array, from: number, source: string): void {
  let at = from;
  for (;;) {
    const line = lineAt(bytes, at);
    if (line === undefined) {
      if (at === bytes.length) return;
      throw new UsageError(
        `${source}: chunked body: the capture ends inside the trailer section (truncated)`,
      );
    }
    at = line.next;
    if (line.start === line.end) return;
    fieldLine(decoder.decode(bytes.subarray(line.start, line.end)), source, 'trailer');
  }
}

/** The body's length from Content-Length: 1*DIGIT, or a list of one value repeated (RFC 9110 §8.6). */
function contentLength(value: string, source: string): number {
  const values = value.split(',').map((v) => v.trim());
  if (!values.every((v) => /^\d+$/.test(v) && Number(v) === Number(values[0])))
    throw new UsageError(`${source}: invalid Content-Length ${JSON.stringify(value)}`);
  return Number(values[0]);
}

function fromHttpDump(bytes: Uint8Array, source: string, maxBodyBytes: number): Capture {
  const requestLine = lineAt(bytes, 0)!;
  const headers: Record<string, string> = {};
  const names = new Map<string, string>();
  let last: string | undefined;
  let at = requestLine.next;
  for (;;) {
    const line = lineAt(bytes, at);
    if (line === undefined)
      throw new UsageError(`${source}: HTTP request without the blank line that ends the headers`);
    at = line.next;
    if (line.start === line.end) break;
    const text = decoder.decode(bytes.subarray(line.start, line.end));
    if (text[0] === ' ' || text[0] === '\t') {
      // obs-fold (RFC 9112 §5.2): a continuation of the previous field's value, replaced by a space
      if (last === undefined) throw new UsageError(`${source}: whitespace before the first header line`);
      if (/[\r\0]/.test(text))
        throw new UsageError(`${source}: the header line ${JSON.stringify(text)} holds a CR or NUL`);
      headers[last] += ` ${text.trim()}`;
      continue;
    }
    const [name, value] = fieldLine(text, source, 'header');
    const existing = names.get(name.toLowerCase());
    if (existing !== undefined) headers[existing] += `, ${value}`;
    else {
      names.set(name.toLowerCase(), name);
      headers[name] = value;
    }
    last = existing ?? name;
  }
  const header = (name: string) => {
    const key = names.get(name);
    return key === undefined ? undefined : headers[key];
  };
  const te = header('transfer-encoding');
  const cl = header('content-length');
  let body: Uint8Array;
  if (te !== undefined) {
    // Transfer-Encoding overrides Content-Length (RFC 9112 §6.3); chunked must be the final coding, once.
    const codings = te
      .split(',')
      .map((c) => c.trim().toLowerCase())
      .filter((c) => c !== '');
    const other = codings.find((c) => c !== 'chunked');
    if (other !== undefined)
      throw new UsageError(
        `${source}: Transfer-Encoding ${JSON.stringify(te)}: only chunked is read, not ${JSON.stringify(other)}`,
      );
    if (codings.length !== 1)
      throw new UsageError(
        `${source}: Transfer-Encoding ${JSON.stringify(te)}: ${codings.length === 0 ? 'no coding named' : 'chunked applied more than once'}`,
      );
    body = dechunk(bytes, at, source, maxBodyBytes);
  } else if (cl !== undefined) {
    const length = contentLength(cl, source);
    if (length > bytes.length - at)
      throw new UsageError(
        `${source}: Content-Length is ${length} but only ${bytes.length - at} bytes follow the headers: the capture is truncated`,
      );
    body = bytes.slice(at, at + length);
  } else {
    body = bytes.slice(at);
  }
  return { source, index: 0, headers, body };
}

// ---------------------------------------------------------------------------------
// One input: detecting its form

function bare(bytes: Uint8Array, source: string, options: CaptureOptions, index = 0): Capture {
  if (options.signature === undefined) {
    throw new UsageError(
      `${source}: a bare JSON body has no headers; pass its signature with --signature HEX (or give a capture object {"headers":…,"body":…})`,
    );
  }
  return {
    source,
    index,
    headers: { [options.signatureHeader ?? DEFAULT_SIGNATURE_HEADER]: options.signature },
    body: bytes,
  };
}

/** The lines of an input held whole, each a capture object (blank lines skipped). */
function* jsonLines(bytes: Uint8Array, source: string): Generator<Capture> {
  let k = 0;
  for (let at = 0; at <= bytes.length; k++) {
    let end = bytes.indexOf(0x0a, at);
    if (end < 0) end = bytes.length;
    const line = bytes.subarray(at, end);
    at = end + 1;
    if (!isBlank(line)) yield fromLine(line, source, k);
  }
}

function isRequest(bytes: Uint8Array): boolean {
  return REQUEST_LINE.test(latin1(bytes, 0, Math.min(bytes.length, 64 * 1024)));
}

const HAR_NAME = /\.har$/i;

/**
 * A whole input that is not JSON lines: a capture object, a HAR file (its deliveries
 * decoded one at a time), an HTTP dump, a bare body, or JSON lines after all.
 */
function* single(bytes: Uint8Array, source: string, options: CaptureOptions): Generator<Capture> {
  if (isRequest(bytes)) {
    yield fromHttpDump(bytes, source, options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES);
    return;
  }
  let document: JsonDocument | undefined;
  try {
    document = scanDocument(bytes);
  } catch (err) {
    if (!(err instanceof JsonScanError)) throw err;
    if (HAR_NAME.test(source)) throw new UsageError(`${source}: not a HAR file (${err.message})`);
    // Several capture objects, one per line, without the .jsonl name?
    const lf = bytes.indexOf(0x0a);
    if (captureObjectLine(bytes.subarray(0, lf < 0 ? bytes.length : lf)) !== undefined) {
      yield* jsonLines(bytes, source);
      return;
    }
    // else a malformed bare body: verification will say where
  }
  if (document?.kind === 'capture') yield { source, index: 0, ...captureOf(document, source) };
  else if (document?.kind === 'har')
    for (const d of harDeliveries(document.scan, document.entries, source, options.signatureHeader))
      yield { source, ...d };
  else if (document !== undefined && HAR_NAME.test(source))
    throw new UsageError(`${source}: not a HAR file (no log.entries list)`);
  else yield bare(bytes, source, options);
}

function isJsonl(source: string, options: CaptureOptions): boolean {
  return options.jsonl === true || source.endsWith('.jsonl');
}

/**
 * Reads the deliveries in one input held whole, detecting its form: a capture object
 * `{ headers, body | bodyBase64 }`, a HAR file (each POST entry with a body), a raw
 * HTTP/1.1 request dump, JSON lines of capture objects (`.jsonl` or `jsonl: true`), or a
 * bare JSON body (with `signature`).
 */
export function parseCaptures(bytes: Uint8Array, source: string, options: CaptureOptions = {}): Capture[] {
  if (isJsonl(source, options)) return [...jsonLines(bytes, source)];
  return [...single(bytes, source, options)];
}

// ---------------------------------------------------------------------------------
// Streaming: JSON lines are read, parsed and handed on one at a time

interface Line {
  bytes: Uint8Array;
  /** Counted from 0. */
  index: number;
  /** A LF ended it (else the input did). */
  newline: boolean;
}

/** The lines of a stream of chunks, each at most `limit` bytes; only the current line is held. */
class LineReader {
  private chunk: Uint8Array = new Uint8Array(0);
  private at = 0;
  private count = 0;
  private readonly chunks: AsyncIterator<Uint8Array>;
  /** Lines are deliveries (else the input is one, and a long first line is a long input). */
  jsonl = false;

  constructor(
    chunks: AsyncIterable<Uint8Array>,
    private readonly limit: number,
    private readonly source: string,
  ) {
    this.chunks = chunks[Symbol.asyncIterator]();
  }

  private tooLong(): never {
    if (!this.jsonl)
      throw new UsageError(`${this.source}: longer than ${this.limit} bytes (${CAPTURE_LIMIT_WHY})`);
    throw new UsageError(
      `${this.source}:${this.count + 1}: a line longer than ${this.limit} bytes (${CAPTURE_LIMIT_WHY})`,
    );
  }

  async next(): Promise<Line | undefined> {
    const pieces: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      const lf = this.chunk.indexOf(0x0a, this.at);
      const piece = this.chunk.subarray(this.at, lf < 0 ? this.chunk.length : lf);
      size += piece.length;
      if (size > this.limit) this.tooLong();
      if (piece.length > 0) pieces.push(piece);
      if (lf >= 0) {
        this.at = lf + 1;
        return { bytes: concatBytes(pieces), index: this.count++, newline: true };
      }
      const r = await this.chunks.next();
      if (r.done) {
        this.chunk = new Uint8Array(0);
        this.at = 0;
        return pieces.length === 0
          ? undefined
          : { bytes: concatBytes(pieces), index: this.count++, newline: false };
      }
      this.chunk = r.value;
      this.at = 0;
    }
  }

  /** `first` (the line read already) and everything after it, whole, at most `limit` bytes. */
  async rest(first: Line): Promise<Uint8Array> {
    const pieces = [
      first.bytes,
      ...(first.newline ? [new Uint8Array([0x0a])] : []),
      this.chunk.subarray(this.at),
    ];
    let size = pieces.reduce((n, p) => n + p.length, 0);
    for (;;) {
      if (size > this.limit)
        throw new UsageError(`${this.source}: longer than ${this.limit} bytes (${CAPTURE_LIMIT_WHY})`);
      const r = await this.chunks.next();
      if (r.done) return concatBytes(pieces);
      pieces.push(r.value);
      size += r.value.length;
    }
  }
}

function isBlank(bytes: Uint8Array): boolean {
  return bytes.every((b) => b === 0x20 || b === 0x09 || b === 0x0d);
}

async function* streamLines(lines: LineReader, source: string, first?: Line): AsyncGenerator<Capture> {
  lines.jsonl = true;
  for (let line = first ?? (await lines.next()); line !== undefined; line = await lines.next()) {
    if (isBlank(line.bytes)) continue;
    yield fromLine(line.bytes, source, line.index);
  }
}

/** The capture object a line holds, when it holds one. */
function captureObjectLine(bytes: Uint8Array): Extract<JsonDocument, { kind: 'capture' }> | undefined {
  try {
    const document = scanDocument(bytes);
    return document.kind === 'capture' ? document : undefined;
  } catch (err) {
    if (err instanceof JsonScanError) return undefined;
    throw err;
  }
}

/**
 * `parseCaptures` on a stream: JSON lines (`.jsonl`, `jsonl: true`, or a first line
 * that is a capture object with more lines after it) are read and handed on one at a
 * time, in memory bounded by the longest line; any other input is read whole. A line,
 * or an input, longer than `maxCaptureBytes` is refused.
 */
export async function* readCaptures(
  chunks: AsyncIterable<Uint8Array>,
  path: string | undefined,
  options: CaptureOptions = {},
): AsyncGenerator<Capture> {
  const source = inputName(path);
  const lines = new LineReader(
    chunks,
    maxCaptureBytes(options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES),
    source,
  );
  if (isJsonl(source, options)) {
    yield* streamLines(lines, source);
    return;
  }
  let start: { captures: Iterable<Capture>; next?: Line } | undefined = await begin(lines, source, options);
  const { next } = start;
  yield* start.captures;
  start = undefined; // not held while the lines after it are verified
  if (next !== undefined) yield* streamLines(lines, source, next);
}

/**
 * The first capture and the next line when the input starts with a line that is a
 * capture object, else all the captures of the input read whole. A function of its
 * own so that the first line and its parsed object (each as large as the body) are
 * not kept alive in the generator while the delivery they made is verified.
 */
async function begin(
  lines: LineReader,
  source: string,
  options: CaptureOptions,
): Promise<{ captures: Iterable<Capture>; next?: Line }> {
  const first = await lines.next();
  if (first === undefined) return { captures: single(new Uint8Array(0), source, options) };
  const object = captureObjectLine(first.bytes);
  if (object === undefined) return { captures: single(await lines.rest(first), source, options) };
  lines.jsonl = true;
  let next = await lines.next();
  while (next !== undefined && isBlank(next.bytes)) next = await lines.next();
  return { captures: [{ source, index: 0, ...captureOf(object, source) }], next };
}
