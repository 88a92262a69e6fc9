/**
 * The deliveries of a HAR file, read from its bytes (json-scan.ts): a first pass checks
 * the file and notes where each POST entry's headers and body lie; each body is then
 * decoded when its turn comes, one at a time. Nothing else of the file (responses,
 * timings, pages, whatever a tool or an attacker put there) is built.
 */
import { DEFAULT_SIGNATURE_HEADER } from '../../index.js';
import { UsageError } from './io.js';
import type { JsonScan, Span } from './json-scan.js';

/** Header fields one request may have: Node's HTTP server keeps no more (`maxHeadersCount`). */
export const MAX_HEADER_FIELDS = 2000;

const QUOTE = 0x22;
const OPEN_OBJECT = 0x7b;
const OPEN_ARRAY = 0x5b;

/** A POST entry with a body: where its parts lie, read again when its delivery is asked for. */
interface PostEntry {
  index: number;
  headers: Span;
  text: Span;
  base64: boolean;
  /** It has the signature header. */
  signed: boolean;
}

/** One delivery of a HAR file: its entry's position in `log.entries`, headers and body. */
export interface HarDelivery {
  index: number;
  headers: Record<string, string>;
  body: Uint8Array;
}

/** The spans of the members of the object at `scan`'s position that `names` lists (the last of a repeated name, as JSON.parse). */
export function memberSpans<N extends string>(scan: JsonScan, names: readonly N[]): Partial<Record<N, Span>> {
  const spans: Partial<Record<N, Span>> = {};
  scan.members((name) => {
    const span = scan.skip();
    if ((names as readonly string[]).includes(name)) spans[name as N] = span;
  });
  return spans;
}

/** The span of `log.entries`, when `log` (a top-level member) is an object holding a list `entries`. */
export function harEntries(scan: JsonScan, log: Span | undefined): Span | undefined {
  if (log === undefined || scan.kind(log) !== OPEN_OBJECT) return undefined;
  const { entries } = memberSpans(scan.seek(log), ['entries']);
  return entries !== undefined && scan.kind(entries) === OPEN_ARRAY ? entries : undefined;
}

/** Each `{"name", "value"}` of a `request.headers` list, checked: both text, at most MAX_HEADER_FIELDS. */
function eachHeader(
  scan: JsonScan,
  list: Span | undefined,
  where: string,
  each: (name: Span, value: Span) => void,
): asserts list is Span {
  if (list === undefined || scan.kind(list) !== OPEN_ARRAY)
    throw new UsageError(`${where}: request.headers is not a list of {"name","value"}`);
  scan.seek(list).elements((k) => {
    if (k === MAX_HEADER_FIELDS)
      throw new UsageError(`${where}: more than ${MAX_HEADER_FIELDS} request headers`);
    const field = scan.peek() === OPEN_OBJECT ? memberSpans(scan, ['name', 'value']) : (scan.skip(), {});
    const { name, value } = field;
    if (name === undefined || value === undefined || scan.kind(name) !== QUOTE || scan.kind(value) !== QUOTE)
      throw new UsageError(`${where}: a request header that is not {"name": text, "value": text}`);
    each(name, value);
  });
}

/** `request.headers` as a record: pseudo-headers left out, a repeated name (in any case) joined with `, `. */
function harHeaders(scan: JsonScan, list: Span, where: string): Record<string, string> {
  const headers: Record<string, string> = {};
  const names = new Map<string, string>();
  eachHeader(scan, list, where, (nameSpan, valueSpan) => {
    const name = scan.text(nameSpan);
    const value = scan.text(valueSpan);
    if (name.startsWith(':')) return;
    const seen = names.get(name.toLowerCase());
    if (seen !== undefined) headers[seen] += `, ${value}`;
    else {
      names.set(name.toLowerCase(), name);
      headers[name] = value;
    }
  });
  return headers;
}

/** Whether `postData.encoding` says base64 (else the text is the body); a UsageError for another coding. */
function isBase64(scan: JsonScan, encoding: Span | undefined, where: string): boolean {
  if (encoding === undefined) return false;
  const kind = scan.kind(encoding);
  const value = kind === OPEN_OBJECT || kind === OPEN_ARRAY ? undefined : scan.scalarValue(encoding);
  if (value === null || value === '') return false;
  if (value === 'base64') return true;
  throw new UsageError(
    `${where}: postData.encoding ${value === undefined ? 'is not text' : JSON.stringify(value)} is not one jobhook reads (base64, or none for text)`,
  );
}

/** The entry at `scan`'s position, when it is a POST with a body (`postData.text`); `scan` is left after it. */
function postEntry(scan: JsonScan, index: number, source: string, signature: string): PostEntry | undefined {
  const { request } = scan.peek() === OPEN_OBJECT ? memberSpans(scan, ['request']) : (scan.skip(), {});
  if (request === undefined || scan.kind(request) !== OPEN_OBJECT)
    throw new UsageError(`${source}: HAR entry ${index + 1} has no request object`);
  const after = scan.at;
  const { method, headers, postData } = memberSpans(scan.seek(request), ['method', 'headers', 'postData']);
  const post =
    method !== undefined &&
    scan.kind(method) === QUOTE &&
    method.end - method.start < 32 &&
    scan.text(method).toUpperCase() === 'POST';
  const data = post && postData !== undefined && scan.kind(postData) === OPEN_OBJECT;
  const { text, encoding } = data ? memberSpans(scan.seek(postData), ['text', 'encoding']) : {};
  let entry: PostEntry | undefined;
  if (text !== undefined && scan.kind(text) === QUOTE) {
    const where = `${source}: HAR entry ${index + 1}`;
    let signed = false;
    const lower = signature.toLowerCase();
    eachHeader(scan, headers, where, (name) => {
      signed ||= scan.text(name).toLowerCase() === lower;
    });
    entry = { index, headers, text, base64: isBase64(scan, encoding, where), signed };
  }
  scan.at = after;
  return entry;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The body bytes of an entry: its text in UTF-8, or its bytes when the tool wrote them as base64. */
function harBody(scan: JsonScan, entry: PostEntry, where: string): Uint8Array {
  const text = scan.text(entry.text);
  if (!entry.base64) return new TextEncoder().encode(text);
  const compact = text.replace(/\s+/g, '');
  if (!BASE64.test(compact) || compact.length % 4 === 1)
    throw new UsageError(`${where}: postData.text is not base64, as its encoding says`);
  return new Uint8Array(Buffer.from(compact, 'base64'));
}

/**
 * The deliveries of a HAR file whose `log.entries` is at `entries`: its POST entries with
 * a body (only those with the signature header, when some have it), each decoded when
 * asked for. The whole list is checked before the first one.
 */
export function* harDeliveries(
  scan: JsonScan,
  entries: Span,
  source: string,
  signatureHeader = DEFAULT_SIGNATURE_HEADER,
): Generator<HarDelivery> {
  const posts: PostEntry[] = [];
  scan.seek(entries).elements((index) => {
    const entry = postEntry(scan, index, source, signatureHeader);
    if (entry !== undefined) posts.push(entry);
  });
  if (posts.length === 0)
    throw new UsageError(`${source}: the HAR file holds no POST request with a body (request.postData.text)`);
  const chosen = posts.some((p) => p.signed) ? posts.filter((p) => p.signed) : posts;
  for (const entry of chosen) {
    const where = `${source}: HAR entry ${entry.index + 1}`;
    yield {
      index: entry.index,
      headers: harHeaders(scan, entry.headers, where),
      body: harBody(scan, entry, where),
    };
  }
}
