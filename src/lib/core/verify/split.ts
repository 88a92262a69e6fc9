/**
 * Building the value of a large verified body without holding the event loop: a plan
 * cuts the body into pieces of at most `maxPiece` bytes (made by a worker, from bytes
 * already proven strict JSON), and the value is assembled from `JSON.parse` of each
 * piece, yielding to the event loop between slices of work. Runtime-neutral.
 */
import type { JsonValue } from '../canonical/to-value.js';

/** Consecutive small members or items, parsed together (`{` or `[` + the run + `}` or `]`). */
type Run = { kind: 'run'; start: number; end: number };
/** A large member, with a plan of its own. */
type Member = { kind: 'member'; keyStart: number; keyEnd: number; value: Plan };
/** A large item, with a plan of its own. */
type Item = { kind: 'item'; value: Plan };

/** How a value is rebuilt: one parse, or its parts. Offsets are byte offsets in the body. */
export type Plan =
  | { kind: 'leaf'; start: number; end: number }
  | { kind: 'object'; parts: Array<Run | Member> }
  | { kind: 'array'; parts: Array<Run | Item> };

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

class Scanner {
  constructor(
    readonly b: Uint8Array,
    readonly maxPiece: number,
  ) {}

  ws(i: number): number {
    while (isSpace(this.b[i]!)) i++;
    return i;
  }

  /** End of the string starting at `i` (the opening quote), after the closing quote. */
  string(i: number): number {
    const b = this.b;
    for (i++; ; i++) {
      const c = b[i]!;
      if (c === QUOTE) return i + 1;
      if (c === BACKSLASH) i++;
    }
  }

  /** End of the scalar (number or literal) starting at `i`. */
  scalar(i: number): number {
    const b = this.b;
    while (i < b.length) {
      const c = b[i]!;
      if (c === 0x2c || c === 0x5d || c === 0x7d || isSpace(c)) break;
      i++;
    }
    return i;
  }

  /** The value at `i`: its end, and its plan (a leaf when it is small or a scalar). */
  value(i: number): { end: number; plan: Plan } {
    const c = this.b[i];
    if (c === 0x7b) return this.container(i, true);
    if (c === 0x5b) return this.container(i, false);
    const end = c === QUOTE ? this.string(i) : this.scalar(i);
    return { end, plan: { kind: 'leaf', start: i, end } };
  }

  /**
   * The object's members or the array's items from `start` (the opening brace or
   * bracket): consecutive small ones grouped in runs, each large one planned apart.
   */
  private container(start: number, isObject: boolean): { end: number; plan: Plan } {
    const close = isObject ? 0x7d : 0x5d;
    const parts: Array<Run | Member | Item> = [];
    let run: Run | undefined;
    let i = this.ws(start + 1);
    if (this.b[i] === close) return { end: i + 1, plan: { kind: 'leaf', start, end: i + 1 } };
    for (;;) {
      const keyEnd = isObject ? this.string(i) : i;
      const v = this.value(isObject ? this.ws(this.ws(keyEnd) + 1) : i);
      if (v.end - i > this.maxPiece) {
        run = undefined;
        parts.push(
          isObject ? { kind: 'member', keyStart: i, keyEnd, value: v.plan } : { kind: 'item', value: v.plan },
        );
      } else if (run !== undefined && v.end - run.start <= this.maxPiece) {
        run.end = v.end;
      } else {
        run = { kind: 'run', start: i, end: v.end };
        parts.push(run);
      }
      i = this.ws(v.end);
      if (this.b[i] === close) break;
      i = this.ws(i + 1);
    }
    const end = i + 1;
    if (end - start <= this.maxPiece) return { end, plan: { kind: 'leaf', start, end } };
    return {
      end,
      plan: isObject
        ? { kind: 'object', parts: parts as Array<Run | Member> }
        : { kind: 'array', parts: parts as Array<Run | Item> },
    };
  }
}

/** The plan of a body already proven strict JSON (so the scan checks nothing). */
export function splitPlan(body: Uint8Array, maxPiece = 64 * 1024): Plan {
  const s = new Scanner(body, maxPiece);
  return s.value(s.ws(0)).plan;
}

const decoder = new TextDecoder();
// setImmediate where there is one (Node, Bun, Deno): it lets pending I/O run, without the 1 ms floor of a timer.
const yieldToLoop: () => Promise<void> =
  typeof (globalThis as { setImmediate?: unknown }).setImmediate === 'function'
    ? () =>
        new Promise<void>((resolve) =>
          (globalThis as unknown as { setImmediate: (f: () => void) => void }).setImmediate(resolve),
        )
    : () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/**
 * The value of `body` from its plan, equal to `JSON.parse` of the whole body, parsed
 * piece by piece; after each `sliceMs` of work it lets the event loop run.
 */
export async function buildValue(body: Uint8Array, plan: Plan, sliceMs = 3): Promise<JsonValue> {
  let since = performance.now();
  const pause = async () => {
    if (performance.now() - since < sliceMs) return;
    await yieldToLoop();
    since = performance.now();
  };
  const text = (start: number, end: number) => decoder.decode(body.subarray(start, end));
  const build = async (p: Plan): Promise<JsonValue> => {
    if (p.kind === 'leaf') {
      const v = JSON.parse(text(p.start, p.end)) as JsonValue;
      await pause();
      return v;
    }
    if (p.kind === 'object') {
      const out: { [key: string]: JsonValue } = {};
      // As JSON.parse does: "__proto__" is an own property, not the prototype.
      const set = (key: string, value: JsonValue) =>
        Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
      for (const part of p.parts) {
        if (part.kind === 'member')
          set(JSON.parse(text(part.keyStart, part.keyEnd)) as string, await build(part.value));
        else {
          const members = JSON.parse(`{${text(part.start, part.end)}}`) as { [key: string]: JsonValue };
          for (const key of Object.keys(members)) set(key, members[key]!);
          await pause();
        }
      }
      return out;
    }
    const out: JsonValue[] = [];
    for (const part of p.parts) {
      if (part.kind === 'item') out.push(await build(part.value));
      else {
        for (const v of JSON.parse(`[${text(part.start, part.end)}]`) as JsonValue[]) out.push(v);
        await pause();
      }
    }
    return out;
  };
  return build(plan);
}
