/**
 * A JSON text read where it is held, as bytes: a reader walks the members it wants and
 * decodes only the values it keeps; everything else is checked and skipped, never built.
 * JSON.parse of a capture would build every value of the file, whatever it is: a 20 MB
 * HAR of nested arrays took 1.6 GB that way. Here a file costs its bytes, the values
 * kept, and a stack of `maxDepth` bytes.
 */
const decoder = new TextDecoder();

/** Where a value lies in the text: `[start, end)`, a string's quotes included. */
export interface Span {
  start: number;
  end: number;
}

/** The text is not JSON, or nests deeper than allowed: the message says where. */
export class JsonScanError extends Error {}

const OBJECT = 1;
const ARRAY = 2;

function isSpace(b: number | undefined): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
}

function isDigit(b: number | undefined): boolean {
  return b !== undefined && b >= 0x30 && b <= 0x39;
}

function isHexDigit(b: number | undefined): boolean {
  return b !== undefined && (isDigit(b) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66));
}

const ESCAPES = new Set([0x22, 0x5c, 0x2f, 0x62, 0x66, 0x6e, 0x72, 0x74]);

export class JsonScan {
  at = 0;
  /** The containers open in `skip`, one byte each: the only memory a skipped value costs. */
  private readonly stack: Uint8Array;

  constructor(
    readonly bytes: Uint8Array,
    readonly maxDepth: number,
  ) {
    this.stack = new Uint8Array(maxDepth);
  }

  fail(why: string, at = this.at): never {
    throw new JsonScanError(`${why} at byte ${at}`);
  }

  private unexpected(): never {
    const b = this.bytes[this.at];
    if (b === undefined) throw new JsonScanError('Unexpected end of JSON input');
    const shown = b >= 0x20 && b < 0x7f ? JSON.stringify(String.fromCharCode(b)) : `byte 0x${b.toString(16)}`;
    this.fail(`Unexpected ${shown}`);
  }

  /** The next byte that is not whitespace (not consumed); undefined at the end. */
  peek(): number | undefined {
    while (isSpace(this.bytes[this.at])) this.at++;
    return this.bytes[this.at];
  }

  private take(b: number): void {
    if (this.peek() !== b) this.unexpected();
    this.at++;
  }

  /** Only whitespace is left. */
  end(): void {
    if (this.peek() !== undefined) this.unexpected();
  }

  /** Skips a string (the byte at `at` is its opening quote) and returns its span. */
  string(): Span {
    const { bytes } = this;
    if (this.peek() !== 0x22) this.unexpected();
    const start = this.at;
    let i = start + 1;
    for (;;) {
      const b = bytes[i];
      if (b === 0x22) break;
      if (b === undefined) this.fail('Unterminated string', i);
      if (b < 0x20) this.fail('Bad control character in string literal', i);
      if (b === 0x5c) {
        const e = bytes[i + 1];
        if (e === 0x75) {
          for (let k = 2; k < 6; k++) if (!isHexDigit(bytes[i + k])) this.fail('Bad Unicode escape', i);
          i += 6;
          continue;
        }
        if (e === undefined || !ESCAPES.has(e)) this.fail('Bad escaped character', i);
        i += 2;
        continue;
      }
      i++;
    }
    this.at = i + 1;
    return { start, end: this.at };
  }

  private number(): void {
    const { bytes } = this;
    let i = this.at;
    if (bytes[i] === 0x2d) i++;
    if (bytes[i] === 0x30) i++;
    else if (isDigit(bytes[i])) while (isDigit(bytes[i])) i++;
    else this.fail('No number after minus sign', i);
    if (bytes[i] === 0x2e) {
      if (!isDigit(bytes[++i])) this.fail('Unterminated fractional number', i);
      while (isDigit(bytes[i])) i++;
    }
    if (bytes[i] === 0x65 || bytes[i] === 0x45) {
      i++;
      if (bytes[i] === 0x2b || bytes[i] === 0x2d) i++;
      if (!isDigit(bytes[i])) this.fail('Exponent part is missing a number', i);
      while (isDigit(bytes[i])) i++;
    }
    this.at = i;
  }

  private word(text: string): void {
    for (let k = 0; k < text.length; k++)
      if (this.bytes[this.at + k] !== text.charCodeAt(k)) this.unexpected();
    this.at += text.length;
  }

  /** A string, number or literal (`true`, `false`, `null`). */
  private scalar(): void {
    const b = this.peek();
    if (b === 0x22) this.string();
    else if (b === 0x2d || isDigit(b)) this.number();
    else if (b === 0x74) this.word('true');
    else if (b === 0x66) this.word('false');
    else if (b === 0x6e) this.word('null');
    else this.unexpected();
  }

  /** Checks one value of any kind, without building it, and returns its span. */
  skip(): Span {
    const { stack } = this;
    this.peek();
    const start = this.at;
    let depth = 0;
    for (;;) {
      const b = this.peek();
      if (b === 0x7b || b === 0x5b) {
        if (depth === this.maxDepth) this.fail(`Nesting deeper than ${this.maxDepth} levels`);
        stack[depth++] = b === 0x7b ? OBJECT : ARRAY;
        this.at++;
        const close = this.peek();
        if (close === (b === 0x7b ? 0x7d : 0x5d)) {
          this.at++;
          depth--;
        } else {
          if (b === 0x7b) this.key();
          continue;
        }
      } else this.scalar();
      // After a value: the next one of its container, or the container's end (and its container's…).
      for (;;) {
        if (depth === 0) return { start, end: this.at };
        const open = stack[depth - 1];
        const c = this.peek();
        if (c === 0x2c) {
          this.at++;
          if (open === OBJECT) this.key();
          break;
        }
        if (c !== (open === OBJECT ? 0x7d : 0x5d)) this.unexpected();
        this.at++;
        depth--;
      }
    }
  }

  /** A member's name and its colon. */
  private key(): void {
    this.string();
    this.take(0x3a);
  }

  /**
   * Walks an object: `each` gets each member's name and must read or skip its value.
   * Fails unless the value at `at` is an object.
   */
  members(each: (name: string) => void): void {
    this.take(0x7b);
    if (this.peek() === 0x7d) {
      this.at++;
      return;
    }
    for (;;) {
      const name = this.text(this.string());
      this.take(0x3a);
      each(name);
      const c = this.peek();
      if (c !== 0x7d && c !== 0x2c) this.unexpected();
      this.at++;
      if (c === 0x7d) return;
    }
  }

  /** Walks an array: `each` gets each element's position and must read or skip it. */
  elements(each: (index: number) => void): void {
    this.take(0x5b);
    if (this.peek() === 0x5d) {
      this.at++;
      return;
    }
    for (let index = 0; ; index++) {
      each(index);
      const c = this.peek();
      if (c !== 0x5d && c !== 0x2c) this.unexpected();
      this.at++;
      if (c === 0x5d) return;
    }
  }

  /** The first byte of a span: `"`, `{`, `[`, a digit… */
  kind(span: Span): number {
    return this.bytes[span.start]!;
  }

  /** The value of a string's span (checked by `string`). */
  text(span: Span): string {
    const inner = this.bytes.subarray(span.start + 1, span.end - 1);
    return inner.includes(0x5c)
      ? (JSON.parse(decoder.decode(this.bytes.subarray(span.start, span.end))) as string)
      : decoder.decode(inner);
  }

  /** A scalar's value as JSON.parse gives it (a span of `skip` that is not a container). */
  scalarValue(span: Span): string | number | boolean | null {
    return JSON.parse(decoder.decode(this.bytes.subarray(span.start, span.end))) as string | number | boolean;
  }

  /** Reads from the start of `span` next (a value read again, later). */
  seek(span: Span): this {
    this.at = span.start;
    return this;
  }
}
