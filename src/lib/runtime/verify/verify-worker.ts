/**
 * A worker thread of the verification pool: verifies large bodies off the event loop.
 * It answers with what verified (dialect, key, digest) and a plan for building the
 * value piece by piece on the main thread; errors come back as code and message.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { isWebhookError } from '../../base/errors.js';
import { drive, matching, type ParsedBody } from '../../core/verify/core.js';
import { matchingSteps } from './node-verifier.js';
import { sha256Hex } from '../crypto/node.js';
import { resolveOptions, type VerifyOptionsBase } from '../../core/verify/options.js';
import { loadWasmEngine } from '../../core/canonical/wasm/lazy.js';
import { splitPlan } from '../../core/verify/split.js';
import type { WorkerRequest, WorkerResponse } from './worker-messages.js';

// The WebAssembly engine before the first body (a worker verifies the large ones).
await loadWasmEngine();

// No keys here: the main thread opened the signature and sends what the keys recovered.
const o = resolveOptions({ ...(workerData as VerifyOptionsBase), maxAgeSeconds: false });
const perform = matchingSteps(o);

function conclude(
  parsed: ParsedBody,
  body: Uint8Array,
  dialect: string,
  keyIndex: number,
  canonicalSha256: string,
): NonNullable<Extract<WorkerResponse, { ok: unknown }>['ok']> {
  // Values that need the tree (-0, big integers in the exact modes) are built on the main thread at once.
  const plain = !parsed.flags.negativeZero && (o.integers === 'number' || !parsed.flags.unsafeInteger);
  // The raw bytes' hash too: the receiver remembers which bytes verified (a retry of them costs nothing), and the body is here, not there.
  return {
    dialect,
    keyIndex,
    canonicalSha256,
    plan: plain ? splitPlan(body) : undefined,
    rawSha256: sha256Hex(body),
  };
}

parentPort!.on('message', (m: WorkerRequest) => {
  let response: WorkerResponse;
  try {
    const ok = drive(
      matching(m.body, { opened: m.opened }, o, (parsed, dialect, keyIndex, digest) =>
        conclude(parsed, m.body, dialect, keyIndex, digest),
      ),
      perform,
    );
    response = { id: m.id, body: m.body, ok };
  } catch (err) {
    const e = err as Error & { code?: string; offset?: number; limit?: number; reason?: string };
    const error = {
      name: e.name,
      message: e.message,
      ...(isWebhookError(err) ? { code: err.code } : {}),
      ...(e.offset === undefined ? {} : { offset: e.offset }),
      ...(e.limit === undefined ? {} : { limit: e.limit }),
      ...(e.reason === undefined ? {} : { reason: e.reason }),
    };
    response = { id: m.id, body: m.body, error };
  }
  // The body goes back without a copy: the main thread builds the event from it.
  parentPort!.postMessage(response, [m.body.buffer as ArrayBuffer]);
});
