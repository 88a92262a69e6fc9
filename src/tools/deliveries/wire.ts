import type { DialectName } from '../../index.js';
import { formatFloat, parseDocument, asciiToken, quoteUtf8, mapTree } from '../../lib/entries/tools-door.js';

/** A float, written with a fraction or exponent even when integral (`1.0`). */
export class WireFloat {
  constructor(readonly value: number) {}
}

/** An integer kept as its exact decimal text (any size, as Python ints). */
export class WireInteger {
  constructor(readonly digits: string) {}
}

/** A JSON value for the wire. A plain `number` is an integer when integral, else a float. */
export type WireValue =
  string | number | boolean | null | WireFloat | WireInteger | readonly WireValue[] | WireObject;

/** An object; members whose value is `undefined` are left out. */
export interface WireObject {
  readonly [key: string]: WireValue | undefined;
}

/** Marks a number as a float (`float(1)` is written `1.0`). */
export function float(value: number): WireFloat {
  return new WireFloat(value);
}

export function isWireObject(value: WireValue | undefined): value is WireObject {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    !(value instanceof WireFloat) &&
    !(value instanceof WireInteger)
  );
}

/**
 * Writes `value` as the sender of `dialect` would put it on the wire: orjson
 * compact (`{"a":1.0}`, raw UTF-8); Python `json.dumps` with its default separators
 * (`{"a": 1.0}`), raw UTF-8 for `python-utf8`, `\uXXXX` escapes for `python`.
 * Keys keep their insertion order (a Python dict's).
 */
export function writeWire(value: WireValue, dialect: DialectName = 'orjson'): string {
  const python = dialect === 'python' || dialect === 'python-utf8';
  const comma = python ? ', ' : ',';
  const colon = python ? ': ' : ':';
  const quote = dialect === 'python' ? (s: string) => asciiToken(quoteUtf8(s)) : quoteUtf8;
  const floatText = (v: number) => formatFloat(v, dialect) ?? 'null'; // orjson writes NaN/Infinity as null
  const write = (v: WireValue): string => {
    if (typeof v === 'string') return quote(v);
    if (typeof v === 'number') return Number.isInteger(v) ? String(v) : floatText(v); // String(-0) is '0'
    if (typeof v === 'boolean' || v === null) return String(v);
    if (v instanceof WireFloat) return floatText(v.value);
    if (v instanceof WireInteger) return v.digits;
    if (Array.isArray(v)) return '[' + (v as readonly WireValue[]).map(write).join(comma) + ']';
    const members: string[] = [];
    for (const [k, item] of Object.entries(v as WireObject))
      if (item !== undefined) members.push(quote(k) + colon + write(item));
    return '{' + members.join(comma) + '}';
  };
  return write(value);
}

/**
 * Parses strict JSON keeping what Python would keep: a float token stays a float
 * (`1.0` is echoed as `1.0`), an integer token keeps its exact digits. Throws
 * `BodyMalformedError` as the verifier's parser does.
 */
export function parseWire(body: string | Uint8Array): WireValue {
  return mapTree(parseDocument(body).root, fromNumber) as WireValue;
}

function fromNumber(raw: string, isFloat: boolean): WireValue {
  if (isFloat) return new WireFloat(Number(raw));
  const n = Number(raw);
  return Number.isSafeInteger(n) ? n : new WireInteger(raw === '-0' ? '0' : raw);
}
