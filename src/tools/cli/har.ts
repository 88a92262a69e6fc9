import { DEFAULT_SIGNATURE_HEADER } from '../../index.js';
import { UsageError } from './io.js';

interface HarRequest {
  method?: unknown;
  headers?: unknown;
  postData?: { text?: unknown; encoding?: unknown };
}

/** A parsed JSON value that is a HAR file: `{ log: { entries: [...] } }`. */
export function isHar(v: unknown): v is { log: { entries: unknown[] } } {
  const log = typeof v === 'object' && v !== null ? (v as { log?: unknown }).log : undefined;
  return typeof log === 'object' && log !== null && Array.isArray((log as { entries?: unknown }).entries);
}

/** `request.headers` as a record: pseudo-headers left out, a repeated name (in any case) joined with `, `. */
function harHeaders(list: unknown, where: string): Record<string, string> {
  if (!Array.isArray(list))
    throw new UsageError(`${where}: request.headers is not a list of {"name","value"}`);
  const headers: Record<string, string> = {};
  const names = new Map<string, string>();
  for (const h of list as Array<{ name?: unknown; value?: unknown }>) {
    if (typeof h?.name !== 'string' || typeof h.value !== 'string')
      throw new UsageError(`${where}: a request header that is not {"name": text, "value": text}`);
    if (h.name.startsWith(':')) continue;
    const seen = names.get(h.name.toLowerCase());
    if (seen !== undefined) headers[seen] += `, ${h.value}`;
    else {
      names.set(h.name.toLowerCase(), h.name);
      headers[h.name] = h.value;
    }
  }
  return headers;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The body bytes of `postData`: its text in UTF-8, or its bytes when the tool wrote them as base64. */
function harBody(postData: { text?: unknown; encoding?: unknown }, where: string): Uint8Array {
  const text = postData.text as string;
  if (postData.encoding === undefined || postData.encoding === null || postData.encoding === '')
    return new TextEncoder().encode(text);
  if (postData.encoding !== 'base64')
    throw new UsageError(
      `${where}: postData.encoding ${JSON.stringify(postData.encoding)} is not one jobhook reads (base64, or none for text)`,
    );
  const compact = text.replace(/\s+/g, '');
  if (!BASE64.test(compact) || compact.length % 4 === 1)
    throw new UsageError(`${where}: postData.text is not base64, as its encoding says`);
  return new Uint8Array(Buffer.from(compact, 'base64'));
}

/** One delivery of a HAR file: its entry's position in `log.entries`, headers and body. */
export interface HarDelivery {
  index: number;
  headers: Record<string, string>;
  body: Uint8Array;
}

function hasHeader(c: HarDelivery, name: string): boolean {
  const lower = name.toLowerCase();
  return Object.keys(c.headers).some((k) => k.toLowerCase() === lower);
}

/** The deliveries of a HAR file: its POST entries with a body (only those with the signature header, when some have it). */
export function harDeliveries(
  har: { log: { entries: unknown[] } },
  source: string,
  signatureHeader = DEFAULT_SIGNATURE_HEADER,
): HarDelivery[] {
  const captures: HarDelivery[] = [];
  har.log.entries.forEach((entry, index) => {
    const request = (entry as { request?: HarRequest } | null)?.request;
    if (typeof request !== 'object' || request === null)
      throw new UsageError(`${source}: HAR entry ${index + 1} has no request object`);
    if (typeof request.method !== 'string' || request.method.toUpperCase() !== 'POST') return;
    if (typeof request.postData?.text !== 'string') return;
    const where = `${source}: HAR entry ${index + 1}`;
    captures.push({
      index,
      headers: harHeaders(request.headers, where),
      body: harBody(request.postData, where),
    });
  });
  if (captures.length === 0)
    throw new UsageError(`${source}: the HAR file holds no POST request with a body (request.postData.text)`);
  const signed = captures.filter((c) => hasHeader(c, signatureHeader));
  return signed.length > 0 ? signed : captures;
}
