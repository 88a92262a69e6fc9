import { BodyMalformedError } from '../../base/errors.js';
import { MALFORMED } from './reasons.js';

const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const encoder = new TextEncoder();

/**
 * Decodes strict UTF-8. A BOM is kept as U+FEFF (and so rejected by the parser),
 * invalid sequences (overlong forms, surrogates, truncation) are rejected with their byte offset.
 */
export function decodeUtf8(bytes: Uint8Array): string {
  try {
    return decoder.decode(bytes);
  } catch {
    throw new BodyMalformedError(MALFORMED.invalidUtf8, invalidUtf8Offset(bytes));
  }
}

/** Text given as a JS string must be well-formed UTF-16 (no raw lone surrogates), or it could not have come from UTF-8 bytes. */
export function checkWellFormed(text: string): void {
  if (text.isWellFormed()) return;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        i++;
        continue;
      }
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      throw new BodyMalformedError(MALFORMED.loneSurrogate, utf8ByteLength(text, i));
    }
  }
}

export function encodeUtf8(text: string): Uint8Array {
  return encoder.encode(text);
}

/** UTF-8 length of `text.slice(0, end)`; used for error offsets only. */
export function utf8ByteLength(text: string, end: number): number {
  let n = 0;
  for (let i = 0; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < end) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

/** Offset of the first byte that starts an invalid UTF-8 sequence (error path only). */
export function invalidUtf8Offset(b: Uint8Array): number {
  let i = 0;
  while (i < b.length) {
    const c = b[i]!;
    if (c < 0x80) {
      i++;
      continue;
    }
    let need: number;
    let min: number;
    if (c >= 0xc2 && c <= 0xdf) {
      need = 1;
      min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
      need = 2;
      min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
      need = 3;
      min = 0x10000;
    } else return i;
    if (i + need >= b.length) return i;
    let cp = c & (0x3f >> need);
    for (let k = 1; k <= need; k++) {
      const d = b[i + k];
      if (d === undefined || (d & 0xc0) !== 0x80) return i;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += need + 1;
  }
  return b.length;
}
