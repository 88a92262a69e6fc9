import { JsonNumber, JsonObject, type JsonNode } from './tree.js';

/** How integers outside ±(2^53 − 1) are handed to the application. */
export type IntegerMode = 'number' | 'bigint' | 'string';

/** A plain JS value built from JSON. `bigint`/`string` appear only for large integers in those modes. */
export type JsonValue = string | number | bigint | boolean | null | JsonValue[] | { [key: string]: JsonValue };

export function assertIntegerMode(mode: unknown): IntegerMode {
  if (mode === undefined) return 'number';
  if (mode === 'number' || mode === 'bigint' || mode === 'string') return mode;
  throw new TypeError(`integers must be 'number', 'bigint' or 'string'; got ${JSON.stringify(mode)}`);
}

/** Converts the lossless tree to plain JS values. Keys named `__proto__` become own properties. */
export function toValue(node: JsonNode, integers: IntegerMode): JsonValue {
  if (node === null || typeof node !== 'object') return node;
  if (node instanceof JsonNumber) {
    const v = Number(node.raw);
    if (node.isFloat || integers === 'number' || Number.isSafeInteger(v)) return v;
    return integers === 'bigint' ? BigInt(node.raw) : node.raw;
  }
  if (node instanceof JsonObject) {
    const out: { [key: string]: JsonValue } = {};
    const { keys, values } = node;
    for (let k = 0; k < keys.length; k++) {
      const key = keys[k]!;
      const value = toValue(values[k]!, integers);
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
