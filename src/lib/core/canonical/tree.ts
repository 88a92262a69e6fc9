/**
 * The lossless tree the parser builds and every dialect serializes.
 *
 * Leaves are mostly strings holding the *canonical token text* shared by the
 * UTF-8 dialects: a string value already quoted and escaped (`"abc"`), a number
 * token that every dialect writes as it stands (`42`, `0.5`, `1.0`), or
 * `true`/`false`/`null`. Only numbers whose text depends on the dialect (floats
 * written in exponent form or with more than 15 digits, integers outside the
 * 64-bit range) are `JsonNumber` objects. Objects keep their members sorted by
 * code point as alternating decoded key / value entries.
 */

/** A number whose canonical text depends on the dialect. `raw` is the token as written. */
export class JsonNumber {
  constructor(
    readonly raw: string,
    /** True for tokens with `.`, `e` or `E`. */
    readonly isFloat: boolean,
  ) {}
}

/** An object: `m` alternates decoded key and value, sorted by key code point. */
export class JsonObject {
  constructor(readonly m: JsonNode[]) {}
}

export type JsonNode = string | JsonNumber | JsonNode[] | JsonObject;

/** What the parser found out about the whole document on the way. */
export interface ParsedDocument extends DocumentFlags {
  readonly root: JsonNode;
  /** The source text (for the fast value path). */
  readonly text: string;
}

/** Facts about a document that decide which dialects can write it and how alike they are (any engine). */
export interface DocumentFlags {
  /** A `\uD800`-style escape produced a lone surrogate: only the `python` dialect can write it. */
  readonly loneSurrogate: boolean;
  /** An integer token outside ±(2^53 − 1). */
  readonly unsafeInteger: boolean;
  /** A number token overflows to ±Infinity when read as a float (a float token, or an integer token past orjson's 64 bits). */
  readonly nonFinite: boolean;
  /** Some string or key holds a character the `python` dialect escapes (U+007F and above). */
  readonly nonAscii: boolean;
  /** Some number's text depends on the dialect. */
  readonly dialectNumbers: boolean;
  /** An integer token `-0` (written `0`, so its value is 0, not −0). */
  readonly negativeZero: boolean;
  /**
   * Whitespace the canonical layout adds: a newline and 2 spaces per depth before
   * every item of a non-empty container and before its closing bracket, and a space
   * after every colon. The canonical text is about body bytes + this; it is what
   * makes deeply nested input expand, so it bounds work before any is done.
   */
  readonly layoutBytes: number;
}
