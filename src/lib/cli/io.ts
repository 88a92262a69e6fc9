import { readFile } from 'node:fs/promises';

/** Where a CLI run reads and writes; tests pass their own. */
export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Whole standard input as bytes. */
  readStdin: () => Promise<Uint8Array>;
  /** True when stderr is a terminal (progress is shown only then). */
  isTTY: boolean;
}

export function processIo(): CliIo {
  return {
    stdout: (t) => process.stdout.write(t),
    stderr: (t) => process.stderr.write(t),
    readStdin: async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
      return new Uint8Array(Buffer.concat(chunks));
    },
    isTTY: process.stderr.isTTY === true,
  };
}

/** Reads a file argument, `-` meaning standard input. */
export async function readInput(path: string | undefined, io: CliIo): Promise<Uint8Array> {
  if (path === undefined || path === '-') return io.readStdin();
  return new Uint8Array(await readFile(path));
}

/** A usage or I/O problem: exit code 2 with a one-line message. */
export class UsageError extends Error {}
