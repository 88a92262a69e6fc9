import { createReadStream } from 'node:fs';
import { concatBytes } from '../../lib/entries/tools-door.js';

/** Where a CLI run reads and writes; tests pass their own. */
export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /**
   * Standard input: whole, or as chunks when they come (`process.stdin`). The commands
   * that read deliveries take the chunks as they come: JSONL is verified line by line.
   */
  readStdin: () => Promise<Uint8Array> | AsyncIterable<Uint8Array>;
  /** True when stderr is a terminal (progress is shown only then). */
  isTTY: boolean;
}

export function processIo(): CliIo {
  return {
    stdout: (t) => process.stdout.write(t),
    stderr: (t) => process.stderr.write(t),
    readStdin: () => process.stdin,
    isTTY: process.stderr.isTTY === true,
  };
}

/** The chunks of a file argument, `-` meaning standard input; nothing is read before they are asked for. */
export async function* inputChunks(path: string | undefined, io: CliIo): AsyncGenerator<Uint8Array> {
  if (path !== undefined && path !== '-') {
    yield* createReadStream(path, { highWaterMark: 64 * 1024 }) as AsyncIterable<Buffer>;
    return;
  }
  const stdin = io.readStdin();
  if (stdin instanceof Promise) yield await stdin;
  else yield* stdin;
}

/**
 * Reads a file argument whole, `-` meaning standard input, at most `limit` bytes (a
 * UsageError past it, `why` saying where the limit comes from: /dev/zero is not read to
 * the end of memory).
 */
export async function readInput(
  path: string | undefined,
  io: CliIo,
  limit: number,
  why = '--max-body-bytes',
): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of inputChunks(path, io)) {
    size += chunk.byteLength;
    if (size > limit) throw new UsageError(`${inputName(path)} is larger than ${limit} bytes (${why})`);
    chunks.push(chunk);
  }
  return concatBytes(chunks);
}

/** How messages name an input. */
export function inputName(path: string | undefined): string {
  return path === undefined || path === '-' ? '<stdin>' : path;
}

/** A usage or I/O problem: exit code 2 with a one-line message. */
export class UsageError extends Error {}

/**
 * Characters a terminal acts on instead of showing: C0 (line breaks and escape
 * sequences included), DEL, C1 (U+009B is an 8-bit CSI), and the bidirectional
 * embeddings, overrides and isolates that reorder what is shown (Trojan Source).
 */
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

function hex(c: string, digits: number): string {
  return c.charCodeAt(0).toString(16).padStart(digits, '0');
}

/**
 * Text from the input (job ids, header values, messages that quote them, file names)
 * made safe to print: each unsafe character is written visibly, `\x1b`, `\x7f`,
 * `\u009b`, `\u202e`. Anything echoed from a capture goes through this (or `jsonText`).
 */
export function escapeControls(text: string): string {
  UNSAFE.lastIndex = 0;
  if (!UNSAFE.test(text)) return text;
  return text.replace(UNSAFE, (c) => (c < '\u0080' ? `\\x${hex(c, 2)}` : `\\u${hex(c, 4)}`));
}

/** Characters JSON.stringify leaves as they are but a terminal acts on (C0 it already escapes). */
const UNSAFE_IN_JSON = /[\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/**
 * JSON.stringify, with DEL, C1 and bidirectional controls escaped as `\uXXXX` too:
 * the same value for a JSON reader, nothing a terminal acts on for a person.
 */
export function jsonText(value: unknown, indent?: number): string {
  const text = JSON.stringify(value, null, indent);
  UNSAFE_IN_JSON.lastIndex = 0;
  if (!UNSAFE_IN_JSON.test(text)) return text;
  return text.replace(UNSAFE_IN_JSON, (c) => `\\u${hex(c, 4)}`);
}
