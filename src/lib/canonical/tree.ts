/**
 * The lossless tree the parser builds and every dialect serializes.
 * Strings are decoded JS strings; numbers keep their token; objects keep their
 * members sorted by code point, so serializing never sorts again.
 */

/** A number token. `raw` is the token as written (`-0` already turned into `0`). */
export class JsonNumber {
  constructor(
    readonly raw: string,
    /** True for tokens with `.`, `e` or `E`. */
    readonly isFloat: boolean,
  ) {}
}

/** An object whose members are sorted by Unicode code point of the key. */
export class JsonObject {
  constructor(
    readonly keys: string[],
    readonly values: JsonNode[],
  ) {}
}

export type JsonNode = string | boolean | null | JsonNumber | JsonNode[] | JsonObject;

/** What the parser found out about the whole document on the way. */
export interface ParsedDocument {
  readonly root: JsonNode;
  /** A `\uD800`-style escape produced a lone surrogate: only the `python` dialect can write it. */
  readonly loneSurrogate: boolean;
  /** An integer token outside ±(2^53 − 1). */
  readonly unsafeInteger: boolean;
  /** A float token overflowed to ±Infinity. */
  readonly nonFinite: boolean;
}
