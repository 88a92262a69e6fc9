import { isWebhookError } from '../../index.js';
import { VERSION, loadWasmEngine, nearestName } from '../../lib/entries/tools-door.js';
import { canonicalizeCommand } from './canonicalize.js';
import { explainCommand } from './explain.js';
import { keygenCommand, sendCommand, signCommand } from './keygen-sign-send.js';
import { verifyCommand } from './verify.js';
import { escapeControls, UsageError, type CliIo } from './io.js';

type Command = (argv: string[], io: CliIo) => Promise<number>;

const COMMANDS: Record<string, { run: Command; summary: string }> = {
  verify: {
    run: verifyCommand,
    summary: 'verify captured deliveries (capture objects, HTTP dumps, JSONL, bare bodies)',
  },
  explain: { run: explainCommand, summary: 'explain why a delivery does not verify' },
  canonicalize: { run: canonicalizeCommand, summary: 'print the canonical JSON (or its SHA-256) of a body' },
  keygen: { run: keygenCommand, summary: 'write a TEST-ONLY RSA key pair' },
  sign: { run: signCommand, summary: 'sign a payload as the gateway does (prints a capture object)' },
  send: { run: sendCommand, summary: "POST a signed delivery with the gateway's retry policy" },
  simulate: {
    run: async (argv, io) => (await import('./simulate.js')).simulateCommand(argv, io),
    summary: 'run a local gateway that creates jobs and sends signed webhooks',
  },
  check: {
    run: async (argv, io) => (await import('./check.js')).checkCommand(argv, io),
    summary: 'prove a deployed receiver takes what the gateway sends (a scorecard)',
  },
};

export const MAIN_HELP = `Usage: jobhook <command> [options]

Commands:
${Object.entries(COMMANDS)
  .map(([name, c]) => `  ${name.padEnd(13)} ${c.summary}`)
  .join('\n')}

Run 'jobhook <command> --help' for a command's options and an example.
  --version     print the version

Example:
  jobhook verify --key gateway.pem captured.json
  jobhook explain --key gateway.pem failed.http
`;

/**
 * Runs the CLI in-process and returns the exit code: 0 success, 1 a verification
 * failed, 2 a usage or I/O error (one line on stderr).
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--version' || name === '-v') {
    io.stdout(`${VERSION}\n`);
    return 0;
  }
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.stdout(MAIN_HELP);
    return name === undefined ? 2 : 0;
  }
  const command = COMMANDS[name];
  if (command === undefined) {
    const near = nearestName(name, Object.keys(COMMANDS));
    const hint = near === undefined ? "try 'jobhook --help'" : `did you mean ${near}?`;
    io.stderr(`jobhook: unknown command '${escapeControls(name)}' (${hint})\n`);
    return 2;
  }
  // The commands canonicalize whole captures: with the WebAssembly engine from the first one.
  await loadWasmEngine();
  try {
    return await command.run(rest, io);
  } catch (err) {
    // Messages quote file names and input: shown with their control characters escaped.
    io.stderr(`jobhook ${name}: ${escapeControls(describeError(err))}\n`);
    return 2;
  }
}

function describeError(err: unknown): string {
  if (isWebhookError(err)) return `${err.code}: ${err.message}`;
  if (
    err instanceof UsageError ||
    err instanceof TypeError ||
    (err as { code?: string })?.code?.startsWith('ERR_PARSE_ARGS')
  )
    return (err as Error).message;
  const e = err as NodeJS.ErrnoException;
  if (e && typeof e.code === 'string' && typeof e.message === 'string') return e.message;
  return String(err);
}
