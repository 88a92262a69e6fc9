import { readFile } from 'node:fs/promises';
import {
  checkNumber,
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
