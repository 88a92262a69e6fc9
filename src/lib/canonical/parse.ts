import { BodyMalformedError } from '../errors.js';
import { JsonNumber, JsonObject, type JsonNode, type ParsedDocument } from './tree.js';
import { checkWellFormed, decodeUtf8, utf8ByteLength } from './utf8.js';

/** Default and highest accepted nesting limits. */
export const DEFAULT_MAX_DEPTH = 1000;
// Python senders cannot nest past ~1,000 (its recursion limit); 2,000 leaves the stack ample headroom.
export const MAX_MAX_DEPTH = 2_000;

export interface ParseOptions {
  /** Deepest nesting of arrays/objects accepted (default 1,000, at most 2,000). */
  maxDepth?: number;
}

// A run of string characters that need no decoding: stops at `"`, `\` or a control character.
const PLAIN_RUN = /[^"\\\u0000-\u001f]*/y;

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

/** Internal: a character position, converted to a byte offset only when an error is thrown. */
class ParseFailure {
  constructor(
    readonly reason: string,
    readonly index: number,
  ) {}
}

export function resolveMaxDepth(maxDepth: number | undefined): number {
  if (maxDepth === undefined) return DEFAULT_MAX_DEPTH;
  if (!Number.isInteger(maxDepth) || maxDepth < 1 || maxDepth > MAX_MAX_DEPTH) {
    throw new TypeError(`maxDepth must be an integer from 1 to ${MAX_MAX_DEPTH}, got ${String(maxDepth)}`);
  }
  return maxDepth;
}

/**
 * Parses strict RFC 8259 JSON into the lossless tree. Throws `BodyMalformedError`
 * (with the UTF-8 byte offset) on any syntax error, invalid UTF-8, duplicate key
 * or nesting deeper than `maxDepth`. Iteration depth is bounded by `maxDepth`, so
 * hostile nesting cannot overflow the stack.
 */
export function parseDocument(body: string | Uint8Array, options?: ParseOptions): ParsedDocument {
  const maxDepth = resolveMaxDepth(options?.maxDepth);
  let text: string;
  if (typeof body === 'string') {
    checkWellFormed(body);
    text = body;
  } else if (body instanceof Uint8Array) {
    text = decodeUtf8(body);
  } else {
    throw new TypeError('body must be a string or a Uint8Array holding the raw request body');
  }
  const parser = new Parser(text, maxDepth);
  try {
    const root = parser.parseDocument();
    return {
      root,
      loneSurrogate: parser.loneSurrogate,
      unsafeInteger: parser.unsafeInteger,
      nonFinite: parser.nonFinite,
    };
  } catch (err) {
    if (err instanceof ParseFailure) throw new BodyMalformedError(err.reason, utf8ByteLength(text, err.index));
    throw err;
  }
}

class Parser {
  i = 0;
  loneSurrogate = false;
  unsafeInteger = false;
  nonFinite = false;

  constructor(
    readonly t: string,
    readonly maxDepth: number,
  ) {}

  parseDocument(): JsonNode {
    this.ws();
    const root = this.value(0);
    this.ws();
    if (this.i < this.t.length) this.fail('unexpected data after the JSON value');
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
    const t = this.t;
    const c = t.charCodeAt(this.i);
    switch (c) {
      case 0x22:
        return this.string();
      case 0x7b:
        return this.object(depth + 1);
      case 0x5b:
        return this.array(depth + 1);
      case 0x74:
        return this.literal('true', true);
      case 0x66:
        return this.literal('false', false);
      case 0x6e:
        return this.literal('null', null);
      default:
        if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return this.number();
        if (Number.isNaN(c)) this.fail('unexpected end of input, expected a value');
        this.fail(`unexpected ${describe(c)}, expected a value`);
    }
  }

  literal<T extends JsonNode>(word: string, result: T): T {
    if (!this.t.startsWith(word, this.i)) this.fail(`invalid literal, expected ${word}`);
    this.i += word.length;
    return result;
  }

  number(): JsonNumber {
    const t = this.t;
    const start = this.i;
    let i = start;
    let isFloat = false;
    if (t.charCodeAt(i) === 0x2d) i++;
    let c = t.charCodeAt(i);
    if (c === 0x30) {
      i++;
    } else if (c >= 0x31 && c <= 0x39) {
      do c = t.charCodeAt(++i);
      while (c >= 0x30 && c <= 0x39);
    } else {
      this.fail('invalid number: a digit must follow the minus sign', i);
    }
    c = t.charCodeAt(i);
    if (c === 0x2e) {
      isFloat = true;
      c = t.charCodeAt(++i);
      if (!(c >= 0x30 && c <= 0x39)) this.fail('invalid number: a digit must follow the decimal point', i);
      do c = t.charCodeAt(++i);
      while (c >= 0x30 && c <= 0x39);
    }
    if (c === 0x65 || c === 0x45) {
      isFloat = true;
      c = t.charCodeAt(++i);
      if (c === 0x2b || c === 0x2d) c = t.charCodeAt(++i);
      if (!(c >= 0x30 && c <= 0x39)) this.fail('invalid number: a digit must follow the exponent mark', i);
      do c = t.charCodeAt(++i);
      while (c >= 0x30 && c <= 0x39);
    }
    this.i = i;
    let raw = t.slice(start, i);
    if (isFloat) {
      if (i - start > 15 || raw.includes('e') || raw.includes('E')) {
        if (!Number.isFinite(Number(raw))) this.nonFinite = true;
      }
    } else if (raw === '-0') {
      raw = '0';
    } else if (i - start > 15 && !Number.isSafeInteger(Number(raw))) {
      this.unsafeInteger = true;
    }
    return new JsonNumber(raw, isFloat);
  }

  string(): string {
    const t = this.t;
    const start = this.i + 1;
    PLAIN_RUN.lastIndex = start;
    PLAIN_RUN.test(t);
    let j = PLAIN_RUN.lastIndex;
    if (t.charCodeAt(j) === 0x22) {
      this.i = j + 1;
      return t.slice(start, j);
    }
    // Slow path: escapes (or an error).
    let out = t.slice(start, j);
    let escapedSurrogate = false;
    for (;;) {
      const c = t.charCodeAt(j);
      if (c === 0x22) break;
      if (c === 0x5c) {
        const e = t.charCodeAt(j + 1);
        if (e === 0x75) {
          const hex = t.slice(j + 2, j + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail('invalid \\u escape: four hex digits expected', j);
          const code = parseInt(hex, 16);
          if (code >= 0xd800 && code <= 0xdfff) escapedSurrogate = true;
          out += String.fromCharCode(code);
          j += 6;
        } else {
          const s = ESCAPES[e];
          if (s === undefined) this.fail(Number.isNaN(e) ? 'unterminated string' : 'invalid escape in string', j);
          out += s;
          j += 2;
        }
      } else if (Number.isNaN(c)) {
        this.fail('unterminated string', start - 1);
      } else {
        this.fail('unescaped control character in string', j);
      }
      PLAIN_RUN.lastIndex = j;
      PLAIN_RUN.test(t);
      const k = PLAIN_RUN.lastIndex;
      if (k > j) {
        out += t.slice(j, k);
        j = k;
      }
    }
    this.i = j + 1;
    if (escapedSurrogate && !out.isWellFormed()) this.loneSurrogate = true;
    return out;
  }

  array(depth: number): JsonNode[] {
    if (depth > this.maxDepth) this.fail(`nesting deeper than the limit of ${this.maxDepth}`);
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
        return items;
      } else {
        this.fail(Number.isNaN(c) ? 'unexpected end of input in an array' : `unexpected ${describe(c)}, expected ',' or ']'`);
      }
    }
  }

  object(depth: number): JsonObject {
    if (depth > this.maxDepth) this.fail(`nesting deeper than the limit of ${this.maxDepth}`);
    const t = this.t;
    this.i++;
    this.ws();
    const keys: string[] = [];
    const values: JsonNode[] = [];
    const positions: number[] = [];
    if (t.charCodeAt(this.i) === 0x7d) {
      this.i++;
      return new JsonObject(keys, values);
    }
    for (;;) {
      if (t.charCodeAt(this.i) !== 0x22) {
        this.fail(this.i >= t.length ? 'unexpected end of input in an object' : 'expected a string key');
      }
      positions.push(this.i);
      keys.push(this.string());
      this.ws();
      if (t.charCodeAt(this.i) !== 0x3a) this.fail("expected ':' after an object key");
      this.i++;
      this.ws();
      values.push(this.value(depth));
      this.ws();
      const c = t.charCodeAt(this.i);
      if (c === 0x2c) {
        this.i++;
        this.ws();
      } else if (c === 0x7d) {
        this.i++;
        break;
      } else {
        this.fail(Number.isNaN(c) ? 'unexpected end of input in an object' : `unexpected ${describe(c)}, expected ',' or '}'`);
      }
    }
    return this.sorted(keys, values, positions);
  }

  /** Sorts members by code point (usually already sorted) and rejects duplicate keys. */
  sorted(keys: string[], values: JsonNode[], positions: number[]): JsonObject {
    const n = keys.length;
    let inOrder = true;
    for (let k = 1; k < n; k++) {
      const d = compareKeys(keys[k - 1]!, keys[k]!);
      if (d === 0) this.duplicate(keys, positions, k - 1, k);
      if (d > 0) {
        inOrder = false;
        break;
      }
    }
    if (inOrder) return new JsonObject(keys, values);
    const order = Array.from({ length: n }, (_, k) => k);
    order.sort((a, b) => compareKeys(keys[a]!, keys[b]!) || a - b);
    const sk = new Array<string>(n);
    const sv = new Array<JsonNode>(n);
    for (let k = 0; k < n; k++) {
      const o = order[k]!;
      sk[k] = keys[o]!;
      sv[k] = values[o]!;
      if (k > 0 && sk[k] === sk[k - 1]) this.duplicate(keys, positions, order[k - 1]!, o);
    }
    return new JsonObject(sk, sv);
  }

  duplicate(keys: string[], positions: number[], a: number, b: number): never {
    const later = Math.max(a, b);
    this.fail(`duplicate key ${JSON.stringify(keys[later])}`, positions[later]);
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
    return a.codePointAt(at)! - b.codePointAt(at)!;
  }
  return a.length - b.length;
}

function describe(c: number): string {
  if (c >= 0x21 && c <= 0x7e) return `character '${String.fromCharCode(c)}'`;
  return `character U+${c.toString(16).toUpperCase().padStart(4, '0')}`;
}
