import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  enable,
  importPrivateKey,
  option,
  optionError,
  checkOptionNames,
  type OptionNamesOf,
} from '../../lib/entries/tools-door.js';

/** First line of every key file the tooling writes. */
export const TEST_KEY_LABEL =
  'TEST-ONLY KEY made by `jobhook keygen`: for tests of a webhook receiver, never for anything real.\n';

/** Modulus sizes the tooling makes (the verifiers refuse keys under 2048 bits). */
export const TEST_KEY_BITS = [2048, 3072, 4096] as const;

/** A TEST-ONLY RSA key pair as PEM strings. */
export interface TestKeyPair {
  /** PKCS#8 PEM (`BEGIN PRIVATE KEY`). */
  privateKey: string;
  /** SPKI PEM (`BEGIN PUBLIC KEY`). */
  publicKey: string;
}

export interface TestKeyOptions {
  /** Modulus size: 2048 (default), 3072 or 4096. */
  bits?: number;
}

function checkBits(bits: number | undefined): number {
  const b = bits ?? 2048;
  if (!(TEST_KEY_BITS as readonly number[]).includes(b))
    throw optionError`${option('bits')} must be 2048, 3072 or 4096, got ${String(bits)}`;
  return b;
}

/** Generates the key objects; throws an OptionError for an unsupported size. */
export function generateTestKeyObjects(options: TestKeyOptions = {}): {
  privateKey: KeyObject;
  publicKey: KeyObject;
} {
  return generateKeyPairSync('rsa', { modulusLength: checkBits(options.bits) });
}

/**
 * Generates a **TEST-ONLY** RSA key pair as PEM strings (`privateKey` PKCS#8,
 * `publicKey` SPKI), 2048 bits by default (`bits`: 2048, 3072 or 4096). For tests of
 * a receiver only: the keys are made on the spot and never protected.
 *
 * @example
 * ```ts
 * import { generateTestKeys, signPayload } from 'jobhook/testing';
 * import { createVerifier } from 'jobhook';
 *
 * const keys = generateTestKeys();
 * const verifier = createVerifier({ publicKey: keys.publicKey });
 * const { body, headers } = signPayload('{"event":"async_job_completed","job_id":"j-1","status":"success","output":{"confidence":1.0}}', keys.privateKey);
 * verifier.verify(body, headers);
 * ```
 * @throws OptionError (a TypeError) for an unsupported `bits`.
 */
export function generateTestKeys(options: TestKeyOptions = {}): TestKeyPair {
  checkOptionNames(options, TEST_KEY_OPTIONS);
  const { privateKey, publicKey } = generateTestKeyObjects(options);
  return {
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    publicKey: publicKey.export({ type: 'spki', format: 'pem' }) as string,
  };
}

export interface TestKeyFiles {
  privateKey: string;
  publicKey: string;
  publicKeyPkcs1: string;
}

/** Writes a labelled test RSA key pair (PEM) into `dir`. Refuses to overwrite unless `force`. */
export function writeTestKeyPair(
  dir: string,
  options: TestKeyOptions & { force?: boolean } = {},
): TestKeyFiles {
  const bits = checkBits(options.bits);
  const files = {
    privateKey: join(dir, 'test-only-private.pem'),
    publicKey: join(dir, 'test-only-public.pem'),
    publicKeyPkcs1: join(dir, 'test-only-public-pkcs1.pem'),
  };
  if (!options.force) {
    for (const f of Object.values(files))
      if (existsSync(f)) throw optionError`${f} exists; pass ${enable('force')} to overwrite`;
  }
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: bits });
  mkdirSync(dir, { recursive: true });
  writeFileSync(files.privateKey, TEST_KEY_LABEL + privateKey.export({ type: 'pkcs8', format: 'pem' }), {
    mode: 0o600,
  });
  writeFileSync(files.publicKey, TEST_KEY_LABEL + publicKey.export({ type: 'spki', format: 'pem' }));
  writeFileSync(files.publicKeyPkcs1, TEST_KEY_LABEL + publicKey.export({ type: 'pkcs1', format: 'pem' }));
  return files;
}

/** `generateTestKeys` from `jobhook/testing`. */
export const TEST_KEY_OPTIONS = { bits: true } as const satisfies OptionNamesOf<TestKeyOptions>;

/**
 * A string that names a key file rather than holding a key: one line, short, and a file
 * that exists, a key file's extension, or a path's start. A PEM has BEGIN lines; base64
 * DER starts with `M` and has no extension.
 */
function looksLikeKeyPath(value: string): boolean {
  if (value.length > 1024 || /[\r\n]/.test(value) || value.includes('-----BEGIN')) return false;
  return (
    /\.(pem|key|crt|cer|der|txt)$/i.test(value) ||
    /^(\.{1,2}[\\/]|[\\/]|~[\\/]|[A-Za-z]:[\\/])/.test(value) ||
    existsSync(value)
  );
}

/**
 * The RSA private key of a tool's `privateKey` option (a PEM string or a KeyObject). A
 * file's path given instead of its content is named as such, with the fix (read the
 * file); anything else is the signer's to refuse.
 */
export function privateKeyOption(value: string | KeyObject): KeyObject {
  if (typeof value === 'string' && looksLikeKeyPath(value)) {
    const shown = JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);
    throw optionError`${option('privateKey')} looks like a file path (${shown}), not a PEM: pass the file's content, readFileSync(${shown}, 'utf8')`;
  }
  return importPrivateKey(value);
}
