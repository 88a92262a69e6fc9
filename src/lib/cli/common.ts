import { readFile } from 'node:fs/promises';
import type { NodePublicKeyInput } from '../crypto/node.js';
import { parseCaptures, type Capture, type CaptureOptions } from './captures.js';
import { readInput, UsageError, type CliIo } from './io.js';

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
  if (paths === undefined || paths.length === 0) throw new UsageError('--key FILE is required (repeat it for a key rotation)');
  return Promise.all(paths.map(loadKeyFile));
}

/** Deliveries from the inputs (standard input when none or `-`). */
export async function loadCaptures(inputs: string[], io: CliIo, options: CaptureOptions): Promise<Capture[]> {
  const sources = inputs.length === 0 ? ['-'] : inputs;
  const out: Capture[] = [];
  for (const source of sources) {
    const bytes = await readInput(source, io);
    out.push(...parseCaptures(bytes, source === '-' ? '<stdin>' : source, options));
  }
  if (out.length === 0) throw new UsageError('no delivery found in the input');
  return out;
}

export function dialectOption(value: string | undefined): readonly import('../canonical/dialects.js').DialectName[] | undefined {
  if (value === undefined || value === 'auto') return undefined;
  return [value as import('../canonical/dialects.js').DialectName];
}

/** parseArgs options shared by the commands that read deliveries. */
export const DELIVERY_OPTIONS = {
  key: { type: 'string', multiple: true },
  signature: { type: 'string' },
  'signature-header': { type: 'string' },
  dialect: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;
