import { readFile } from 'node:fs/promises';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import {
  checkNumber,
  nearestName,
  OptionError,
  type NodePublicKeyInput,
  type NumberRule,
  type OptionMention,
} from '../../lib/entries/tools-door.js';
import { DEFAULT_MAX_BODY_BYTES, type DialectName } from '../../index.js';
import { readCaptures, type Capture, type CaptureOptions } from './captures.js';
import { decodedCapture } from './content-encoding.js';
import { inputChunks, UsageError, type CliIo } from './io.js';

/** A key file as the verifier takes it: PEM text, a JWK, or DER bytes. */
export async function loadKeyFile(path: string): Promise<NodePublicKeyInput> {
  const bytes = new Uint8Array(await readFile(path));
  const text = new TextDecoder().decode(bytes);
  if (text.includes('-----BEGIN')) return text;
  if (text.trimStart().startsWith('{')) {
    try {
      return JSON.parse(text) as NodePublicKeyInput;
    } catch {
      throw new UsageError(`${path}: neither PEM, JWK nor DER`);
    }
  }
  return bytes;
}

export async function loadKeys(paths: string[] | undefined): Promise<NodePublicKeyInput[]> {
  if (paths === undefined || paths.length === 0)
    throw new UsageError('--key FILE is required (repeat it for a key rotation)');
  return Promise.all(paths.map(loadKeyFile));
}

/**
 * Deliveries from the inputs (standard input when none or `-`), one at a time, each body
 * decoded as its Content-Encoding says: JSON lines are verified while the rest is still
 * being read. UsageError when there is none.
 */
export async function* captureStream(
  inputs: string[],
  io: CliIo,
  options: CaptureOptions,
): AsyncGenerator<Capture> {
  let found = false;
  for (const path of inputs.length === 0 ? ['-'] : inputs) {
    for await (const capture of readCaptures(inputChunks(path, io), path, options)) {
      found = true;
      yield decodedCapture(capture, options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES);
    }
  }
  if (!found) throw new UsageError('no delivery found in the input');
}

/**
 * parseArgs for `jobhook <command>`: an unknown option is a UsageError that names the
 * nearest known one (`--kye`: did you mean --key?).
 */
export function parseFlags<T extends ParseArgsConfig>(
  command: string,
  config: T,
): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (err) {
    const e = err as Error & { code?: string };
    const given = /^Unknown option '([^']*)'/.exec(e.message)?.[1];
    if (e.code !== 'ERR_PARSE_ARGS_UNKNOWN_OPTION' || given === undefined) throw err;
    const near = given.startsWith('--')
      ? nearestFlag(given.slice(2), Object.keys(config.options ?? {}))
      : undefined;
    throw new UsageError(
      `unknown option ${given}; ${near === undefined ? `'jobhook ${command} --help' lists the options` : `did you mean --${near}?`}`,
    );
  }
}

/**
 * The known flag nearest to `given` (names without their dashes): a few edits away (of
 * those as near, the one sharing the longest start), else the one flag sharing its first
 * four characters or more (`retry` → `retries`).
 */
function nearestFlag(given: string, known: readonly string[]): string | undefined {
  const shared = (name: string) => {
    let k = 0;
    while (k < name.length && name[k] === given[k]) k++;
    return k;
  };
  const byStart = [...known].sort((a, b) => shared(b) - shared(a));
  const near = nearestName(given, byStart);
  if (near !== undefined || byStart.length === 0) return near;
  const longest = shared(byStart[0]!);
  const sharing = byStart.filter((name) => shared(name) === longest);
  return longest >= 4 && sharing.length === 1 ? sharing[0] : undefined;
}

/** The flag of an option of the library: its name in kebab-case (`allowInsecure` → `--allow-insecure`). */
export function flagOf(option: string): string {
  return '--' + option.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase());
}

/**
 * The library names options (`url`, `allowInsecure: true`); a command says the same
 * with its flags. `flags` maps the options whose flag is not simply the kebab-case
 * name (`url` → `--to`). Other errors pass through unchanged.
 */
export function inFlagTerms(err: unknown, flags: Readonly<Record<string, string>> = {}): unknown {
  if (!(err instanceof OptionError)) return err;
  return new UsageError(err.describe((m: OptionMention) => flags[m.option] ?? flagOf(m.option)));
}

/** Runs `fn`, re-wording option errors with the command's flags. */
export async function withFlags<T>(
  flags: Readonly<Record<string, string>>,
  fn: () => Promise<T>,
): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw inFlagTerms(err, flags);
  }
}

/** The number a flag gives (`what` names it in the error). */
export function numberFlag(value: string | undefined, what: string, rule?: NumberRule): number | undefined {
  if (value === undefined) return undefined;
  return checkNumber(value.trim() === '' || Number.isNaN(Number(value)) ? value : Number(value), what, rule);
}

export function dialectOption(value: string | undefined): readonly DialectName[] | undefined {
  if (value === undefined || value === 'auto') return undefined;
  return [value as DialectName];
}

/** parseArgs options shared by the commands that read deliveries. */
export const DELIVERY_OPTIONS = {
  key: { type: 'string', multiple: true },
  signature: { type: 'string' },
  'signature-header': { type: 'string' },
  dialect: { type: 'string' },
  'max-body-bytes': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;
