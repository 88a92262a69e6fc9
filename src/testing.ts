/**
 * jobhook test tooling: a local gateway simulator, TEST-ONLY keys and signed
 * payloads, to test a webhook receiver without the real gateway. Node only.
 * @packageDocumentation
 */
import type { KeyObject } from 'node:crypto';
import type { SignedDelivery } from './index.js';
import {
  generateTestKeys as generateTestKeysCore,
  type TestKeyOptions,
  type TestKeyPair,
} from './tools/deliveries/keys.js';
import {
  signPayload as signPayloadCore,
  type PayloadInput,
  type SignPayloadOptions,
} from './tools/deliveries/sign-payload.js';
import {
  startGatewaySimulator as startCore,
  type GatewaySimulator,
  type GatewaySimulatorOptions,
} from './tools/simulator/simulator.js';
import { checkReceiver as checkCore, type CheckOptions, type CheckReport } from './tools/check/index.js';
import { formatCheckReport as formatCore } from './tools/check/report.js';

export type {
  DeliveryAttempt,
  DeliveryResult,
  DeliverySending,
  GatewaySimulator,
  GatewaySimulatorOptions,
  SimulatedDelivery,
  SimulatedJob,
} from './tools/simulator/simulator.js';
export { SIMULATOR_USER_AGENT } from './tools/simulator/simulator.js';
export type { TestKeyOptions, TestKeyPair } from './tools/deliveries/keys.js';
export type { PayloadInput, SignPayloadOptions } from './tools/deliveries/sign-payload.js';
export type {
  CaseResult,
  CheckAttempt,
  CheckGroup,
  CheckOptions,
  CheckReport,
  EffectsSource,
  SendReport,
  Verdict,
  VerdictCounts,
} from './tools/check/index.js';
export type { AttemptReport } from './tools/deliveries/send.js';

/**
 * Starts a local stand-in for the gateway's async-job interface on 127.0.0.1 (a free
 * port by default), signing with its own TEST-ONLY key pair:
 *
 * - `POST /v3/universal-ai/async` (`Authorization: Bearer <token>`) validates the
 *   request as the gateway does (422 naming the field; `webhook_receiver` must be
 *   https and not private, link-local, loopback or cloud metadata, except loopback
 *   receivers, also over http, unless `allowLoopbackReceivers: false`) and answers
 *   202 with the job (`status: "processing"`, `public_id`, …). Requests up to
 *   `maxRequestBytes` (25 MiB) are taken: `user_webhook_parameters` comes back in the
 *   webhook, so a test can make deliveries of any size a receiver must take.
 * - `GET /v3/universal-ai/async/{public_id}`: `processing`, then `success` with
 *   `output`, or `fail` with `error.message`; 404 for unknown ids.
 * - After `delayMs` (200 ms) the job completes and its signed `async_job_completed`
 *   webhook is POSTed to `webhook_receiver` with the gateway's retry policy (2xx and
 *   4xx end it; 5xx, timeouts and network errors are retried up to 3 times, backoff
 *   from `backoffMs` doubling up to `maxBackoffMs`, `attemptTimeoutMs` per attempt).
 *   Outputs are realistic per feature (`ocr`, `audio`, `image`, `video`, text), with
 *   floats written as Python writes them (`1.0`, `0.0`) and non-ASCII text.
 *
 * **Failure switch:** a job whose `input.simulate` is `"fail"` fails (`status: "fail"`,
 * `error: { message }`); `"success"` or no `simulate` succeeds. Any other value is a 422.
 *
 * **Other than once:** `delivery` sends each webhook (or those a function picks) `twice`,
 * `tampered`, compressed (`encoding`) or replayed (`replayAfterMs`); the result's
 * `sendings` say how each sending ended.
 *
 * @example
 * ```ts
 * import { startGatewaySimulator } from 'jobhook/testing';
 *
 * const gateway = await startGatewaySimulator({ delayMs: 50, backoffMs: 20 });
 * // Configure the receiver under test with gateway.publicKey, listening on :3000.
 * const res = await fetch(gateway.jobsUrl, {
 *   method: 'POST',
 *   headers: { authorization: `Bearer ${gateway.token}`, 'content-type': 'application/json' },
 *   body: JSON.stringify({
 *     model: 'ocr/ocr_async/amazon',
 *     input: { file_url: 'https://example.com/scan.pdf' }, // add simulate: 'fail' for a failed job
 *     webhook_receiver: 'http://127.0.0.1:3000/webhooks/gateway',
 *     user_webhook_parameters: { order: 42 },
 *   }),
 * });
 * const { public_id } = await res.json();
 * const delivery = await gateway.waitForDelivery(public_id); // { outcome: 'delivered', attempts: [...] }
 * await gateway.close();
 *
 * // Every webhook twice at once, gzip-encoded: the receiver must run each job once.
 * const racing = await startGatewaySimulator({ delivery: { twice: 'at-once', encoding: 'gzip' } });
 * ```
 */
export function startGatewaySimulator(options?: GatewaySimulatorOptions): Promise<GatewaySimulator> {
  return startCore(options);
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
export function generateTestKeys(options?: TestKeyOptions): TestKeyPair {
  return generateTestKeysCore(options);
}

/**
 * Signs a payload as the gateway does and returns `{ body, headers }`, ready for
 * `fetch(url, { method: 'POST', body, headers })` or supertest's `.set(headers).send(body)`.
 * `dialect` (default `orjson`) picks the canonical form the signature covers;
 * `signatureHeader`, `algorithmHeader` and `webhookHeader` rename the headers.
 *
 * The payload is the raw body (a string or bytes, sent as it is), or an object,
 * written with `JSON.stringify`. JavaScript numbers have no `1.0`: `JSON.stringify`
 * writes `{ confidence: 1.0 }` as `{"confidence":1}`. To test what the gateway
 * really sends (floats such as `1.0` and `0.0`), pass the body as a string.
 *
 * @example
 * ```ts
 * import { generateTestKeys, signPayload } from 'jobhook/testing';
 * import request from 'supertest';
 *
 * const { privateKey, publicKey } = generateTestKeys(); // give publicKey to the receiver under test
 * const { body, headers } = signPayload(
 *   '{"event":"async_job_completed","job_id":"job-1","status":"success","output":{"confidence":1.0}}',
 *   privateKey,
 * );
 * await request(app).post('/webhooks/gateway').set(headers).send(body).expect(200);
 * ```
 * @throws OptionError (a TypeError) when `privateKey` is not an RSA private key.
 * @throws BodyMalformedError when the payload is not strict JSON.
 */
export function signPayload(
  payload: PayloadInput,
  privateKey: string | KeyObject,
  options?: SignPayloadOptions,
): SignedDelivery {
  return signPayloadCore(payload, privateKey, options);
}

/**
 * Checks a deployed receiver from outside, as the gateway would see it: signs
 * deliveries with `privateKey` (a TEST-ONLY key whose public key the receiver trusts),
 * sends them to `url` and judges each answer. Genuine deliveries in every dialect with
 * floats, big integers, escapes and Unicode generated from `seed`, every documented job
 * shape, sizes up to 25 MB and gzip/br must be accepted; tampered, forged, other-key,
 * header missing/renamed/doubled, too old and future-dated ones must be refused; the
 * same delivery twice, twice at once and after a cut attempt must run once. Each
 * delivery ends `passed`, `lost`, `accepted-forged`, `ran-twice`, `slow`, `skipped`,
 * `no-answer` or `not-run`, with the likely cause read across the deliveries;
 * `report.ok` is false when anything was lost, accepted forged, run twice, left
 * unanswered or not run. `effects` (a URL answering the job ids the handler ran, or a
 * function) lets runs be counted from what ran, not from the answers. When the first
 * three deliveries (sent at once) all fail the same way, every attempt unanswered or
 * answered 5xx, the check stops there: `report.stoppedEarly` says why. `onAttempt` is
 * told of each attempt as it ends. Every delivery carries `X-Jobhook-Check: <its id>`
 * (`refuse/forged`…) and `User-Agent: jobhook-check/<version>`.
 *
 * @example
 * ```ts
 * import { checkReceiver, formatCheckReport } from 'jobhook/testing';
 *
 * const report = await checkReceiver('https://staging.example.com/webhooks/gateway', {
 *   privateKey: process.env.TEST_PRIVATE_KEY!, // the receiver under test trusts its public key
 *   effects: async () => (await db.query('SELECT job_id FROM results')).rows.map((r) => r.job_id),
 * });
 * console.log(formatCheckReport(report));
 * if (!report.ok) process.exitCode = 1;
 *
 * // Progress as it goes, e.g. in a deployment pipeline's log:
 * await checkReceiver(url, { privateKey, onAttempt: (a) => console.error(`${a.index}/${a.of} ${a.id}`) });
 * ```
 * @throws OptionError (a TypeError) for plain http:// to a host that is not loopback
 * (unless `allowInsecure`), a key that is not an RSA private key, or bad options.
 */
export function checkReceiver(url: string, options: CheckOptions): Promise<CheckReport> {
  return checkCore(url, options);
}

/**
 * A check's report as the `jobhook check` command prints it: a line per delivery, the
 * answer time by size, one line per class, the likely causes, PASS or FAIL.
 *
 * @example
 * ```ts
 * console.log(formatCheckReport(await checkReceiver(url, { privateKey })));
 * ```
 */
export function formatCheckReport(report: CheckReport): string {
  return formatCore(report);
}
