import { PayloadInvalidError } from '../../base/errors.js';
import type { DialectName } from './dialects.js';
import { inOrjsonIntegerRange } from './serialize.js';
import { JsonNumber, JsonObject, type JsonNode, type ParsedDocument } from './tree.js';

/** How integers outside ±(2^53 − 1) are handed to the application. */
export type IntegerMode = 'number' | 'bigint' | 'string';

/** A plain JS value built from JSON. `bigint`/`string` appear only for large integers in those modes. */
export type JsonValue =
  string | number | bigint | boolean | null | JsonValue[] | { [key: string]: JsonValue };

export function assertIntegerMode(mode: unknown): IntegerMode {
  if (mode === undefined) return 'number';
  if (mode === 'number' || mode === 'bigint' || mode === 'string') return mode;
  throw new TypeError(`integers must be 'number', 'bigint' or 'string'; got ${JSON.stringify(mode)}`);
}

/**
 * Plain JS values of a parsed document.
 *
 * With a `dialect`, the value is that of the canonical text of that dialect — what
 * the signature covers — so two bodies with one canonical form give one value: an
 * integer token `-0` is 0 (the canonical text says `0`), and under the orjson
 * dialects an integer outside −2^63…2^64−1 is the float orjson reads it as (so
 * `100000000000000000001` signed as `1e+20` is 1e20 in every integer mode). Without
 * a dialect, integers keep their exact value in the exact modes.
 *
 * The strict parser has already accepted the text, so native `JSON.parse` (which keeps
 * `__proto__` as an own property) gives the same values whenever none of the above
 * applies; otherwise the tree is walked.
 */
export function documentValue(doc: ParsedDocument, integers: IntegerMode, dialect?: DialectName): JsonValue {
  const exact = integers !== 'number' && doc.unsafeInteger;
  if (!exact && !(dialect !== undefined && doc.negativeZero)) return JSON.parse(doc.text) as JsonValue;
  return toValue(doc.root, integers, dialect === 'orjson' || dialect === 'orjson-legacy');
}

// Python refuses to convert integers longer than this (sys.int_max_str_digits), and
// BigInt() takes time quadratic in the length: a longer token is kept out of bigint mode.
const MAX_BIGINT_DIGITS = 4300;

function integer(raw: string, integers: IntegerMode, orjson: boolean): JsonValue {
  if (orjson && !inOrjsonIntegerRange(raw)) return Number(raw);
  const v = Number(raw);
  if (integers === 'number' || Number.isSafeInteger(v)) return v;
  if (integers === 'string') return raw;
  if (raw.length > MAX_BIGINT_DIGITS + 1) {
    throw new PayloadInvalidError(
      `An integer has ${raw.replace('-', '').length} digits; integers: 'bigint' converts at most ${MAX_BIGINT_DIGITS} (Python's own limit; BigInt() slows quadratically with length): use integers: 'string'.`,
    );
  }
  return BigInt(raw);
}

/** A tree's value with numbers made by `number` (their token, and whether it is a float). */
export type MappedValue<N> =
  string | boolean | null | N | MappedValue<N>[] | { [key: string]: MappedValue<N> };

/**
 * The plain value of a tree, numbers turned into whatever `number` makes of their
 * token. `"__proto__"` stays an own property, as `JSON.parse` leaves it.
 */
export function mapTree<N>(node: JsonNode, number: (raw: string, isFloat: boolean) => N): MappedValue<N> {
  if (typeof node === 'string') {
    const c = node.charCodeAt(0);
    if (c === 0x22) return JSON.parse(node) as string;
    if (c === 0x74) return true;
    if (c === 0x66) return false;
    if (c === 0x6e) return null;
    // A number token every dialect writes as it stands (integer tokens `-0` are stored as `0`).
    return number(node, /[.eE]/.test(node));
  }
  if (node instanceof JsonNumber) return number(node.raw, node.isFloat);
  if (node instanceof JsonObject) {
    const out: { [key: string]: MappedValue<N> } = {};
    const m = node.m;
    for (let k = 0; k < m.length; k += 2) {
      Object.defineProperty(out, m[k] as string, {
        value: mapTree(m[k + 1]!, number),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }
  const out = new Array<MappedValue<N>>(node.length);
  for (let k = 0; k < node.length; k++) out[k] = mapTree(node[k]!, number);
  return out;
}

function toValue(node: JsonNode, integers: IntegerMode, orjson: boolean): JsonValue {
  return mapTree(node, (raw, isFloat) =>
    isFloat ? Number(raw) : integer(raw, integers, orjson),
  ) as JsonValue;
}
