// String escapes shared by every dialect: " \ \b \t \n \f \r, other controls as \u00xx.
const NEEDS_ESCAPE_UTF8 = /["\\\u0000-\u001f]/;
const SHORT_ESCAPES: Record<number, string> = {
  0x22: '\\"',
  0x5c: '\\\\',
  0x08: '\\b',
  0x09: '\\t',
  0x0a: '\\n',
  0x0c: '\\f',
  0x0d: '\\r',
};
/** What Python's ensure_ascii escapes besides the shared escapes: U+007F and everything above, per UTF-16 unit. */
export const PYTHON_ESCAPED = /[\u007f-\uffff]/;
const PYTHON_ESCAPED_ALL = new RegExp(PYTHON_ESCAPED.source, 'g');

/** Quotes a decoded string as the UTF-8 dialects write it. */
export function quoteUtf8(s: string): string {
  if (!NEEDS_ESCAPE_UTF8.test(s)) return '"' + s + '"';
  let out = '"';
  let from = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c) {
      out += s.slice(from, i) + (SHORT_ESCAPES[c] ?? '\\u00' + (c < 0x10 ? '0' : '') + c.toString(16));
      from = i + 1;
    }
  }
  return out + s.slice(from) + '"';
}

function unicodeEscape(c: string): string {
  return '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0');
}

/** Turns a UTF-8-dialect token into the python (ensure_ascii) token: the other escapes are the same. */
export function asciiToken(token: string): string {
  return token.replace(PYTHON_ESCAPED_ALL, unicodeEscape);
}
