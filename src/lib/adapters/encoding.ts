import { EncodingUnsupportedError } from '../base/errors.js';
import { getHeader, type HeadersInput } from '../core/verify/headers.js';

/** The content codings jobhook decodes. */
export type ContentCoding = 'identity' | 'gzip' | 'deflate' | 'br';

/**
 * The request's Content-Encoding: identity when absent, gzip, deflate or br; anything
 * else (or several codings stacked) is ENCODING_UNSUPPORTED (415): a 400 would end the
 * gateway's retries over a body it may well send differently.
 */
export function contentCoding(headers: HeadersInput): ContentCoding {
  const raw = getHeader(headers, 'content-encoding');
  if (raw === undefined) return 'identity';
  const codings = raw
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  if (codings.length === 0) return 'identity';
  const [only] = codings;
  if (codings.length === 1) {
    if (only === 'gzip' || only === 'x-gzip') return 'gzip';
    if (only === 'deflate' || only === 'br') return only;
  }
  throw new EncodingUnsupportedError(`Content-Encoding ${JSON.stringify(raw)} is not supported; send the body as is, or gzip, deflate or br.`);
}
