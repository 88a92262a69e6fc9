import { signDelivery } from '../../src/index.js';
import { privatePem } from './keys.js';

/** A gateway-shaped payload as compact JSON text with float tokens kept (1.0, 0.0), finished a moment ago (inside the replay window). */
export function payloadText(jobId: string, extra = ''): string {
  const finished = new Date(Date.now() - 5_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
  return (
    `{"event":"async_job_completed","job_id":${JSON.stringify(jobId)},"status":"success","feature":"ocr","subfeature":"ocr",` +
    `"provider":"acme","model":null,"created_at":"2026-11-21T10:00:00Z","finished_at":"${finished}",` +
    `"output":{"text":"Grüße","confidence":1.0,"box":{"x":0.0,"y":0.5}}${extra}}`
  );
}

/** Signed with the TEST-ONLY 2048-bit key from fixtures/keys. */
export function signed(jobId: string, extra = ''): { body: string; headers: Record<string, string> } {
  return signDelivery(payloadText(jobId, extra), privatePem(2048));
}

let n = 0;
export function jobId(label = 'job'): string {
  return `${label}-${process.pid}-${Date.now()}-${n++}`;
}
