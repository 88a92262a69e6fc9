/**
 * JSON captures read from their bytes (json-scan.ts): a capture object
 * `{ "headers": {…}, "body": "…" | "bodyBase64": "…" }`, or a HAR file. Only the members
 * a capture is made of are decoded; the rest of the document is checked, nesting at most
 * as deep as the verifier takes, and skipped.
 */
import { DEFAULT_MAX_DEPTH } from '../../lib/entries/tools-door.js';
import { harEntries, MAX_HEADER_FIELDS, memberSpans } from './har.js';
import { UsageError } from './io.js';
import { JsonScan, type Span } from './json-scan.js';

/** A request as a capture holds it. */
export interface CapturedRequest {
  headers: Record<string, string>;
  body: Uint8Array;
}

const TOP_MEMBERS = ['headers', 'body', 'bodyBase64', 'log'] as const;

/** A JSON document, checked whole, and what it holds. */
export type JsonDocument =
  | { kind: 'capture'; scan: JsonScan; spans: Partial<Record<(typeof TOP_MEMBERS)[number], Span>> }
  | { kind: 'har'; scan: JsonScan; entries: Span }
  | { kind: 'other' };

/**
 * The document in `bytes`: a capture object (`headers` an object, with `body` or
 * `bodyBase64`), a HAR file (`log.entries` a list), or another JSON value. Throws a
 * JsonScanError when it is not JSON or nests deeper than the verifier takes.
 */
export function scanDocument(bytes: Uint8Array): JsonDocument {
  const scan = new JsonScan(bytes, DEFAULT_MAX_DEPTH);
  if (scan.peek() !== 0x7b) {
    scan.skip();
    scan.end();
    return { kind: 'other' };
  }
  const spans = memberSpans(scan, TOP_MEMBERS);
  scan.end();
  const { headers, body, bodyBase64 } = spans;
  if (headers !== undefined && scan.kind(headers) === 0x7b && (body ?? bodyBase64) !== undefined)
    return { kind: 'capture', scan, spans };
  const entries = harEntries(scan, spans.log);
  return entries === undefined ? { kind: 'other' } : { kind: 'har', scan, entries };
}

/** A header's value as text: a string, a list of them joined with `, `, a number or a boolean written out. */
function headerValue(scan: JsonScan, name: string, where: string): string | undefined {
  const scalar = () => {
    const kind = scan.peek();
    if (kind === 0x7b || kind === 0x5b)
      throw new UsageError(`${where}: the header ${JSON.stringify(name)} holds an object, not text`);
    return scan.scalarValue(scan.skip());
  };
  if (scan.peek() !== 0x5b) {
    const value = scalar();
    return value === null ? undefined : String(value);
  }
  const parts: string[] = [];
  scan.elements(() => void parts.push(String(scalar())));
  return parts.join(', ');
}

/** The capture `document` holds; `where` names it in errors. */
export function captureOf(
  document: Extract<JsonDocument, { kind: 'capture' }>,
  where: string,
): CapturedRequest {
  const { scan, spans } = document;
  const headers: Record<string, string> = {};
  let count = 0;
  scan.seek(spans.headers!).members((name) => {
    if (++count > MAX_HEADER_FIELDS) throw new UsageError(`${where}: more than ${MAX_HEADER_FIELDS} headers`);
    const value = headerValue(scan, name, where);
    if (value !== undefined) headers[name] = value;
  });
  const text = (span: Span | undefined) =>
    span !== undefined && scan.kind(span) === 0x22 ? scan.text(span) : undefined;
  const base64 = text(spans.bodyBase64);
  if (base64 !== undefined) return { headers, body: new Uint8Array(Buffer.from(base64, 'base64')) };
  const body = text(spans.body);
  if (body === undefined) throw new UsageError(`${where}: a capture needs "body" (text) or "bodyBase64"`);
  return { headers, body: new TextEncoder().encode(body) };
}
