/**
 * Text a sender chose (header values and names, JSON keys, dates from a body), made safe
 * to put in a log line, an `onDelivery` record or an answer: cut to MAX_QUOTED characters
 * and with every character a terminal or a log viewer acts on written visibly. C0 (line
 * breaks and escape sequences included), DEL, C1 (U+009B is an 8-bit CSI, U+0085 a line
 * break), the bidirectional marks, embeddings, overrides and isolates that reorder what
 * is shown (Trojan Source), and the Unicode line and paragraph separators.
 */

/** The most characters of a sender's text quoted anywhere. */
export const MAX_QUOTED = 200;

const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
const UNSAFE_ALL = new RegExp(UNSAFE.source, 'g');

const hex = (c: string, digits: number) => c.charCodeAt(0).toString(16).padStart(digits, '0');

/** `text` with each unsafe character written visibly (`\x1b`, `\x7f`, `\u009b`, `\u202e`); the same string when it has none. */
export function escapeControls(text: string): string {
  if (!UNSAFE.test(text)) return text;
  return text.replace(UNSAFE_ALL, (c) => (c < '\u0080' ? `\\x${hex(c, 2)}` : `\\u${hex(c, 4)}`));
}

/** At most `max` characters of `text` (a surrogate pair never split), then how many were left out. */
export function cut(text: string, max = MAX_QUOTED): string {
  if (text.length <= max) return text;
  let end = max;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${text.slice(0, end)}… (${text.length - end} more characters)`;
}

/** A sender's text, quoted for a message: cut, escaped, between double quotes. */
export function quoted(text: string, max = MAX_QUOTED): string {
  const shown = escapeControls(cut(text, max)).replace(/"/g, '\\"');
  return `"${shown}"`;
}

/** The most characters of one log message or answer message (jobhook's own text, with any quoted parts). */
export const MAX_MESSAGE = 2_000;

/** A whole message made safe: escaped, and cut at MAX_MESSAGE (a bound beside the quoting at each source). */
export function safeMessage(text: string): string {
  return escapeControls(cut(text, MAX_MESSAGE));
}
