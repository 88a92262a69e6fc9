import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../../../src/tools/cli/main.js';
import type { CliIo } from '../../../src/tools/cli/io.js';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  /** Standard input: whole, or chunks handed over only when the CLI asks for them. */
  stdin?: string | Uint8Array | AsyncIterable<Uint8Array>;
  tty?: boolean;
  /** Called with each block the CLI writes to stdout, as it writes it. */
  onStdout?: (text: string) => void;
}

/** Runs the CLI in-process with an argv array, capturing its output. */
export async function cli(argv: string[], options: CliOptions = {}): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const { stdin } = options;
  const io: CliIo = {
    stdout: (t) => {
      stdout += t;
      options.onStdout?.(t);
    },
    stderr: (t) => void (stderr += t),
    readStdin: () =>
      typeof stdin === 'string'
        ? Promise.resolve(new TextEncoder().encode(stdin))
        : stdin instanceof Uint8Array || stdin === undefined
          ? Promise.resolve(stdin ?? new Uint8Array())
          : stdin,
    isTTY: options.tty ?? false,
  };
  const code = await runCli(argv, io);
  return { code, stdout, stderr };
}

/** A new temporary folder and a function that writes a file in it, returning its path (objects as indented JSON). */
export function scratchFiles(
  prefix: string,
): (name: string, content: string | Uint8Array | object) => string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return (name, content) => {
    const path = join(dir, name);
    writeFileSync(
      path,
      typeof content === 'string' || content instanceof Uint8Array
        ? content
        : JSON.stringify(content, null, 2),
    );
    return path;
  };
}
