import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const LABEL = 'TEST-ONLY KEY made by `jobhook keygen`: for tests of a webhook receiver, never for anything real.\n';

export interface TestKeyFiles {
  privateKey: string;
  publicKey: string;
  publicKeyPkcs1: string;
}

/** Writes a labelled test RSA key pair (PEM) into `dir`. Refuses to overwrite unless `force`. */
export function writeTestKeyPair(dir: string, options: { bits?: number; force?: boolean } = {}): TestKeyFiles {
  const bits = options.bits ?? 2048;
  if (![2048, 3072, 4096].includes(bits)) throw new TypeError('--bits must be 2048, 3072 or 4096');
  const files = {
    privateKey: join(dir, 'test-only-private.pem'),
    publicKey: join(dir, 'test-only-public.pem'),
    publicKeyPkcs1: join(dir, 'test-only-public-pkcs1.pem'),
  };
  if (!options.force) {
    for (const f of Object.values(files)) if (existsSync(f)) throw new TypeError(`${f} exists; pass --force to overwrite`);
  }
  mkdirSync(dir, { recursive: true });
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: bits });
  writeFileSync(files.privateKey, LABEL + privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  writeFileSync(files.publicKey, LABEL + publicKey.export({ type: 'spki', format: 'pem' }));
  writeFileSync(files.publicKeyPkcs1, LABEL + publicKey.export({ type: 'pkcs1', format: 'pem' }));
  return files;
}

/** A gateway-shaped payload as the senders write it (float tokens such as 1.0 kept). */
export function examplePayload(options: { status?: 'success' | 'fail'; jobId?: string } = {}): string {
  const jobId = options.jobId ?? globalThis.crypto.randomUUID();
  const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
  const head =
    `{"event":"async_job_completed","job_id":${JSON.stringify(jobId)},"status":"${options.status ?? 'success'}",` +
    `"feature":"ocr","subfeature":"ocr","provider":"example","model":null,"created_at":"${now}","finished_at":"${now}",`;
  if (options.status === 'fail') return head + '"error":{"message":"provider timeout"}}';
  return head + '"output":{"text":"Grüße","confidence":1.0,"pages":[{"page":1,"box":{"x":0.0,"y":0.5,"w":12.25,"h":1e-7}}]}}';
}
