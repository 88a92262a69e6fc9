import { runCli } from '../../src/lib/cli/main.js';
import type { CliIo } from '../../src/lib/cli/io.js';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI in-process with an argv array, capturing its output. */
export async function cli(argv: string[], options: { stdin?: string | Uint8Array; tty?: boolean } = {}): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: (t) => void (stdout += t),
    stderr: (t) => void (stderr += t),
    readStdin: async () => (typeof options.stdin === 'string' ? new TextEncoder().encode(options.stdin) : (options.stdin ?? new Uint8Array())),
    isTTY: options.tty ?? false,
  };
  const code = await runCli(argv, io);
  return { code, stdout, stderr };
}
