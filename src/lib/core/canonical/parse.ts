import { BodyMalformedError } from '../../base/errors.js';
import { JsonNumber, JsonObject, type JsonNode, type ParsedDocument } from './tree.js';
import { checkWellFormed, decodeUtf8, utf8ByteLength } from './utf8.js';
import { PYTHON_ESCAPED, quoteUtf8 } from './quote.js';
import { optionalNumber } from '../../base/options.js';
import { duplicateKey, invalidLiteral, MALFORMED, nestingTooDeep, unexpectedCharacter } from './reasons.js';

/** Default and highest accepted nesting limits. */
export const DEFAULT_MAX_DEPTH = 1000;
// Python senders cannot nest past ~1,000 (its recursion limit); 2,000 leaves the stack ample headroom.
export const MAX_MAX_DEPTH = 2_000;

export interface ParseOptions {
  /** Deepest nesting of arrays/objects accepted (default 1,000, at most 2,000). */
  maxDepth?: number;
}

const ESCAPES: Record<number, string> = {
  0x22: '"',
  0x5c: '\\',
  0x2f: '/',
  0x62: '\b',
  0x66: '\f',
  0x6e: '\n',
  0x72: '\r',
  0x74: '\t',
};

const KEY_CACHE_SIZE = 256;

/** Internal: a character position, converted to a byte offset only when an error is thrown. */
class ParseFailure {
  constructor(
    readonly reason: string,
    readonly index: number,
  ) {}
}

let runs = 0;

/**
 * How many times parseDocument() was called in this process (tests: the WebAssembly
 * engine reports its own errors and must not fall back to the JS parser).
 */
export function jsParserRuns(): number {
  return runs;
}

export function resolveMaxDepth(maxDepth: number | undefined): number {
  return optionalNumber(maxDepth, 'maxDepth', DEFAULT_MAX_DEPTH, { integer: true, max: MAX_MAX_DEPTH });
}

/**
 * Parses strict RFC 8259 JSON into the lossless tree. Throws `BodyMalformedError`
 * (with the UTF-8 byte offset) on any syntax error, invalid UTF-8, duplicate key
 * or nesting deeper than `maxDepth`. Recursion depth is bounded by `maxDepth`, so
 * hostile nesting cannot overflow the stack.
 */
export function parseDocument(body: string | Uint8Array, options?: ParseOptions): ParsedDocument {
  runs++;
  const maxDepth = resolveMaxDepth(options?.maxDepth);
  let text: string;
  if (typeof body === 'string') {
    checkWellFormed(body);
    text = body;
  } else if (body instanceof Uint8Array) {
    text = decodeUtf8(body);
  } else {
    throw notABody();
  }
  const parser = new Parser(text, maxDepth);
  try {
    const root = parser.parseDocument();
    return {
      root,
      text,
      loneSurrogate: parser.loneSurrogate,
      unsafeInteger: parser.unsafeInteger,
      nonFinite: parser.nonFinite,
      nonAscii: parser.nonAscii,
      dialectNumbers: parser.dialectNumbers,
      negativeZero: parser.negativeZero,
      layoutBytes: parser.layoutBytes,
    };
  } catch (err) {
    if (err instanceof ParseFailure)
      throw new BodyMalformedError(err.reason, utf8ByteLength(text, err.index));
    throw err;
  }
}

/** The TypeError for a body that is neither a string nor a Uint8Array. */
export function notABody(): TypeError {
  return new TypeError('body must be a string or a Uint8Array holding the raw request body');
}

class Parser {
  i = 0;
  loneSurrogate = false;
  unsafeInteger = false;
  nonFinite = false;
  nonAscii = false;
  dialectNumbers = false;
  negativeZero = false;
  layoutBytes = 0;
  readonly keys: Array<string | undefined> = new Array(KEY_CACHE_SIZE);

  constructor(
    readonly t: string,
    readonly maxDepth: number,
  ) {}

  parseDocument(): JsonNode {
    this.ws();
    const root = this.value(0);
    this.ws();
    if (this.i < this.t.length) this.fail(MALFORMED.trailingData);
    return root;
  }

  fail(reason: string, at = this.i): never {
    throw new ParseFailure(reason, at);
  }

  ws(): void {
    const t = this.t;
    let i = this.i;
    for (;;) {
      const c = t.charCodeAt(i);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
      else break;
    }
    this.i = i;
  }

  value(depth: number): JsonNode {
    const c = this.t.charCodeAt(this.i);
    switch (c) {
      case 0x22:
        return this.stringToken();
      case 0x7b:
        return this.object(depth + 1);
      case 0x5b:
        return this.array(depth + 1);
      case 0x74:
        return this.literal('true');
      case 0x66:
        return this.literal('false');
      case 0x6e:
        return this.literal('null');
      default:
        if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return this.number();
        if (Number.isNaN(c)) this.fail(MALFORMED.valueEnd);
        this.fail(unexpectedCharacter(c, 'a value'));
    }
  }

  literal(word: 'true' | 'false' | 'null'): string {
    if (!this.t.startsWith(word, this.i)) this.fail(invalidLiteral(word));
    this.i += word.length;
    return word;
  }

  /**
   * Scans a number token. Returns the token text when every dialect writes it as it
   * stands, else a JsonNumber for per-dialect formatting.
   */
  number(): JsonNode {
    const t = this.t;
    const start = this.i;
    let i = start;
    if (t.charCodeAt(i) === 0x2d) i++;
    const intStart = i;
    let c = t.charCodeAt(i);
    if (c === 0x30) {
      i++;
    } else if (c >= 0x31 && c <= 0x39) {
      do c = t.charCodeAt(++i);
      while (c >= 0x30 && c <= 0x39);
    } else {
      this.fail(MALFORMED.minusSign, i);
    }
    const intLen = i - intStart;
    c = t.charCodeAt(i);
    let fracStart = -1;
    let fracLen = 0;
    if (c === 0x2e) {
      fracStart = i + 1;
      c = t.charCodeAt(++i);
      if (!(c >= 0x30 && c <= 0x39)) this.fail(MALFORMED.decimalPoint, i);
      do c = t.charCodeAt(++i);
      while (c >= 0x30 && c <= 0x39);
      fracLen = i - fracStart;
    }
    let exponent = false;
    if (c === 0x65 || c === 0x45) {
      exponent = true;
      c = t.charCodeAt(++i);
      if (c === 0x2b || c === 0x2d) c = t.charCodeAt(++i);
      if (!(c >= 0x30 && c <= 0x39)) this.fail(MALFORMED.exponentMark, i);
      do c = t.charCodeAt(++i);
      while (c >= 0x30 && c <= 0x39);
    }
    this.i = i;
    const raw = t.slice(start, i);
    if (fracStart < 0 && !exponent) {
      // Integer. Up to 18 digits it fits orjson's 64-bit range; python writes any size as is.
      if (intLen > 15 && !Number.isSafeInteger(Number(raw))) this.unsafeInteger = true;
      if (intLen <= 18) {
        if (raw !== '-0') return raw;
        this.negativeZero = true;
        return '0';
      }
      this.dialectNumbers = true;
      // orjson reads it as a float (outside 64 bits); one that rounds to ±Infinity makes orjson fail.
      if (intLen > 308 && !Number.isFinite(Number(raw))) this.nonFinite = true;
      return new JsonNumber(raw, false);
    }
    if (!exponent && this.asWritten(intStart, intLen, fracStart, fracLen)) return raw;
    if (exponent || intLen + fracLen > 300) {
      if (!Number.isFinite(Number(raw))) this.nonFinite = true;
    }
    this.dialectNumbers = true;
    return new JsonNumber(raw, true);
  }

  /**
   * True when a fixed-notation float token is already its canonical text in every
   * dialect: at most 15 significant digits (so it is the shortest round-trip form),
   * no trailing zeros except a lone `.0`, and a decimal exponent in −4…15.
   */
  asWritten(intStart: number, intLen: number, fracStart: number, fracLen: number): boolean {
    const t = this.t;
    const last = t.charCodeAt(fracStart + fracLen - 1);
    if (last === 0x30 && fracLen !== 1) return false;
    if (t.charCodeAt(intStart) !== 0x30) {
      if (intLen > 15) return false;
      return last === 0x30 || intLen + fracLen <= 15;
    }
    if (last === 0x30) return true; // 0.0 and -0.0
    let z = 0;
    while (t.charCodeAt(fracStart + z) === 0x30) z++;
    return z <= 3 && fracLen - z <= 15;
  }

  /**
   * Index of the first character from `start` that ends a plain run (`"`, `\\`, a
   * control character or the end); notes non-ASCII on the way. A loop beats a
   * regex call on the short strings bodies are made of.
   */
  plainRun(start: number): number {
    const t = this.t;
    let j = start;
    let high = 0;
    for (;;) {
      const c = t.charCodeAt(j);
      // NaN (end of text) fails c >= 0x20 and stops the loop.
      if (!(c >= 0x20) || c === 0x22 || c === 0x5c) break;
      // Non-zero exactly when c >= U+007F (OR-ing the codes themselves would flag
      // ASCII pairs such as 'w' | 'O' = 0x7f and rescan most long strings).
      high |= (c + 1) >> 7;
      j++;
    }
    if (high !== 0) this.nonAscii = true;
    return j;
  }

  /** A string value as its quoted canonical token. */
  stringToken(): string {
    const t = this.t;
    const start = this.i + 1;
    const j = this.plainRun(start);
    if (t.charCodeAt(j) === 0x22) {
      this.i = j + 1;
      return t.slice(start - 1, j + 1);
    }
    const decoded = this.escaped(start, j);
    return quoteUtf8(decoded);
  }

  /** A key, decoded. Plain keys are interned: bodies repeat the same few keys many times. */
  key(): string {
    const t = this.t;
    const start = this.i + 1;
    const j = this.plainRun(start);
    if (t.charCodeAt(j) === 0x22) {
      this.i = j + 1;
      const len = j - start;
      const slot = (len * 31 + t.charCodeAt(start) * 7 + t.charCodeAt(j - 1)) & (KEY_CACHE_SIZE - 1);
      const cached = this.keys[slot];
      if (cached !== undefined && cached.length === len && t.startsWith(cached, start)) return cached;
      const key = t.slice(start, j);
      this.keys[slot] = key;
      return key;
    }
    return this.escaped(start, j);
  }

  /** Slow path of a string: decodes escapes from `j` on; `start` is after the opening quote. */
  escaped(start: number, j: number): string {
    const t = this.t;
    let out = t.slice(start, j);
    let escapedSurrogate = false;
    for (;;) {
      const c = t.charCodeAt(j);
      if (c === 0x22) break;
      if (c === 0x5c) {
        const e = t.charCodeAt(j + 1);
        if (e === 0x75) {
          const hex = t.slice(j + 2, j + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail(MALFORMED.unicodeEscape, j);
          const code = parseInt(hex, 16);
          if (code >= 0xd800 && code <= 0xdfff) escapedSurrogate = true;
          out += String.fromCharCode(code);
          j += 6;
        } else {
          const s = ESCAPES[e];
          if (s === undefined)
            this.fail(Number.isNaN(e) ? MALFORMED.unterminatedString : MALFORMED.invalidEscape, j);
          out += s;
          j += 2;
        }
      } else if (Number.isNaN(c)) {
        this.fail(MALFORMED.unterminatedString, start - 1);
      } else {
        this.fail(MALFORMED.controlCharacter, j);
      }
      const k = this.plainRun(j);
      if (k > j) {
        out += t.slice(j, k);
        j = k;
      }
    }
    this.i = j + 1;
    if (escapedSurrogate && !out.isWellFormed()) this.loneSurrogate = true;
    if (!this.nonAscii && PYTHON_ESCAPED.test(out)) this.nonAscii = true;
    return out;
  }

  array(depth: number): JsonNode[] {
    if (depth > this.maxDepth) this.fail(nestingTooDeep(this.maxDepth));
    const t = this.t;
    this.i++;
    this.ws();
    const items: JsonNode[] = [];
    if (t.charCodeAt(this.i) === 0x5d) {
      this.i++;
      return items;
    }
    for (;;) {
      items.push(this.value(depth));
      this.ws();
      const c = t.charCodeAt(this.i);
      if (c === 0x2c) {
        this.i++;
        this.ws();
      } else if (c === 0x5d) {
        this.i++;
        // Newline and indent before each item and before the closing bracket.
        this.layoutBytes += items.length * (1 + 2 * depth) + 2 * depth - 1;
        return items;
      } else {
        this.fail(Number.isNaN(c) ? MALFORMED.arrayEnd : unexpectedCharacter(c, "',' or ']'"));
      }
    }
  }

  object(depth: number): JsonObject {
    if (depth > this.maxDepth) this.fail(nestingTooDeep(this.maxDepth));
    const t = this.t;
    const start = this.i;
    this.i++;
    this.ws();
    const m: JsonNode[] = [];
    if (t.charCodeAt(this.i) === 0x7d) {
      this.i++;
      return new JsonObject(m);
    }
    let inOrder = true;
    let prev = '';
    for (;;) {
      if (t.charCodeAt(this.i) !== 0x22) {
        this.fail(this.i >= t.length ? MALFORMED.objectEnd : MALFORMED.stringKey);
      }
      const key = this.key();
      if (m.length > 0 && inOrder) {
        const d = compareKeys(prev, key);
        if (d === 0) this.duplicate(start, key, m.length >> 1);
        if (d > 0) inOrder = false;
      }
      prev = key;
      this.ws();
      if (t.charCodeAt(this.i) !== 0x3a) this.fail(MALFORMED.colon);
      this.i++;
      this.ws();
      m.push(key, this.value(depth));
      this.ws();
      const c = t.charCodeAt(this.i);
      if (c === 0x2c) {
        this.i++;
        this.ws();
      } else if (c === 0x7d) {
        this.i++;
        break;
      } else {
        this.fail(Number.isNaN(c) ? MALFORMED.objectEnd : unexpectedCharacter(c, "',' or '}'"));
      }
    }
    // Newline and indent before each member and the closing brace, and the space after each colon.
    this.layoutBytes += (m.length >> 1) * (2 + 2 * depth) + 2 * depth - 1;
    return new JsonObject(inOrder ? m : this.sorted(m, start));
  }

  /** Sorts members by key code point and rejects duplicate keys. */
  sorted(m: JsonNode[], start: number): JsonNode[] {
    const n = m.length >> 1;
    if (n <= 16) {
      // In-place insertion sort of the pairs: no allocation for the usual small objects.
      // An equal key is always met before a smaller one, so every duplicate is seen.
      for (let a = 2; a < m.length; a += 2) {
        const key = m[a] as string;
        const value = m[a + 1]!;
        let b = a - 2;
        for (; b >= 0; b -= 2) {
          const d = compareKeys(m[b] as string, key);
          if (d === 0) this.duplicate(start, key, a >> 1);
          if (d < 0) break;
          m[b + 2] = m[b]!;
          m[b + 3] = m[b + 1]!;
        }
        m[b + 2] = key;
        m[b + 3] = value;
      }
      return m;
    }
    const order = Array.from({ length: n }, (_, k) => k);
    order.sort((a, b) => compareKeys(m[2 * a] as string, m[2 * b] as string) || a - b);
    const out = new Array<JsonNode>(m.length);
    for (let k = 0; k < n; k++) {
      const from = order[k]!;
      out[2 * k] = m[2 * from]!;
      out[2 * k + 1] = m[2 * from + 1]!;
      if (k > 0 && out[2 * k] === out[2 * k - 2])
        this.duplicate(start, out[2 * k] as string, Math.max(from, order[k - 1]!));
    }
    return out;
  }

  /** Fails at the position of the `index`-th key of the object starting at `start` (error path only). */
  duplicate(start: number, key: string, index: number): never {
    const p = new Parser(this.t, this.maxDepth);
    p.i = start + 1;
    p.ws();
    for (let k = 0; k < index; k++) {
      p.key();
      p.ws();
      p.i++;
      p.ws();
      p.value(0);
      p.ws();
      p.i++;
      p.ws();
    }
    this.fail(duplicateKey(key), p.i);
  }
}

/**
 * Orders keys by Unicode code point (the UTF-8 byte order), not by UTF-16 unit as
 * `<` does: the two differ when a surrogate pair meets U+E000–U+FFFF.
 */
export function compareKeys(a: string, b: string): number {
  if (a === b) return 0;
  const n = a.length < b.length ? a.length : b.length;
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    if (x < 0xd800 || y < 0xd800) return x - y;
    // Compare whole code points; step back if we are inside a pair shared by both.
    const prev = i > 0 ? a.charCodeAt(i - 1) : 0;
    const at = prev >= 0xd800 && prev <= 0xdbff ? i - 1 : i;
    const d = a.codePointAt(at)! - b.codePointAt(at)!;
    // A lone high surrogate shared by both (python dialect only) is no pair: compare what follows it.
    return d !== 0 ? d : a.codePointAt(i)! - b.codePointAt(i)!;
  }
  return a.length - b.length;
}
