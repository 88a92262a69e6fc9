import { JsonNumber, JsonObject, type JsonNode, type ParsedDocument } from './tree.js';

/** How integers outside ±(2^53 − 1) are handed to the application. */
export type IntegerMode = 'number' | 'bigint' | 'string';

/** A plain JS value built from JSON. `bigint`/`string` appear only for large integers in those modes. */
export type JsonValue = string | number | bigint | boolean | null | JsonValue[] | { [key: string]: JsonValue };

export function assertIntegerMode(mode: unknown): IntegerMode {
  if (mode === undefined) return 'number';
  if (mode === 'number' || mode === 'bigint' || mode === 'string') return mode;
  throw new TypeError(`integers must be 'number', 'bigint' or 'string'; got ${JSON.stringify(mode)}`);
}

/**
 * Plain JS values of a parsed document. The strict parser has already accepted
 * the text, so `JSON.parse` (native, keeps `__proto__` as an own property) gives
 * the same values, except for large integers in the exact modes: those take the tree.
 */
export function documentValue(doc: ParsedDocument, integers: IntegerMode): JsonValue {
  if (integers === 'number' || !doc.unsafeInteger) return JSON.parse(doc.text) as JsonValue;
  return toValue(doc.root, integers);
}

function integer(raw: string, integers: IntegerMode): JsonValue {
  const v = Number(raw);
  if (integers === 'number' || Number.isSafeInteger(v)) return v;
  return integers === 'bigint' ? BigInt(raw) : raw;
}

function toValue(node: JsonNode, integers: IntegerMode): JsonValue {
  if (typeof node === 'string') {
    const c = node.charCodeAt(0);
    if (c === 0x22) return JSON.parse(node) as string;
    if (c === 0x74) return true;
    if (c === 0x66) return false;
    if (c === 0x6e) return null;
    return /[.eE]/.test(node) ? Number(node) : integer(node, integers);
  }
  if (node instanceof JsonNumber) return node.isFloat ? Number(node.raw) : integer(node.raw, integers);
  if (node instanceof JsonObject) {
    const out: { [key: string]: JsonValue } = {};
    const m = node.m;
    for (let k = 0; k < m.length; k += 2) {
      const key = m[k] as string;
      const value = toValue(m[k + 1]!, integers);
      if (key === '__proto__') {
        Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
      } else {
        out[key] = value;
      }
    }
    return out;
  }
  const out = new Array<JsonValue>(node.length);
  for (let k = 0; k < node.length; k++) out[k] = toValue(node[k]!, integers);
  return out;
}
