import { CanonicalUnrepresentableError } from '../../base/errors.js';
import type { DialectName } from './dialects.js';
import { formatFloat } from './floats.js';
import { asciiToken, PYTHON_ESCAPED, quoteUtf8 } from './quote.js';
import { JsonNumber, JsonObject, type DocumentFlags, type JsonNode, type ParsedDocument } from './tree.js';

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
const ORJSON_MIN = '9223372036854775808'; // magnitude of -2^63
const ORJSON_MAX = '18446744073709551615'; // 2^64 - 1

/**
 * True when an integer token (no leading zeros) is within orjson's −2^63 … 2^64−1.
 * Compares digit strings: BigInt() of a huge token costs time quadratic in its length.
 */
export function inOrjsonIntegerRange(raw: string): boolean {
  const negative = raw.charCodeAt(0) === 0x2d;
  const digits = negative ? raw.slice(1) : raw;
  const bound = negative ? ORJSON_MIN : ORJSON_MAX;
  if (digits.length !== bound.length) return digits.length < bound.length;
  return digits <= bound;
}

/**
 * Explains why the document has no canonical form in `dialect`, or returns undefined
 * when it has one. Cheap: uses the flags the parser collected.
 */
export function unrepresentableReason(doc: DocumentFlags, dialect: DialectName): string | undefined {
  if (doc.loneSurrogate && dialect !== 'python') {
    return `a string holds a lone surrogate escape, which the ${dialect} dialect cannot encode as UTF-8`;
  }
  if (doc.nonFinite && (dialect === 'orjson' || dialect === 'orjson-legacy')) {
    return `a number overflows to Infinity, which the ${dialect} dialect's parser rejects`;
  }
  return undefined;
}

/**
 * True when the parser's flags prove that `a` and `b` write this document byte for
 * byte alike, so only one of them needs serializing. Without numbers whose text
 * depends on the dialect, the UTF-8 dialects coincide, and `python` joins them when
 * no string holds a character it escapes. False means "not proven", not "different".
 */
export function provablySame(doc: DocumentFlags, a: DialectName, b: DialectName): boolean {
  if (doc.dialectNumbers) return false;
  return (a === 'python') === (b === 'python') || !doc.nonAscii;
}

/**
 * Serializes a parsed document in one dialect: sorted keys, 2-space indent, no
 * trailing newline. Throws `CanonicalUnrepresentableError` when the dialect
 * cannot write this document.
 */
export function serializeDocument(doc: ParsedDocument, dialect: DialectName): string {
  let whole: string | undefined;
  let chunks: string[] | undefined;
  writeDocument(doc, dialect, (chunk) => {
    if (whole === undefined) whole = chunk;
    else (chunks ??= [whole]).push(chunk);
  });
  return chunks === undefined ? whole! : chunks.join('');
}

/**
 * Streams the canonical text of `doc` to `sink` in chunks of about 32 K characters
 * (the last, flagged `last`, may be shorter; a document gives at least one chunk), so it can be
 * hashed without holding all of it. Throws like {@link serializeDocument}.
 */
export function writeDocument(
  doc: ParsedDocument,
  dialect: DialectName,
  sink: (chunk: string, last: boolean) => void,
): void {
  const reason = unrepresentableReason(doc, dialect);
  if (reason !== undefined)
    throw new CanonicalUnrepresentableError(`No canonical ${dialect} form: ${reason}.`);
  const w = new Writer(dialect, doc.nonAscii && dialect === 'python', sink);
  w.node(doc.root, 0);
  sink(w.out, true);
}

// Output is flushed in flat chunks of about this many characters: a long rope of
// small pieces would survive into the old generation and make large bodies slow.
const CHUNK = 32 * 1024;

class Writer {
  out = '';
  readonly keys = new Map<string, string>();
  readonly orjson: boolean;
  constructor(
    readonly dialect: DialectName,
    /** Escape non-ASCII (python dialect, and only when the document has any). */
    readonly ascii: boolean,
    readonly sink: (chunk: string, last: boolean) => void,
  ) {
    this.orjson = dialect === 'orjson' || dialect === 'orjson-legacy';
  }

  flush(): void {
    // Reading a character flattens the rope, so the pieces become garbage while young.
    this.out.charCodeAt(0);
    this.sink(this.out, false);
    this.out = '';
  }

  node(n: JsonNode, depth: number): void {
    if (typeof n === 'string') {
      this.out += this.ascii && n.charCodeAt(0) === 0x22 && PYTHON_ESCAPED.test(n) ? asciiToken(n) : n;
    } else if (n instanceof JsonObject) {
      const m = n.m;
      if (m.length === 0) {
        this.out += '{}';
        return;
      }
      const inner = indent(depth + 1);
      for (let k = 0; k < m.length; k += 2) {
        this.out += (k === 0 ? '{' : ',') + inner + this.quoteKey(m[k] as string);
        this.node(m[k + 1]!, depth + 1);
        if (this.out.length > CHUNK) this.flush();
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
        if (this.out.length > CHUNK) this.flush();
      }
      this.out += indent(depth) + ']';
    } else {
      this.out += this.number(n);
    }
  }

  /** `"key": ` in this dialect, cached: keys repeat (and the parser interns them). */
  quoteKey(key: string): string {
    let q = this.keys.get(key);
    if (q === undefined) {
      const quoted = quoteUtf8(key);
      q = (this.ascii ? asciiToken(quoted) : quoted) + ': ';
      this.keys.set(key, q);
    }
    return q;
  }

  number(n: JsonNumber): string {
    if (!n.isFloat) {
      if (!this.orjson || inOrjsonIntegerRange(n.raw)) return n.raw;
    }
    // Finite by construction for orjson (unrepresentableReason screened non-finite values).
    return formatFloat(Number(n.raw), this.dialect)!;
  }
}
