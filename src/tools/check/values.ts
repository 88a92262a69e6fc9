import type { DialectName } from '../../index.js';
import { float, WireInteger, type WireObject, type WireValue } from '../deliveries/wire.js';
import type { Random } from './random.js';

/** The kinds of generated values, one genuine delivery each per dialect. */
export const VALUE_KINDS = ['floats', 'big-integers', 'escapes', 'unicode'] as const;
export type ValueKind = (typeof VALUE_KINDS)[number];

/** The nearest double to `m` × 10^e, as a sender parsing that decimal would hold it. */
function decimal(r: Random, e: number): number {
  const digits = r.int(1, 4);
  const m = r.int(10 ** (digits - 1), 10 ** digits - 1);
  return Number(`${r.next() < 0.5 ? '-' : ''}${m}e${e - digits + 1}`);
}

/** A finite double from random bits: every exponent, subnormals included. */
function anyDouble(r: Random): number {
  const view = new DataView(new ArrayBuffer(8));
  for (;;) {
    view.setUint32(0, r.uint32());
    view.setUint32(4, r.uint32());
    const v = view.getFloat64(0);
    if (Number.isFinite(v)) return v;
  }
}

function floats(r: Random): WireObject {
  // Fixed or scientific switches at 1e-5/1e-6 and 1e15/1e16 (orjson), 1e-4/1e-5 and 1e16 (Python).
  const boundaries = [-7, -6, -5, -4, -3, 14, 15, 16, 17, 20, 21, 22].map((e) => float(decimal(r, e)));
  return {
    integral: [
      float(r.int(1, 9)),
      float(r.int(10, 999) * (r.next() < 0.5 ? -1 : 1)),
      float(r.int(1, 9) * 1e6),
    ],
    zeros: [float(0), float(-0)],
    confidence: float(r.pick([1, 0.5, 0.25, 0.75, 0.125])),
    boundaries,
    shortest: [float(0.1 + 0.2), float(r.int(1, 99) / 10), float(anyDouble(r)), float(anyDouble(r))],
    subnormal: [float(5e-324 * r.int(1, 4096)), float(2.2250738585072014e-308)],
    extremes: [float(1.7976931348623157e308), float(-Number.MAX_SAFE_INTEGER - 1)],
  };
}

function bigIntegers(r: Random, dialect: DialectName): WireObject {
  const digits = (n: bigint) => new WireInteger(n.toString());
  const orjson: WireValue[] = [
    digits(2n ** 53n + 1n),
    digits(r.bigint(2n ** 53n + 2n, 2n ** 63n)),
    digits(r.bigint(2n ** 63n, 2n ** 64n - 1n)),
    digits(2n ** 64n - 1n),
    digits(-(2n ** 63n)),
    digits(-r.bigint(2n ** 53n + 2n, 2n ** 63n - 1n)),
  ];
  // Python ints have any size; orjson reads a token past 64 bits as a float, so only Python senders write one.
  const python =
    dialect === 'python' || dialect === 'python-utf8'
      ? [digits(r.bigint(2n ** 64n, 10n ** 30n)), digits(-r.bigint(2n ** 63n + 1n, 10n ** 25n))]
      : [];
  return {
    ids: [...orjson, ...python],
    safe: [Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, 0, r.int(-1000, 1000)],
  };
}

const CONTROLS = Array.from({ length: 32 }, (_, c) => String.fromCharCode(c));

function escapes(r: Random): WireObject {
  const controls = r.shuffle(CONTROLS).slice(0, 8).join('');
  const line = r
    .shuffle(['"quoted"', 'back\\slash', 'a/b', '\b\t\n\f\r', '\u007f', '\u2028', '\u2029', '</script>'])
    .join(' ');
  return {
    text: `${line}${controls}`,
    every_control: CONTROLS.join(''),
    [`key with "quotes", \\ and \t tab ${r.int(0, 99)}`]: line,
    '\u007f\u2028': r.pick(['\u0000', '\u001f', '\u2029']),
  };
}

// Ranges of code points (inclusive) seen in real outputs, and those that sort differently.
const RANGES: ReadonlyArray<readonly [number, number]> = [
  [0xa0, 0x24f], // Latin-1 and Latin Extended
  [0x3040, 0x30ff], // kana
  [0x4e00, 0x9fff], // CJK
  [0xe000, 0xf8ff], // private use: above the surrogates in UTF-16, below astral
  [0xff01, 0xff5e], // full-width forms
  [0x1f300, 0x1f6ff], // emoji (astral)
  [0x20000, 0x2a6df], // CJK extension B (astral)
];

function text(r: Random, length: number): string {
  let s = '';
  for (let i = 0; i < length; i++) {
    const [lo, hi] = r.pick(RANGES);
    s += String.fromCodePoint(r.int(lo, hi));
  }
  return s;
}

function unicode(r: Random): WireObject {
  // Keys whose UTF-16 order differs from code point order, integer-like keys JS objects reorder.
  const keys = [
    `\u{ff5e}${text(r, 2)}`,
    `\u{1f600}${text(r, 2)}`,
    '\u{e000}',
    '10',
    '2',
    '-1',
    '01',
    'B',
    'a',
    'é',
    'e\u0301',
  ];
  const sorted: Record<string, WireValue> = {};
  for (const k of r.shuffle(keys)) sorted[k] = text(r, r.int(1, 6));
  return {
    text: text(r, r.int(12, 40)),
    composed: 'Caf\u00e9 \u00c5ngstr\u00f6m',
    decomposed: 'Cafe\u0301 A\u030angstro\u0308m',
    marks: '\ufeff\ufffd\u00a0\u200b\u200d\ufe0f',
    keys: sorted,
  };
}

/** The generated values of one kind, as the sender of `dialect` could send them. */
export function generatedValues(kind: ValueKind, r: Random, dialect: DialectName): WireObject {
  switch (kind) {
    case 'floats':
      return floats(r);
    case 'big-integers':
      return bigIntegers(r, dialect);
    case 'escapes':
      return escapes(r);
    case 'unicode':
      return unicode(r);
  }
}
