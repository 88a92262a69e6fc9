import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DIALECTS, type DialectName } from '../../../src/lib/core/canonical/dialects.js';
import { BodyMalformedError } from '../../../src/lib/base/errors.js';
import { canonicalize, canonicalizeToBytes } from '../../../src/index.js';
import { jsParserRuns, parseDocument } from '../../../src/lib/core/canonical/parse.js';
import { loadWasmEngine } from '../../../src/lib/core/canonical/wasm/lazy.js';
import { serializeDocument } from '../../../src/lib/core/canonical/serialize.js';
import type { ParsedDocument } from '../../../src/lib/core/canonical/tree.js';
import {
  wasmEngine,
  wasmHeapBytes,
  type DocumentFlags,
  type WasmDocument,
  type WasmEngine,
} from '../../../src/lib/core/canonical/wasm/engine.js';
import { fixture, readFixture, readFixtureBytes } from '../../helpers/paths.js';

/*
 * The WebAssembly engine (native/canonical.c) against the JS engine, the oracle:
 * for every input the same accept/reject decision and the same error (class, code,
 * offset, message); for accepted inputs the same flags and the same bytes in every
 * dialect (or the same CanonicalUnrepresentableError).
 */

const engine = wasmEngine();
const FLAG_NAMES = [
  'loneSurrogate',
  'unsafeInteger',
  'nonFinite',
  'nonAscii',
  'dialectNumbers',
  'negativeZero',
  'layoutBytes',
] as const;
const encoder = new TextEncoder();

function describeError(err: unknown): string {
  if (!(err instanceof Error)) return `non-error ${String(err)}`;
  const e = err as Error & { code?: string; offset?: number };
  return `${e.constructor.name} ${e.code ?? '-'} ${e.offset ?? '-'} ${e.message}`;
}

type Outcome = { error: string } | { flags: Record<string, unknown>; out: Array<Uint8Array | string> };

function jsOutcome(body: string | Uint8Array, maxDepth: number): Outcome {
  let doc: ParsedDocument;
  try {
    doc = parseDocument(body, { maxDepth });
  } catch (err) {
    return { error: describeError(err) };
  }
  const flags: Record<string, unknown> = {};
  for (const f of FLAG_NAMES) flags[f] = doc[f];
  const out = DIALECTS.map((d) => {
    try {
      return encoder.encode(serializeDocument(doc, d));
    } catch (err) {
      return describeError(err);
    }
  });
  return { flags, out };
}

function wasmOutcome(wasm: WasmEngine, body: string | Uint8Array, maxDepth: number): Outcome {
  let doc;
  try {
    doc = wasm.parse(body, { maxDepth });
  } catch (err) {
    return { error: describeError(err) };
  }
  try {
    const flags: Record<string, unknown> = {};
    for (const f of FLAG_NAMES) flags[f] = doc.flags[f as keyof DocumentFlags];
    const out = DIALECTS.map((d) => {
      try {
        return doc.bytes(d);
      } catch (err) {
        return describeError(err);
      }
    });
    return { flags, out };
  } finally {
    doc.dispose();
  }
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(
    Buffer.from(b.buffer, b.byteOffset, b.byteLength),
  );
}

/** What differs between the engines on `body` (undefined: nothing), and whether the JS engine accepts it. */
function difference(
  wasm: WasmEngine,
  body: string | Uint8Array,
  maxDepth: number,
  seen: Record<string, number>,
): { diff: string | undefined; accepted: boolean; error?: string } {
  const js = jsOutcome(body, maxDepth);
  const w = wasmOutcome(wasm, body, maxDepth);
  const accepted = !('error' in js);
  if (!('error' in js)) {
    for (const f of FLAG_NAMES) if (js.flags[f] === true) seen[f] = (seen[f] ?? 0) + 1;
  }
  if ('error' in js || 'error' in w) {
    const a = 'error' in js ? js.error : 'accepted';
    const b = 'error' in w ? w.error : 'accepted';
    return {
      diff: a === b ? undefined : `js: ${a}\nwasm: ${b}`,
      accepted,
      error: 'error' in js ? js.error : undefined,
    };
  }
  for (const f of FLAG_NAMES) {
    if (js.flags[f] !== w.flags[f])
      return { diff: `flag ${f}: js ${String(js.flags[f])}, wasm ${String(w.flags[f])}`, accepted };
  }
  for (let k = 0; k < DIALECTS.length; k++) {
    const a = js.out[k]!;
    const b = w.out[k]!;
    const same = typeof a === 'string' || typeof b === 'string' ? a === b : sameBytes(a, b);
    if (!same) return { diff: `${DIALECTS[k]}: js ${show(a)}\nwasm ${show(b)}`, accepted };
  }
  return { diff: undefined, accepted };
}

function show(x: Uint8Array | string): string {
  return typeof x === 'string' ? x : JSON.stringify(Buffer.from(x).toString('utf8').slice(0, 400));
}

function label(body: string | Uint8Array): string {
  return typeof body === 'string'
    ? `string ${JSON.stringify(body.slice(0, 300))}`
    : `bytes ${Buffer.from(body).toString('hex').slice(0, 600)}`;
}

/**
 * Runs bodies through both engines: the differences (at most 10 described), how many
 * were accepted and rejected, how many accepted documents raised each flag, and how
 * many rejected ones had each reason (reasonOf), per kind of input ("bytes: …", "string: …").
 */
function compareAll(
  wasm: WasmEngine,
  bodies: Iterable<[string | Uint8Array, number]>,
): {
  failures: string[];
  accepted: number;
  rejected: number;
  seen: Record<string, number>;
  reasons: Record<string, number>;
} {
  const failures: string[] = [];
  const seen: Record<string, number> = {};
  const reasons: Record<string, number> = {};
  let accepted = 0;
  let rejected = 0;
  // Errors are compared by class, code, offset and message; capturing stacks would only double the time.
  const stackTraceLimit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    for (const [body, maxDepth] of bodies) {
      const r = difference(wasm, body, maxDepth, seen);
      if (r.diff !== undefined) {
        if (failures.length < 10) failures.push(`${label(body)} (maxDepth ${maxDepth})\n${r.diff}`);
      } else if (r.accepted) {
        accepted++;
      } else {
        rejected++;
        const key = `${typeof body === 'string' ? 'string' : 'bytes'}: ${reasonOf(r.error ?? '')}`;
        reasons[key] = (reasons[key] ?? 0) + 1;
      }
    }
  } finally {
    Error.stackTraceLimit = stackTraceLimit;
  }
  return { failures, accepted, rejected, seen, reasons };
}

// ---------------------------------------------------------------------------------
// A seeded generator of JSON text aimed at the canonical rules' edges.
// ---------------------------------------------------------------------------------

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NUMBERS = [
  // the orjson (1e-5 / 1e16) and repr (1e-4 / 1e16) layout boundaries
  '1e-5',
  '1e-6',
  '0.00001',
  '0.000001',
  '0.0001',
  '1e-4',
  '0.00012345',
  '9.999999999999999e-6',
  '1.5e-5',
  '1.5e-7',
  '1e15',
  '1e16',
  '1e+16',
  '1E16',
  '1e015',
  '1e+015',
  '1E+0016',
  '999999999999999.9',
  '1000000000000000.0',
  '9999999999999998.0',
  '10000000000000000.0',
  '1e-05',
  '1E-0005',
  '123456789012345678.0',
  // extremes
  '5e-324',
  '4.9e-324',
  '2.5e-324',
  '2.4e-324',
  '1e-400',
  '2.2250738585072014e-308',
  '1.7976931348623157e308',
  '1.7976931348623158e308',
  '1.7976931348623159e308',
  '1e308',
  '9.9e307',
  '1e309',
  '-1e309',
  '2e308',
  '1E400',
  '0.1e310',
  '0.01e310',
  '10e307',
  '100e306',
  // zeros and integral floats
  '0.0',
  '-0.0',
  '1.0',
  '-1.0',
  '0e0',
  '-0e-0',
  '0E+00',
  '0.0e5',
  '0.000',
  '1.00',
  '10.0',
  '100.0',
  '250.0',
  '-3.0',
  '0e999999999999',
  '1e-999999999999',
  // digit counts around 15 and 17
  '0.1',
  '0.10',
  '0.5',
  '0.30000000000000004',
  '0.1234567890123456789',
  '123456789012345.6',
  '1234567890123456.7',
  '12345678901234567.0',
  '1.2345678901234567e-7',
  '0.9912345678901234',
  '0.000123456789012345',
  '0.0000123456789012345',
  '123456789012345.0',
  '1234567890123456.0',
  '0.123456789012345',
  '0.1234567890123456',
  '100000000000000.5',
  // integers around 2^53, 2^63, 2^64 and orjson's range
  '0',
  '-0',
  '1',
  '-1',
  '9007199254740991',
  '9007199254740992',
  '9007199254740993',
  '-9007199254740991',
  '-9007199254740992',
  '999999999999999',
  '1000000000000000',
  '9999999999999999',
  '999999999999999999',
  '1000000000000000000',
  '-999999999999999999',
  '9223372036854775807',
  '9223372036854775808',
  '-9223372036854775808',
  '-9223372036854775809',
  '18446744073709551615',
  '18446744073709551616',
  '-18446744073709551615',
  '99999999999999999999',
  '100000000000000000000',
  '-100000000000000000000',
  '12345678901234567890123',
  // 300+ digit integers and floats (orjson overflow)
  '1' + '0'.repeat(308),
  '1' + '0'.repeat(309),
  '-1' + '0'.repeat(309),
  '9'.repeat(309),
  '17976931348623157' + '0'.repeat(292),
  '17976931348623158' + '0'.repeat(292),
  '17976931348623159' + '0'.repeat(292),
  '1' + '0'.repeat(400),
  '1' + '0'.repeat(300) + '.5',
  '0.' + '0'.repeat(320) + '1',
  '1.' + '0'.repeat(305),
  '9'.repeat(309) + '.0',
];

// Raw (already valid JSON) pieces of string content.
const STRING_PIECES = [
  'a',
  'abc',
  'Hello, world',
  '/',
  'a/b',
  '0',
  ' ',
  'x'.repeat(17),
  'The quick brown fox jumps over the lazy dog',
  'é',
  'ü',
  'Müller',
  '東京',
  '😀',
  '\u007f',
  '\u2028',
  '\u2029',
  '\ufeff',
  '\ue000',
  '\uffff',
  '\u{10ffff}',
  '\u0080',
  '\u07ff',
  '\u0800',
  '\u{1d11e}',
  '\\"',
  '\\\\',
  '\\/',
  '\\b',
  '\\f',
  '\\n',
  '\\r',
  '\\t',
  '\\u0000',
  '\\u001f',
  '\\u001F',
  '\\u0020',
  '\\u0022',
  '\\u005c',
  '\\u005C',
  '\\u002f',
  '\\u007e',
  '\\u007f',
  '\\u0080',
  '\\u00e9',
  '\\u00E9',
  '\\u2028',
  '\\uffff',
  '\\uFFFF',
  '\\ue000',
  '\\ufffe',
  '\\u0008',
  '\\u000b',
  '\\u000c',
  '\\ud83d\\ude00',
  '\\uD83D\\uDE00',
  '\\udbff\\udfff',
  '\\ud800\\udc00',
  '\\ud800',
  '\\udc00',
  '\\udbff',
  '\\ud800\\ud800',
  '\\udc00\\ud800',
  '\\ud83dx',
  '\\ud83d\\n',
];

const KEYS = [
  '"a"',
  '"\\u0061"',
  '"b"',
  '"A"',
  '"aa"',
  '"10"',
  '"2"',
  '"1"',
  '"01"',
  '"é"',
  '"\\u00e9"',
  '"e\\u0301"',
  '"\ue000"',
  '"\\ue000"',
  '"😀"',
  '"\\ud83d\\ude00"',
  '"\\uD83D\\uDE00"',
  '"\uffff"',
  '""',
  '"a\\u0000"',
  '"a\\u0000b"',
  '"\\u0000"',
  '"a b"',
  '"text"',
  '"confidence"',
  '"bounding_box"',
  '"\\ud800"',
  '"\\udc00"',
  '"\\ud800\\ud800"',
  '"\\/"',
  '"/"',
  '"\u007f"',
  '"~"',
  '"\\t"',
  '"\u{10ffff}"',
  '"\\udbff\\udfff"',
];

const WHITESPACE = [' ', '\n', '\r\n', '\t', '  ', '\n    ', ' \t\r\n'];
const MUTATION_BYTES = [
  0x22, 0x5c, 0x2c, 0x5d, 0x7d, 0x7b, 0x5b, 0x3a, 0x00, 0x1f, 0x7f, 0x80, 0xbf, 0xc0, 0xc3, 0xed, 0xef, 0xf4,
  0xf5, 0xff, 0x30, 0x31, 0x65, 0x2e, 0x2d, 0x2b, 0x20, 0x75, 0x61,
];

class Gen {
  constructor(readonly r: () => number) {}
  int(n: number): number {
    return Math.floor(this.r() * n);
  }
  pick<T>(a: readonly T[]): T {
    return a[this.int(a.length)]!;
  }
  ws(): string {
    return this.r() < 0.75 ? '' : this.pick(WHITESPACE);
  }
  digits(n: number, first = false): string {
    let s = first ? String(1 + this.int(9)) : '';
    while (s.length < n) s += String(this.int(10));
    return s;
  }
  number(): string {
    if (this.r() < 0.5) {
      const n = this.pick(NUMBERS);
      // the 300-digit ones are a few of many; keep documents small
      return n.length < 30 || this.r() < 0.2 ? n : this.pick(NUMBERS.slice(0, 20));
    }
    let s = this.r() < 0.3 ? '-' : '';
    const k = this.r();
    s += k < 0.3 ? '0' : this.digits(k < 0.99 ? 1 + this.int(20) : 300 + this.int(15), true);
    if (this.r() < 0.6)
      s += '.' + (this.r() < 0.3 ? '0'.repeat(this.int(8)) : '') + this.digits(1 + this.int(18));
    if (this.r() < 0.4) {
      s +=
        this.pick(['e', 'E']) + this.pick(['', '+', '-']) + '0'.repeat(this.r() < 0.2 ? 1 + this.int(3) : 0);
      s += String(this.r() < 0.9 ? this.int(30) : this.int(400));
    }
    return s;
  }
  string(): string {
    let s = '"';
    const n = this.int(7);
    for (let i = 0; i < n; i++) s += this.r() < 0.03 ? 'b'.repeat(this.int(100)) : this.pick(STRING_PIECES);
    return s + '"';
  }
  key(): string {
    // Keys after a lone high surrogate included: the JS engine once took two of them for duplicates.
    return this.r() < 0.5 ? this.pick(KEYS) : this.string();
  }
  value(depth: number): string {
    const k = this.r();
    if (depth >= 4 || k < 0.55) {
      const s = this.r();
      if (s < 0.45) return this.number();
      if (s < 0.9) return this.string();
      return this.pick(['true', 'false', 'null']);
    }
    const n = this.int(this.r() < 0.97 ? 6 : 40);
    const items: string[] = [];
    if (k < 0.75) {
      for (let i = 0; i < n; i++) items.push(this.ws() + this.value(depth + 1) + this.ws());
      return '[' + this.ws() + items.join(',') + ']';
    }
    for (let i = 0; i < n; i++)
      items.push(this.ws() + this.key() + this.ws() + ':' + this.ws() + this.value(depth + 1) + this.ws());
    return '{' + this.ws() + items.join(',') + '}';
  }
  /** Containers nested `depth` deep (a mix of arrays and objects). */
  nested(depth: number): string {
    let open = '';
    let close = '';
    for (let d = 0; d < depth; d++) {
      if (this.r() < 0.5) {
        open += '[' + this.ws();
        close = this.ws() + ']' + close;
      } else {
        open += '{' + this.pick(KEYS) + ':';
        close = '}' + close;
      }
    }
    return open + (this.r() < 0.5 ? this.value(5) : '[]') + close;
  }
  /** A document, its maxDepth, and whether to give it as bytes. */
  document(): [string | Uint8Array, number] {
    let maxDepth = 1000;
    let text: string;
    const k = this.r();
    if (k < 0.05) {
      maxDepth = 1 + this.int(8);
      text = this.nested(maxDepth - 1 + this.int(3));
    } else {
      text = this.ws() + this.value(0) + this.ws();
      if (this.r() < 0.1) maxDepth = 1 + this.int(6);
    }
    const m = this.r();
    if (m < 0.25) return [this.mutate(encoder.encode(text)), maxDepth];
    if (m < 0.26) {
      // a raw lone surrogate in a JS string body
      const at = this.int(text.length + 1);
      return [text.slice(0, at) + this.pick(['\ud800', '\udfff']) + text.slice(at), maxDepth];
    }
    return [this.r() < 0.5 ? text : encoder.encode(text), maxDepth];
  }
  mutate(b: Uint8Array): Uint8Array {
    const at = this.int(b.length + 1);
    switch (this.int(5)) {
      case 0:
        return b.slice(0, at);
      case 1: {
        const c = b.slice();
        if (at < c.length) c[at] = this.r() < 0.7 ? this.pick(MUTATION_BYTES) : this.int(256);
        return c;
      }
      case 2:
        return Buffer.concat([b.subarray(0, at), b.subarray(at + 1)]);
      case 3:
        return Buffer.concat([b.subarray(0, at), Uint8Array.of(this.pick(MUTATION_BYTES)), b.subarray(at)]);
      default: {
        const c = b.slice();
        if (at < c.length) c[at] = c[at]! ^ (1 << this.int(8));
        return c;
      }
    }
  }
}

/** Where a fault is planted: the state the parser is in when it meets it. */
const FAULTS = [
  'utf8',
  'value-end',
  'value-char',
  'literal',
  'minus',
  'point',
  'exponent',
  'hex',
  'unterminated',
  'escape',
  'control',
  'depth',
  'array-separator',
  'object-separator',
  'key',
  'colon',
  'duplicate',
  'trailing',
] as const;
type Fault = (typeof FAULTS)[number];

// What may stand where a value is expected but none starts (and the JS parser names the character).
const NOT_A_VALUE = [
  '}',
  ']',
  ',',
  ':',
  'x',
  '+',
  '.',
  'e',
  'é',
  '😀',
  '\u2028',
  '\ufeff',
  '\u0000',
  '\u001f',
  '\u007f',
  "'",
  '\\',
  '/',
  '#',
  '\u00a0',
];
const BAD_SEPARATORS = [' 1', '"x"', ':', ' }', ' ]', 'é', '😀', '\u0000', '\u00a0', 'x', ';', '\ufeff'];
// Keys from a small set, so that objects repeat some of them (in order, out of order, as escapes).
const FEW_KEYS = [
  '"a"',
  '"b"',
  '"c"',
  '"\\u0061"',
  '"\\u0062"',
  '"é"',
  '"\\u00e9"',
  '"😀"',
  '"\\ud83d\\ude00"',
  '"\\ud800"',
  '""',
  '"a\\u0000"',
];
const INVALID_UTF8 = [
  [0x80],
  [0xbf],
  [0xc0, 0x80],
  [0xc3],
  [0xc3, 0x28],
  [0xe0, 0x80, 0x80],
  [0xed, 0xa0, 0x80],
  [0xef, 0xbf],
  [0xf0, 0x8f, 0xbf, 0xbf],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf5],
  [0xff],
  [0xfe],
];

/**
 * Malformed documents with a fault planted in every state of the parser (inside
 * open arrays and objects, after members whose keys may repeat), then the rest of
 * the document cut off, completed, or completed with more faults after the first
 * (invalid UTF-8, duplicate keys, syntax errors): the first in the JS parser's order
 * is the error.
 */
class FaultGen extends Gen {
  fewKey(): string {
    return this.r() < 0.6 ? this.pick(FEW_KEYS) : this.key();
  }
  small(): string {
    return this.r() < 0.8 ? this.value(3) : this.value(0);
  }
  /** An object whose keys repeat: few or many members (insertion sort or a stable sort in parse.ts), in order or not. */
  duplicates(depth = 0): string {
    const n = this.r() < 0.6 ? 2 + this.int(8) : 15 + this.int(30);
    const keys: string[] = [];
    for (let i = 0; i < n; i++) keys.push(this.r() < 0.3 ? `"k${this.int(n * 2)}"` : this.fewKey());
    if (this.r() < 0.3) keys.sort();
    const members = keys.map(
      (k) =>
        `${this.ws()}${k}${this.ws()}:${this.ws()}${depth < 2 && this.r() < 0.05 ? this.duplicates(depth + 1) : this.small()}`,
    );
    return `{${members.join(',')}}`;
  }
  /** The planted fault, at a value position (or for trailing data, after the document). */
  fault(kind: Fault, depth: number): { text: string; maxDepth?: number; bytes?: number[]; stop?: boolean } {
    switch (kind) {
      case 'utf8':
        return { text: this.r() < 0.5 ? '"ab' : '', bytes: this.pick(INVALID_UTF8) };
      case 'value-end':
        return { text: this.ws(), stop: true };
      case 'value-char':
        return { text: this.pick(NOT_A_VALUE) };
      case 'literal':
        return {
          text: this.pick(['tru', 'fals', 'nul', 'trUe', 'nulL', 'f', 't', 'n', 'fa1se', 'True', 'nan']),
        };
      case 'minus':
        return { text: this.pick(['-', '-x', '-.5', '--1', '- 1', '-e1', '-]']), stop: this.r() < 0.2 };
      case 'point':
        return { text: this.pick(['1.', '1.e5', '0.x', '-2.]', '12.,', '0.', '-0.-']), stop: this.r() < 0.2 };
      case 'exponent':
        return {
          text: this.pick(['1e', '1E+', '2.5e-x', '0e', '1ee1', '-0.5E', '3e+-1']),
          stop: this.r() < 0.2,
        };
      case 'hex':
        return {
          text: this.pick(['"ab\\u12g4"', '"\\u00e"', '"x\\uD83D\\u12"', '"\\u', '"é\\uzzzz"', '"\\n\\u00"']),
          stop: this.r() < 0.3,
        };
      case 'unterminated':
        return { text: this.pick(['"abc', '"', '"é😀', '"a\\n', '"a\\', '"\\u00e9', '"x\\"']), stop: true };
      case 'escape':
        return {
          text: this.pick(['"a\\x"', '"\\a"', '"\\é"', '"\\ "', '"\\U0041"', '"\\\u0000"', '"é\\\'"']),
        };
      case 'control':
        return {
          text: this.pick([
            '"a\u0001b"',
            '"\t"',
            '"\n"',
            '"é\u001f"',
            '"\\n\u0000"',
            '"x\r"',
            '"\\u00e9\u0008"',
          ]),
        };
      case 'depth': {
        const extra = 1 + this.int(3);
        const open = Array.from({ length: extra + 1 }, () => (this.r() < 0.5 ? '[' : '{"a":')).join('');
        return { text: open, maxDepth: depth + extra };
      }
      case 'array-separator':
        return {
          text: `[${this.ws()}${this.small()}${this.r() < 0.3 ? '' : this.pick(BAD_SEPARATORS)}`,
          stop: this.r() < 0.3,
        };
      case 'object-separator':
        return {
          text: `{${this.fewKey()}:${this.small()}${this.r() < 0.3 ? '' : this.pick(BAD_SEPARATORS)}`,
          stop: this.r() < 0.3,
        };
      case 'key':
        return {
          text: `{${this.r() < 0.5 ? '' : `${this.fewKey()}:1,`}${this.ws()}${this.r() < 0.2 ? '' : this.pick(['1', 'a', '}', "'a'", '[', '\u00e9', ','])}`,
          stop: this.r() < 0.2,
        };
      case 'colon':
        return {
          text: `{${this.fewKey()}${this.ws()}${this.r() < 0.2 ? '' : this.pick(['1', ',', '}', '=', '"b"', ';'])}`,
          stop: this.r() < 0.2,
        };
      case 'duplicate':
        return { text: this.duplicates() };
      case 'trailing':
        return { text: '' };
    }
  }
  /** One malformed document, its maxDepth, and whether to give it as bytes. */
  malformed(): [string | Uint8Array, number] {
    const kind = this.pick(FAULTS);
    const asBytes = kind === 'utf8' ? this.r() < 0.8 : this.r() < 0.5;
    const stack: string[] = [];
    let text = this.ws();
    if (kind !== 'trailing') {
      const levels = this.int(5);
      for (let d = 0; d < levels; d++) {
        const members = this.int(this.r() < 0.9 ? 4 : 20);
        if (this.r() < 0.5) {
          text += '[' + this.ws();
          for (let i = 0; i < members; i++) text += this.small() + this.ws() + ',' + this.ws();
          stack.push(']');
        } else {
          // keys from a small set: open objects may hold a duplicate met before the fault
          text += '{' + this.ws();
          for (let i = 0; i < members; i++) text += `${this.fewKey()}:${this.small()},${this.ws()}`;
          text += this.fewKey() + this.ws() + ':' + this.ws();
          stack.push('}');
        }
      }
    } else {
      text +=
        this.small() + this.ws() + this.pick(['x', '1', ']', '}', ',', '"a"', '{}', 'é', '\u0000', 'nul']);
    }
    const f = this.fault(kind, stack.length);
    const parts: Array<string | number[]> = [text + f.text];
    if (f.bytes !== undefined) {
      if (asBytes) parts.push(f.bytes);
      else parts.push(this.pick(['\ud800', '\udfff', '\udbff']));
    }
    if (!f.stop && this.r() < 0.7) {
      // the rest of the document: more members, the closing brackets, maybe more faults
      let rest = '';
      while (stack.length > 0) {
        if (this.r() < 0.3)
          rest += ',' + this.ws() + (stack.at(-1) === '}' ? `${this.fewKey()}:` : '') + this.small();
        if (this.r() < 0.05) rest += this.pick(NOT_A_VALUE);
        rest += this.ws() + stack.pop()!;
      }
      if (this.r() < 0.05) rest += ' x';
      parts.push(rest);
      if (this.r() < 0.15)
        parts.push(asBytes ? this.pick(INVALID_UTF8) : this.pick(['\ud800', '\udc00']), '"]');
    }
    const maxDepth = f.maxDepth ?? (this.r() < 0.1 ? stack.length + 1 + this.int(3) : 1000);
    if (!asBytes) return [parts.map((p) => (typeof p === 'string' ? p : '')).join(''), maxDepth];
    return [
      Buffer.concat(parts.map((p) => (typeof p === 'string' ? encoder.encode(p) : Uint8Array.from(p)))),
      maxDepth,
    ];
  }
}

/** The reason of a BodyMalformedError described by describeError(), without what varies (offset, character, key, limit). */
function reasonOf(error: string): string {
  return error
    .replace(/^BodyMalformedError BODY_MALFORMED \d+ Malformed JSON at byte \d+: /, '')
    .replace(/\.$/, '')
    .replace(/character (?:'.'|U\+[0-9A-F]{4})/, 'character C')
    .replace(/duplicate key .*/s, 'duplicate key K')
    .replace(/limit of \d+/, 'limit of N')
    .replace(/expected (?:true|false|null)$/, 'expected W');
}

/** Every reason the JS parser gives (reasons.ts), as reasonOf() writes it. */
const EVERY_REASON = [
  'invalid UTF-8',
  'lone surrogate in the text (it cannot be encoded as UTF-8)',
  'unexpected end of input, expected a value',
  'unexpected character C, expected a value',
  'invalid literal, expected W',
  'invalid number: a digit must follow the minus sign',
  'invalid number: a digit must follow the decimal point',
  'invalid number: a digit must follow the exponent mark',
  'invalid \\u escape: four hex digits expected',
  'unterminated string',
  'invalid escape in string',
  'unescaped control character in string',
  'nesting deeper than the limit of N',
  'unexpected end of input in an array',
  "unexpected character C, expected ',' or ']'",
  'unexpected end of input in an object',
  "unexpected character C, expected ',' or '}'",
  'expected a string key',
  "expected ':' after an object key",
  'duplicate key K',
  'unexpected data after the JSON value',
];

// JOBHOOK_DIFFERENTIAL_SCALE (0 < x ≤ 1) runs a share of the generated documents: the
// other Node majors in .ci/run take a quarter (npm test, on the machine's Node, all).
const SCALE = Math.min(1, Number(process.env.JOBHOOK_DIFFERENTIAL_SCALE ?? 1) || 1);
const GENERATED = Math.round(100_000 * SCALE);
const MALFORMED_GENERATED = Math.round(40_000 * SCALE);

describe.skipIf(engine === undefined)('WebAssembly engine vs JS engine', () => {
  const wasm = engine!;

  it('fixtures/canonical/vectors.json: identical to the JS engine and to the expected bytes', () => {
    const { cases } = JSON.parse(readFixture('canonical', 'vectors.json')) as {
      cases: Array<{ name: string; input: string; expected: Record<DialectName, string | null> }>;
    };
    expect(cases.length).toBeGreaterThan(300);
    const bodies: Array<[string | Uint8Array, number]> = cases.flatMap((c) => [
      [c.input, 1000] as [string, number],
      [encoder.encode(c.input), 1000] as [Uint8Array, number],
    ]);
    const { failures } = compareAll(wasm, bodies);
    expect(failures).toEqual([]);
    for (const c of cases) {
      const doc = wasm.parse(c.input, { maxDepth: 1000 });
      for (const d of DIALECTS) {
        const want = c.expected[d];
        if (want === null)
          expect(() => doc.bytes(d)).toThrow(expect.objectContaining({ code: 'CANONICAL_UNREPRESENTABLE' }));
        else expect(Buffer.from(doc.bytes(d)).toString('utf8')).toBe(want);
      }
      doc.dispose();
    }
  });

  it('JSONTestSuite: every file of test_parsing, as bytes and (when UTF-8) as a string', () => {
    const dir = fixture('vectors', 'jsontestsuite', 'test_parsing');
    const files = readdirSync(dir).sort();
    expect(files).toHaveLength(318);
    const bodies: Array<[string | Uint8Array, number]> = [];
    const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
    for (const f of files) {
      const bytes = readFixtureBytes('vectors', 'jsontestsuite', 'test_parsing', f);
      bodies.push([bytes, 1000], [bytes, 2]);
      try {
        bodies.push([strict.decode(bytes), 1000]);
      } catch {
        // not UTF-8: bytes only
      }
    }
    const { failures, accepted, rejected } = compareAll(wasm, bodies);
    expect(failures).toEqual([]);
    expect(accepted).toBeGreaterThan(100);
    expect(rejected).toBeGreaterThan(300);
  });

  it(`${GENERATED.toLocaleString('en')} generated documents (seeded): edges of numbers, strings, keys, nesting; mutations`, () => {
    const gen = new Gen(mulberry32(0x6a6f62));
    function* bodies(): Generator<[string | Uint8Array, number]> {
      for (let i = 0; i < GENERATED; i++) yield gen.document();
    }
    const { failures, accepted, rejected, seen } = compareAll(wasm, bodies());
    console.log(
      `differential: ${GENERATED} generated documents, ${accepted} accepted, ${rejected} rejected, ${failures.length} differences; ` +
        `accepted documents per flag: ${JSON.stringify(seen)}`,
    );
    expect(failures).toEqual([]);
    expect(accepted + rejected).toBe(GENERATED);
    // Both paths and every flag are exercised in earnest.
    expect(accepted).toBeGreaterThan(GENERATED * 0.4);
    expect(rejected).toBeGreaterThan(GENERATED * 0.2);
    for (const f of FLAG_NAMES.slice(0, 6)) expect(seen[f] ?? 0, f).toBeGreaterThan(GENERATED / 200);
  }, 120_000); // ~10 s alone; more while the rest of the suite shares the cores

  it(`${MALFORMED_GENERATED.toLocaleString('en')} generated malformed documents (seeded): every reason, as bytes and as a string, same message and offset`, () => {
    const gen = new FaultGen(mulberry32(0x6d616c66));
    function* bodies(): Generator<[string | Uint8Array, number]> {
      for (let i = 0; i < MALFORMED_GENERATED; i++) yield gen.malformed();
    }
    const { failures, accepted, rejected, reasons } = compareAll(wasm, bodies());
    console.log(
      `differential: ${MALFORMED_GENERATED} generated malformed documents, ${accepted} accepted, ${rejected} rejected; reasons: ${JSON.stringify(reasons)}`,
    );
    expect(failures).toEqual([]);
    expect(rejected).toBeGreaterThan(MALFORMED_GENERATED * 0.9);
    // Every reason the JS parser gives is met many times from bytes and from strings
    // (invalid UTF-8 only from bytes, a lone surrogate only from strings), and no other.
    for (const reason of EVERY_REASON) {
      if (!reason.startsWith('lone surrogate'))
        expect(reasons[`bytes: ${reason}`] ?? 0, `bytes: ${reason}`).toBeGreaterThan(50);
      if (reason !== 'invalid UTF-8')
        expect(reasons[`string: ${reason}`] ?? 0, `string: ${reason}`).toBeGreaterThan(50);
    }
    expect(
      Object.keys(reasons).filter((k) => !EVERY_REASON.includes(k.replace(/^(bytes|string): /, ''))),
    ).toEqual([]);
  }, 120_000);

  it('duplicate keys: the one the JS parser reports, where it reports it', () => {
    const many = (keys: string[]) => `{${keys.map((k, i) => `"${k}":${i}`).join(',')}}`;
    const letters = (n: number) => Array.from({ length: n }, (_, i) => `k${String(i).padStart(2, '0')}`);
    const bodies: Array<[string | Uint8Array, number]> = [];
    for (const text of [
      // in order: the second of an equal pair fails as it is read, before anything after it
      '{"a":1,"a":2}',
      '{"a":1,"a":2,"b":x}',
      '{"a":1,"a"',
      '{"a":1,"a":[1,',
      '{"a":1,"a":{"b":1,"b":2}}',
      '{"a":{"b":1,"b":2},"a":1}',
      '{"a":1,"b":{"c":1,"c":',
      '{"a":1,"a":1,"b":{"c":1,"c":',
      '[{"a":1,"\u0061":2}]',
      // out of order: found when the object ends, after what is inside it
      '{"b":1,"a":2,"a":3,"c":x}',
      '{"b":1,"a":2,"a":3}',
      '{"b":1,"a":{"c":1,"c":2},"a":3}',
      '{"z":1,"a":1,"z":2,"a":2}',
      '{"b":1,"a":1,"b":{"x":1,"x":2}}',
      // more than 16 members: the second occurrence of the smallest repeated key
      many([...letters(20), 'k19', 'k03']),
      many([...letters(20).reverse(), 'k19', 'k03', 'k03']),
      many(['z', 'y', ...letters(17), 'y', 'z']),
      many(['z', ...letters(17), 'z', 'k05', 'k05']),
      `{"a":1,${many([...letters(17), 'k01']).slice(1, -1)}}`,
      `{"a":${many(['b', ...letters(17), 'b'])},"a":1}`,
      // keys that differ in bytes but not in value, and lone surrogates
      '{"é":1,"\u00e9":2}',
      '{"😀":1,"\ud83d\ude00":2}',
      '{"\ud83d":1,"\ud83d":2}',
      '{"x":1,"\ud800\ud800":1,"\ud800\ud800":2}',
      `{"${'k'.repeat(5000)}é":1,"${'k'.repeat(5000)}\u00e9":2}`,
    ]) {
      bodies.push([text, 1000], [encoder.encode(text), 1000]);
    }
    const { failures, rejected, reasons } = compareAll(wasm, bodies);
    expect(failures).toEqual([]);
    expect(rejected).toBe(bodies.length);
    expect(reasons['bytes: duplicate key K']).toBeGreaterThan(bodies.length / 2 - 5);
  });

  it("a malformed body is refused from the WebAssembly parser's own report: the JS parser does not run", async () => {
    // ~1 MB bodies that fail near their end (what a replay under a captured signature can send)
    const floats = `[${Array.from({ length: 60_000 }, (_, i) => `${i}.${i % 97}e-3`).join(',')}`;
    const nested = '{"a":[' + '{"b":[1.5,"x",{"c":null}],"d":"é"},'.repeat(25_000);
    const strings = `[${'"the quick brown fox \\n jumps é 😀",'.repeat(25_000)}`;
    const objects = `[${Array.from({ length: 12_000 }, (_, i) => `{"text":"w${i}","confidence":0.9${i},"bbox":[1,2,3,4]}`).join(',')}`;
    const cases = [
      `${floats}]x`,
      `${floats},1.e5]`,
      `${floats},-]`,
      `${nested}{"b":1,"b":2}]}`,
      `${nested}{"b":tru}]}`,
      `${nested}`,
      `${strings}"\\x"]`,
      `${strings}"abc`,
      `${strings}"\\u12"]`,
      `${objects},{"text":"w","text":"v"}]`,
      `${objects},{"text" 1}]`,
      `${objects}]]`,
      `${objects},{"b":1,"a":2,"b":3}]`,
    ];
    const decoder = new TextDecoder();
    for (const text of cases) {
      expect(text.length).toBeGreaterThan(500_000);
      for (const body of [
        text,
        encoder.encode(text),
        Buffer.concat([encoder.encode(text), Uint8Array.of(0xff)]),
      ]) {
        const runs = jsParserRuns();
        let fromWasm: unknown;
        try {
          wasm.parse(body, { maxDepth: 1000 });
        } catch (err) {
          fromWasm = err;
        }
        // The JS parser was not called; the error is the one it gives (and calling it counts).
        expect(jsParserRuns()).toBe(runs);
        expect(fromWasm).toBeInstanceOf(BodyMalformedError);
        const fromJs = jsOutcome(body, 1000);
        expect(jsParserRuns()).toBe(runs + 1);
        expect('error' in fromJs && fromJs.error).toBe(describeError(fromWasm));
      }
      // nor through the public API, once the engine it loads when first wanted is loaded
      await loadWasmEngine();
      const runs = jsParserRuns();
      expect(() => canonicalizeToBytes(encoder.encode(text))).toThrow(BodyMalformedError);
      expect(() => canonicalize(decoder.decode(encoder.encode(text)))).toThrow(BodyMalformedError);
      expect(jsParserRuns()).toBe(runs);
    }
  });

  it('nesting at and past the limit, up to 2,000', () => {
    const bodies: Array<[string | Uint8Array, number]> = [];
    for (const depth of [1, 2, 3, 999, 1000, 1001, 1999, 2000]) {
      for (const limit of [depth - 1, depth]) {
        if (limit < 1) continue;
        bodies.push(['['.repeat(depth) + ']'.repeat(depth), limit]);
        bodies.push(['{"a":'.repeat(depth) + '1' + '}'.repeat(depth), limit]);
        bodies.push(['[{"k":'.repeat(depth >> 1) + '[1.5e300,"\\u00e9"]' + '}]'.repeat(depth >> 1), limit]);
      }
    }
    bodies.push(['['.repeat(2001) + ']'.repeat(2001), 2000]);
    bodies.push([' [ '.repeat(2000) + '1' + ' ] '.repeat(2000), 2000]);
    const { failures, accepted, rejected } = compareAll(wasm, bodies);
    expect(failures).toEqual([]);
    expect(accepted).toBeGreaterThan(10);
    expect(rejected).toBeGreaterThan(5);
  });

  it('large bodies: long strings, big and out-of-order objects, output in chunks of at most 64 KiB', () => {
    const gen = new Gen(mulberry32(7));
    const members: string[] = [];
    for (let i = 0; i < 3000; i++)
      members.push(
        `"k${(i * 7919) % 3000}${gen.pick(['', 'é', '😀', '\\u00e9'])}":${gen.r() < 0.5 ? gen.number() : gen.string()}`,
      );
    const base64 = Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 31 + 7) & 255)).toString(
      'base64',
    );
    const bodies: Array<[string | Uint8Array, number]> = [
      [`{${members.join(',')}}`, 1000],
      [`{"data":"${base64}","name":"x"}`, 1000],
      [`["${'é'.repeat(100_000)}","${'\\n'.repeat(70_000)}","${'😀'.repeat(40_000)}"]`, 1000],
      [`{"${'k'.repeat(200_000)}":1,"${'k'.repeat(199_999)}":2}`, 1000],
      [`[${Array.from({ length: 20_000 }, () => gen.number()).join(',')}]`, 1000],
      ['['.repeat(1500) + '"x"' + ']'.repeat(1500), 2000],
    ];
    const { failures } = compareAll(wasm, bodies);
    expect(failures).toEqual([]);
    const doc = wasm.parse(bodies[0]![0], { maxDepth: 1000 });
    for (const d of DIALECTS) {
      if (d !== 'python' && doc.flags.loneSurrogate) continue;
      const sizes: number[] = [];
      const parts: Uint8Array[] = [];
      doc.write(d, (chunk) => {
        sizes.push(chunk.length);
        parts.push(chunk.slice());
      });
      expect(sizes.length).toBeGreaterThan(1);
      expect(Math.max(...sizes)).toBeLessThanOrEqual(65536);
      expect(sameBytes(Buffer.concat(parts), doc.bytes(d))).toBe(true);
    }
    doc.dispose();
  });

  it('documents live side by side, a sink may write another document, dispose frees and forbids', () => {
    const a = wasm.parse('{"b":[1.5e300],"a":"x"}', { maxDepth: 1000 });
    const b = wasm.parse(encoder.encode('["é", 1e16]'), { maxDepth: 1000 });
    const inner: string[] = [];
    a.write('orjson', () => inner.push(Buffer.from(b.bytes('python')).toString('utf8')));
    expect(inner).toEqual(['[\n  "\\u00e9",\n  1e+16\n]']);
    expect(Buffer.from(a.bytes('python')).toString('utf8')).toBe(
      '{\n  "a": "x",\n  "b": [\n    1.5e+300\n  ]\n}',
    );
    // disposing from inside its own sink takes effect when the write returns
    let chunks = 0;
    b.write('orjson', () => {
      chunks++;
      b.dispose();
    });
    expect(chunks).toBe(1);
    expect(() => b.bytes('orjson')).toThrow(/disposed/);
    expect(() => b.dispose()).toThrow(/disposed/);
    a.dispose();
    expect(() => a.write('orjson', () => {})).toThrow(/disposed/);
  });

  it('allocator: documents of mixed sizes alive in random order keep their bytes', () => {
    const gen = new Gen(mulberry32(99));
    const heapBefore = wasmHeapBytes();
    const live: Array<{ doc: WasmDocument; want: string }> = [];
    const sizes = [10, 200, 3000, 40_000, 300_000];
    for (let step = 0; step < 300; step++) {
      if (live.length < 8 && gen.r() < 0.6) {
        const target = gen.pick(sizes);
        const items: string[] = [];
        let size = 0;
        while (size < target) {
          const v = gen.r() < 0.5 ? gen.number() : `{"b":${gen.number()},"a":"x${gen.int(1000)}é"}`;
          items.push(v);
          size += v.length + 1;
        }
        const text = `[${items.join(',')}]`;
        const body = gen.r() < 0.5 ? text : encoder.encode(text);
        live.push({
          doc: wasm.parse(body, { maxDepth: 10 }),
          want: serializeDocument(parseDocument(text), 'python'),
        });
      } else if (live.length > 0) {
        const [{ doc, want }] = live.splice(gen.int(live.length), 1) as [{ doc: WasmDocument; want: string }];
        expect(Buffer.from(doc.bytes('python')).toString('utf8')).toBe(want);
        doc.dispose();
      }
    }
    for (const { doc } of live) doc.dispose();
    // everything freed coalesces back: the heap is what it was
    expect(wasmHeapBytes()).toBe(heapBefore);
  });

  it('memory is reused: many parse/dispose cycles do not grow the heap', () => {
    const body = encoder.encode(`{"x":[${'1.25,'.repeat(50_000)}0],"s":"${'é'.repeat(50_000)}"}`);
    const cycle = (n: number) => {
      for (let i = 0; i < n; i++) {
        const docs = [
          wasm.parse(body, { maxDepth: 1000 }),
          wasm.parse('[1,2,3]', { maxDepth: 1000 }),
          wasm.parse(new TextDecoder().decode(body), { maxDepth: 1000 }),
        ];
        for (const d of docs) d.bytes('python');
        try {
          wasm.parse('[1,', { maxDepth: 1000 });
        } catch {
          // malformed: its buffers must be freed too
        }
        for (const d of docs) d.dispose();
      }
    };
    cycle(5);
    const after = wasmHeapBytes()!;
    cycle(50);
    expect(wasmHeapBytes()).toBe(after);
  });

  it('orders keys after a lone high surrogate by code point, as the JS engine does', () => {
    const doc = wasm.parse(
      '{"\\ud800\\ufbbb":1,"\\ud800\\ud800":2,"\\ud800\\ud83d\\ude00":3,"\\ud800\\udc00":4}',
      { maxDepth: 10 },
    );
    // U+D800 U+D800 < U+D800 U+FBBB < U+D800 U+1F600 < U+10000
    expect(Buffer.from(doc.bytes('python')).toString('utf8')).toBe(
      '{\n  "\\ud800\\ud800": 2,\n  "\\ud800\\ufbbb": 1,\n  "\\ud800\\ud83d\\ude00": 3,\n  "\\ud800\\udc00": 4\n}',
    );
    expect(
      serializeDocument(
        parseDocument('{"\\ud800\\ufbbb":1,"\\ud800\\ud800":2,"\\ud800\\ud83d\\ude00":3,"\\ud800\\udc00":4}'),
        'python',
      ),
    ).toBe(Buffer.from(doc.bytes('python')).toString('utf8'));
    doc.dispose();
    expect(() =>
      wasm.parse('{"\\ud800\\ud800":1,"\\ud800\\u0061":2,"\\ud800\\ud800":3}', { maxDepth: 10 }),
    ).toThrow(/duplicate key/);
  });

  it('throws the JS errors for bad arguments', () => {
    expect(() => wasm.parse('[]', { maxDepth: 0 })).toThrow(TypeError);
    expect(() => wasm.parse(42 as unknown as string, { maxDepth: 10 })).toThrow(TypeError);
    const doc = wasm.parse('[]', { maxDepth: 10 });
    expect(() => doc.bytes('json5' as DialectName)).toThrow(TypeError);
    doc.dispose();
  });
});
