/**
 * The byte-level canonical engine: native/canonical.c compiled to WebAssembly.
 *
 * It parses the UTF-8 body into a compact tape inside WebAssembly memory and
 * streams the canonical bytes of a dialect out in chunks, without building JS
 * values. Its bytes, flags and errors equal the JS engine's (parse.ts +
 * serialize.ts, the oracle; test/core/canonical/differential.test.ts proves it):
 * - on a malformed body the WebAssembly parser reports why (a reason code, the byte
 *   offset, the character or key the message names) and the `BodyMalformedError`
 *   is written from that, with the JS parser's texts (reasons.ts): the body is not
 *   parsed again;
 * - number tokens whose text depends on the dialect are formatted by the JS
 *   engine's own `formatFloat`, called from WebAssembly.
 * Runtime-neutral: no `node:` imports, the module is embedded as base64.
 */
import { BodyMalformedError, CanonicalUnrepresentableError } from '../../../base/errors.js';
import { assertDialect, DIALECTS, type DialectName } from '../dialects.js';
import { formatFloat } from '../floats.js';
import { MAX_MAX_DEPTH, notABody, resolveMaxDepth } from '../parse.js';
import { duplicateKey, invalidLiteral, MALFORMED, nestingTooDeep, unexpectedCharacter } from '../reasons.js';
import { unrepresentableReason } from '../serialize.js';
import { checkWellFormed } from '../utf8.js';
import type { DocumentFlags } from '../tree.js';
import { concatBytes, decodeBase64 } from '../../../base/bytes.js';
import { CANONICAL_WASM_BASE64 } from './canonical-wasm.js';

export type { DocumentFlags };

export interface WasmDocument {
  readonly flags: DocumentFlags;
  /**
   * Streams the canonical UTF-8 bytes of `dialect` to `sink` in chunks (a chunk is
   * valid only during the call; at most 64 KiB each; `last` on the final one, which may
   * be empty). Throws
   * `CanonicalUnrepresentableError` exactly when `serializeDocument` would.
   */
  write(dialect: DialectName, sink: (chunk: Uint8Array, last: boolean) => void): void;
  /** The whole canonical bytes (a copy). */
  bytes(dialect: DialectName): Uint8Array;
  /** Frees the document's WebAssembly memory; later calls throw. */
  dispose(): void;
}

export interface WasmEngine {
  parse(body: string | Uint8Array, options: { maxDepth: number }): WasmDocument;
}

interface Exports {
  memory: WebAssembly.Memory;
  init(): void;
  alloc(n: number): number;
  free(p: number): void;
  input_alloc(n: number): number;
  input_grow(p: number, used: number, n: number): number;
  heap_bytes(): number;
  parse(input: number, len: number, maxDepth: number, utf8Known: number): number;
  error_info(): number;
  doc_flags(doc: number): number;
  doc_layout(doc: number): number;
  doc_free(doc: number): void;
  work_size(): number;
  serialize(doc: number, dialect: number, work: number): void;
}

// Flag bits and result codes of native/canonical.c.
const F_LONE_SURROGATE = 1;
const F_UNSAFE_INTEGER = 2;
const F_NON_FINITE = 4;
const F_NON_ASCII = 8;
const F_DIALECT_NUMBERS = 16;
const F_NEGATIVE_ZERO = 32;
const R_MALFORMED = 0;
const R_NO_MEMORY = 1;
/** The reason code of a duplicate key (native/canonical.c; the others: reasonText()). */
const E_DUPLICATE = 19;
/** The C side keeps lengths in 29 bits. */
const MAX_BODY_BYTES = 2 ** 29 - 1;
/**
 * Documents of bodies from this size are also freed if they are collected without
 * dispose(). Registering costs about half a microsecond, too much for the small
 * bodies that are the usual case (whose callers dispose them in a finally block).
 */
const FINALIZE_BYTES = 64 * 1024;

const encoder = new TextEncoder();
/** The dialect's number in native/canonical.c (its index in DIALECTS); a TypeError for anything else. */
function dialectCode(dialect: DialectName): number {
  switch (dialect) {
    case 'orjson':
      return 0;
    case 'orjson-legacy':
      return 1;
    case 'python-utf8':
      return 2;
    case 'python':
      return 3;
    default:
      assertDialect(dialect);
      throw new TypeError(`unknown dialect ${String(dialect)}`);
  }
}

class Engine implements WasmEngine {
  readonly x: Exports;
  view: Uint8Array;
  sink: ((chunk: Uint8Array, last: boolean) => void) | undefined;
  /** The work area (output chunk and serializer stack); a second one is made for re-entrant writes. */
  readonly work: number;
  workBusy = false;
  readonly finalizer: FinalizationRegistry<number> | undefined;

  constructor(module: WebAssembly.Module) {
    const instance = new WebAssembly.Instance(module, {
      env: {
        emit: (p: number, n: number, last: number) =>
          this.sink!(new Uint8Array(this.x.memory.buffer, p, n), last === 1),
        format_number: (p: number, n: number, dialect: number, dst: number) =>
          this.formatNumber(p, n, dialect, dst),
        number_is_finite: (p: number, n: number) => (Number.isFinite(Number(this.ascii(p, n))) ? 1 : 0),
      },
    });
    this.x = instance.exports as unknown as Exports;
    this.view = new Uint8Array(this.x.memory.buffer);
    this.x.init();
    this.work = this.x.alloc(this.x.work_size());
    if (this.work === 0) throw new Error('no WebAssembly memory for the work area');
    // A document that is never disposed gives its memory back when it is collected.
    this.finalizer =
      typeof FinalizationRegistry === 'function'
        ? new FinalizationRegistry((doc) => this.x.doc_free(doc))
        : undefined;
  }

  /** The memory as bytes (a new view after the memory grew). */
  mem(): Uint8Array {
    if (this.view.byteLength === 0) this.view = new Uint8Array(this.x.memory.buffer);
    return this.view;
  }

  ascii(p: number, n: number): string {
    const m = this.mem();
    let s = '';
    for (let i = p; i < p + n; i++) s += String.fromCharCode(m[i]!);
    return s;
  }

  formatNumber(p: number, n: number, dialect: number, dst: number): number {
    // Finite under orjson: the document's flags screened non-finite numbers first.
    const text = formatFloat(Number(this.ascii(p, n)), DIALECTS[dialect]!)!;
    const m = this.mem();
    for (let i = 0; i < text.length; i++) m[dst + i] = text.charCodeAt(i);
    return text.length;
  }

  parse(body: string | Uint8Array, options: { maxDepth: number }): WasmDocument {
    let maxDepth = options.maxDepth;
    // resolveMaxDepth (and its TypeError) only for values outside the usual range.
    if (!(Number.isInteger(maxDepth) && maxDepth >= 1 && maxDepth <= MAX_MAX_DEPTH))
      maxDepth = resolveMaxDepth(maxDepth);
    let input: number;
    let len: number;
    if (typeof body === 'string') {
      checkWellFormed(body);
      [input, len] = this.encode(body);
    } else if (body instanceof Uint8Array) {
      len = body.length;
      if (len > MAX_BODY_BYTES) throw tooLarge(len);
      input = this.x.input_alloc(len);
      if (input === 0) throw outOfMemory();
      this.mem().set(body, input);
    } else {
      throw notABody();
    }
    // A string's encoding is valid UTF-8 (checkWellFormed): the error path need not check it.
    const doc = this.x.parse(input, len, maxDepth, typeof body === 'string' ? 1 : 0);
    if (doc === R_NO_MEMORY) throw outOfMemory();
    if (doc === R_MALFORMED) throw this.malformed(input, maxDepth);
    const bits = this.x.doc_flags(doc);
    const flags: DocumentFlags = {
      loneSurrogate: (bits & F_LONE_SURROGATE) !== 0,
      unsafeInteger: (bits & F_UNSAFE_INTEGER) !== 0,
      nonFinite: (bits & F_NON_FINITE) !== 0,
      nonAscii: (bits & F_NON_ASCII) !== 0,
      dialectNumbers: (bits & F_DIALECT_NUMBERS) !== 0,
      negativeZero: (bits & F_NEGATIVE_ZERO) !== 0,
      layoutBytes: this.x.doc_layout(doc),
    };
    return new Document(this, doc, flags, len >= FINALIZE_BYTES);
  }

  /** Encodes a well-formed string into a new input buffer: [pointer, byte length]. */
  encode(text: string): [number, number] {
    const n = text.length;
    if (n > MAX_BODY_BYTES) throw tooLarge(n);
    // Small bodies get room for the worst case; large ones one byte per character
    // first, then exactly what the rest can need, so memory stays close to the body.
    let cap = n <= 65536 ? n * 3 : n;
    let input = this.x.input_alloc(cap);
    if (input === 0) throw outOfMemory();
    const { read, written: first } = encoder.encodeInto(text, this.mem().subarray(input, input + cap));
    let written = first;
    if (read < n) {
      cap = written + 3 * (n - read);
      if (cap > MAX_BODY_BYTES) cap = MAX_BODY_BYTES;
      const grown = this.x.input_grow(input, written, cap);
      if (grown === 0) {
        this.x.free(input);
        throw outOfMemory();
      }
      input = grown;
      const rest = encoder.encodeInto(text.slice(read), this.mem().subarray(input + written, input + cap));
      if (rest.read < n - read) {
        this.x.free(input);
        throw tooLarge(written + rest.written);
      }
      written += rest.written;
    }
    return [input, written];
  }

  /**
   * The WebAssembly parser rejected the body: the JS parser's error, from what it left
   * in error_info() (native/canonical.c, E_*), then frees the input (a duplicate
   * key's bytes lie in it).
   */
  malformed(input: number, maxDepth: number): Error {
    try {
      // struct Failure { reason, offset, arg, arg2 }
      const info = new Uint32Array(this.x.memory.buffer, this.x.error_info(), 4);
      const reason = info[0]!;
      const arg = info[2]!;
      const text =
        reason === E_DUPLICATE
          ? duplicateKey(decodeWtf8(this.mem().subarray(arg, arg + info[3]!)))
          : reasonText(reason, arg, maxDepth);
      if (text === undefined)
        return new Error(
          `jobhook internal error: the WebAssembly canonical engine gave the unknown reason ${reason}`,
        );
      return new BodyMalformedError(text, info[1]!);
    } finally {
      this.x.free(input);
    }
  }

  serialize(doc: number, dialect: number, sink: (chunk: Uint8Array, last: boolean) => void): void {
    const previous = this.sink;
    let work = this.work;
    const nested = this.workBusy;
    if (nested) {
      // A sink that writes another document: it needs its own output buffer.
      work = this.x.alloc(this.x.work_size());
      if (work === 0) throw outOfMemory();
    }
    this.workBusy = true;
    this.sink = sink;
    try {
      this.x.serialize(doc, dialect, work);
    } finally {
      this.sink = previous;
      if (nested) this.x.free(work);
      else this.workBusy = false;
    }
  }
}

class Document implements WasmDocument {
  #doc: number;
  #writing = 0;
  #disposed = false;
  readonly #engine: Engine;
  #token: object | undefined;

  constructor(
    engine: Engine,
    doc: number,
    readonly flags: DocumentFlags,
    finalize: boolean,
  ) {
    this.#engine = engine;
    this.#doc = doc;
    if (finalize && engine.finalizer !== undefined) {
      this.#token = {};
      engine.finalizer.register(this, doc, this.#token);
    }
  }

  write(dialect: DialectName, sink: (chunk: Uint8Array, last: boolean) => void): void {
    const code = dialectCode(dialect);
    if (this.#disposed) throw new Error('this canonical document was disposed');
    const reason = unrepresentableReason(this.flags, dialect);
    if (reason !== undefined)
      throw new CanonicalUnrepresentableError(`No canonical ${dialect} form: ${reason}.`);
    this.#writing++;
    try {
      this.#engine.serialize(this.#doc, code, sink);
    } finally {
      this.#writing--;
      if (this.#disposed && this.#writing === 0) this.#free();
    }
  }

  bytes(dialect: DialectName): Uint8Array {
    const parts: Uint8Array[] = [];
    this.write(dialect, (chunk) => parts.push(chunk.slice()));
    return concatBytes(parts);
  }

  dispose(): void {
    if (this.#disposed) throw new Error('this canonical document was already disposed');
    this.#disposed = true;
    // Disposed from inside its own sink: freed when that write returns.
    if (this.#writing === 0) this.#free();
  }

  #free(): void {
    if (this.#token !== undefined) this.#engine.finalizer?.unregister(this.#token);
    this.#engine.x.doc_free(this.#doc);
    this.#doc = 0;
  }
}

/**
 * The message of a reason code of native/canonical.c (its enum: E_UTF8 = 1, and so on;
 * E_DUPLICATE apart), with what its error left in `arg`; undefined for no known code.
 */
function reasonText(reason: number, arg: number, maxDepth: number): string | undefined {
  switch (reason) {
    case 1: // E_UTF8
      return MALFORMED.invalidUtf8;
    case 2: // E_VALUE_END
      return MALFORMED.valueEnd;
    case 3: // E_VALUE_CHAR
      return unexpectedCharacter(firstUnit(arg), 'a value');
    case 4: // E_LITERAL
      return invalidLiteral(arg === 0x74 ? 'true' : arg === 0x66 ? 'false' : 'null');
    case 5: // E_MINUS
      return MALFORMED.minusSign;
    case 6: // E_POINT
      return MALFORMED.decimalPoint;
    case 7: // E_EXPONENT
      return MALFORMED.exponentMark;
    case 8: // E_HEX
      return MALFORMED.unicodeEscape;
    case 9: // E_UNTERMINATED
      return MALFORMED.unterminatedString;
    case 10: // E_ESCAPE
      return MALFORMED.invalidEscape;
    case 11: // E_CONTROL
      return MALFORMED.controlCharacter;
    case 12: // E_DEPTH
      return nestingTooDeep(maxDepth);
    case 13: // E_ARRAY_END
      return MALFORMED.arrayEnd;
    case 14: // E_ARRAY_CHAR
      return unexpectedCharacter(firstUnit(arg), "',' or ']'");
    case 15: // E_OBJECT_END
      return MALFORMED.objectEnd;
    case 16: // E_OBJECT_CHAR
      return unexpectedCharacter(firstUnit(arg), "',' or '}'");
    case 17: // E_KEY
      return MALFORMED.stringKey;
    case 18: // E_COLON
      return MALFORMED.colon;
    case 20: // E_TRAILING
      return MALFORMED.trailingData;
    default:
      return undefined;
  }
}

/** The first UTF-16 code unit of a code point: what the JS parser's charCodeAt() sees there. */
function firstUnit(codePoint: number): number {
  return codePoint >= 0x10000 ? 0xd800 + ((codePoint - 0x10000) >> 10) : codePoint;
}

let strictDecoder: TextDecoder | undefined;

/** A key as the WebAssembly parser decoded it: UTF-8, or WTF-8 where escapes left lone surrogates. */
function decodeWtf8(b: Uint8Array): string {
  try {
    strictDecoder ??= new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
    return strictDecoder.decode(b);
  } catch {
    // a lone surrogate, three bytes like any code point of its range: decoded below
  }
  let s = '';
  for (let i = 0; i < b.length;) {
    const c = b[i]!;
    const n = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    let cp = n === 1 ? c : c & (0x7f >> n);
    for (let k = 1; k < n; k++) cp = (cp << 6) | (b[i + k]! & 0x3f);
    s += String.fromCodePoint(cp);
    i += n;
  }
  return s;
}

function outOfMemory(): Error {
  return new RangeError('the WebAssembly canonical engine ran out of memory');
}

function tooLarge(n: number): Error {
  return new RangeError(
    `a body of ${n} bytes is too large for the WebAssembly canonical engine (at most ${MAX_BODY_BYTES})`,
  );
}

let engine: Engine | null | undefined;

/**
 * Compiles the embedded module once (lazily, synchronously); undefined when
 * WebAssembly is unavailable or the module cannot be instantiated (then callers
 * use the JS engine).
 */
export function wasmEngine(): WasmEngine | undefined {
  if (engine === undefined) {
    engine = null;
    try {
      if (typeof WebAssembly === 'object' && typeof atob === 'function') {
        engine = new Engine(new WebAssembly.Module(decodeBase64(CANONICAL_WASM_BASE64)));
      }
    } catch {
      engine = null;
    }
  }
  return engine ?? undefined;
}

/** Bytes of WebAssembly heap in use or kept for reuse (tests: no growth over parse/dispose cycles). */
export function wasmHeapBytes(): number | undefined {
  wasmEngine();
  return engine ? engine.x.heap_bytes() : undefined;
}

/** Size of the WebAssembly memory: its high-water mark, as it never shrinks (benchmarks). */
export function wasmMemoryBytes(): number | undefined {
  wasmEngine();
  return engine ? engine.x.memory.buffer.byteLength : undefined;
}
