import { CanonicalUnrepresentableError } from '../errors.js';
import type { DialectName } from './dialects.js';
import { formatFloat } from './floats.js';
import { JsonNumber, JsonObject, type JsonNode, type ParsedDocument } from './tree.js';

const NEEDS_ESCAPE_UTF8 = /["\\\u0000-\u001f]/;
const NEEDS_ESCAPE_ASCII = /["\\\u0000-\u001f\u007f-\uffff]/;
const SHORT_ESCAPES: Record<number, string> = {
  0x22: '\\"',
  0x5c: '\\\\',
  0x08: '\\b',
  0x09: '\\t',
  0x0a: '\\n',
  0x0c: '\\f',
  0x0d: '\\r',
};

const INDENTS: string[] = ['\n'];
function indent(depth: number): string {
  let s = INDENTS[depth];
  if (s === undefined) {
    for (let d = INDENTS.length; d <= depth; d++) INDENTS[d] = INDENTS[d - 1] + '  ';
    s = INDENTS[depth]!;
  }
  return s;
}

// orjson holds integers as i64/u64; a token outside that range is read as a float.
const ORJSON_MIN = -(2n ** 63n);
const ORJSON_MAX = 2n ** 64n - 1n;

/**
 * Explains why the document has no canonical form in `dialect`, or returns undefined
 * when it has one. Cheap: uses the flags the parser collected.
 */
export function unrepresentableReason(doc: ParsedDocument, dialect: DialectName): string | undefined {
  if (doc.loneSurrogate && dialect !== 'python') {
    return `a string holds a lone surrogate escape, which the ${dialect} dialect cannot encode as UTF-8`;
  }
  if (doc.nonFinite && (dialect === 'orjson' || dialect === 'orjson-legacy')) {
    return `a number overflows to Infinity, which the ${dialect} dialect's parser rejects`;
  }
  return undefined;
}

/**
 * Serializes a parsed document in one dialect: sorted keys, 2-space indent, no
 * trailing newline. Throws `CanonicalUnrepresentableError` when the dialect
 * cannot write this document.
 */
export function serializeDocument(doc: ParsedDocument, dialect: DialectName): string {
  const reason = unrepresentableReason(doc, dialect);
  if (reason !== undefined) throw new CanonicalUnrepresentableError(`No canonical ${dialect} form: ${reason}.`);
  const w = new Writer(dialect);
  w.node(doc.root, 0);
  return w.out;
}

class Writer {
  out = '';
  readonly escape: RegExp;
  readonly ascii: boolean;
  readonly orjson: boolean;
  constructor(readonly dialect: DialectName) {
    this.ascii = dialect === 'python';
    this.orjson = dialect === 'orjson' || dialect === 'orjson-legacy';
    this.escape = this.ascii ? NEEDS_ESCAPE_ASCII : NEEDS_ESCAPE_UTF8;
  }

  node(n: JsonNode, depth: number): void {
    if (typeof n === 'string') {
      this.out += this.escape.test(n) ? quoteSlow(n, this.ascii) : '"' + n + '"';
    } else if (n instanceof JsonNumber) {
      this.out += this.number(n);
    } else if (n instanceof JsonObject) {
      const { keys, values } = n;
      if (keys.length === 0) {
        this.out += '{}';
        return;
      }
      const inner = indent(depth + 1);
      for (let k = 0; k < keys.length; k++) {
        const key = keys[k]!;
        this.out += (k === 0 ? '{' : ',') + inner + (this.escape.test(key) ? quoteSlow(key, this.ascii) : '"' + key + '"') + ': ';
        this.node(values[k]!, depth + 1);
      }
      this.out += indent(depth) + '}';
    } else if (Array.isArray(n)) {
      if (n.length === 0) {
        this.out += '[]';
        return;
      }
      const inner = indent(depth + 1);
      for (let k = 0; k < n.length; k++) {
        this.out += (k === 0 ? '[' : ',') + inner;
        this.node(n[k]!, depth + 1);
      }
      this.out += indent(depth) + ']';
    } else {
      this.out += n === null ? 'null' : n ? 'true' : 'false';
    }
  }

  number(n: JsonNumber): string {
    if (!n.isFloat) {
      if (!this.orjson || n.raw.length < 19) return n.raw;
      const big = BigInt(n.raw);
      if (big >= ORJSON_MIN && big <= ORJSON_MAX) return n.raw;
    }
    // Finite by construction for orjson (unrepresentableReason screened non-finite values).
    return formatFloat(Number(n.raw), this.dialect)!;
  }
}

function quoteSlow(s: string, ascii: boolean): string {
  let out = '"';
  let from = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    let rep: string | undefined;
    if (c < 0x20 || c === 0x22 || c === 0x5c) {
      rep = SHORT_ESCAPES[c] ?? '\\u00' + (c < 0x10 ? '0' : '') + c.toString(16);
    } else if (ascii && c >= 0x7f) {
      rep = '\\u' + c.toString(16).padStart(4, '0');
    } else {
      continue;
    }
    out += s.slice(from, i) + rep;
    from = i + 1;
  }
  return out + s.slice(from) + '"';
}
