/**
 * A local stand-in for the gateway's async-job interface: create a job, poll it,
 * and receive its signed `async_job_completed` webhook with the gateway's retry
 * policy. For tests and local development only.
 */
import {
  createHash,
  createPublicKey,
  generateKeyPair,
  randomBytes,
  randomUUID,
  timingSafeEqual,
  type KeyObject,
} from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  assertDialect,
  option,
  optionError,
  checkOptionNames,
  HEADER_NAME_OPTIONS,
  JOBS_PATH,
  type HeaderNameOptions,
  type OptionNamesOf,
} from '../../lib/entries/tools-door.js';
import { type DialectName, DEFAULT_MAX_BODY_BYTES } from '../../index.js';
import { privateKeyOption } from '../deliveries/keys.js';
import { isFieldProblem, validateJobRequest, type JobRequest } from './job-request.js';
import { simulatedFailure, simulatedResult } from './outputs.js';
import { resolveHeaderNames } from '../deliveries/header-names.js';
import { parseWire, writeWire, type WireObject, type WireValue } from '../deliveries/wire.js';
import {
  checkSimulatedDelivery,
  deliverPayload,
  type DeliveryAttempt,
  type DeliveryResult,
  type SimulatedDelivery,
  type SimulatedJob,
} from './sending.js';

export { SIMULATOR_USER_AGENT } from './sending.js';
export type {
  DeliveryAttempt,
  DeliveryResult,
  DeliverySending,
  SimulatedDelivery,
  SimulatedJob,
} from './sending.js';

/**
 * Largest job request taken by default: 25 MiB, the largest delivery a receiver takes by
 * default (`maxBodyBytes`). The gateway publishes no limit of its own; a request echoes
 * into its delivery (`user_webhook_parameters`, a text job's `input.text`), so this lets a
 * test make any delivery a receiver must take, 2 MB and 20 MB ones included.
 */
const DEFAULT_MAX_REQUEST_BYTES = DEFAULT_MAX_BODY_BYTES;

/** The simulator's options; the header names (`signatureHeader`, …) for a vendor prefix. */
export interface GatewaySimulatorOptions extends HeaderNameOptions {
  /** Address to listen on (default `127.0.0.1`). */
  host?: string;
  /** Port (default 0: a free one). */
  port?: number;
  /** The bearer token callers must send (default: a random one). */
  token?: string;
  /** RSA private key (PEM or KeyObject) to sign with; default a fresh 2048-bit TEST-ONLY key. */
  privateKey?: string | KeyObject;
  /** Canonical dialect the signatures cover, and the style of the JSON it writes (default `orjson`). */
  dialect?: DialectName;
  /** Time from creating a job to its completion (default 200 ms). */
  delayMs?: number;
  /** Retries after the first delivery attempt (default 3, as the gateway). */
  retries?: number;
  /** First backoff between attempts, doubled each time (default 1,000 ms). */
  backoffMs?: number;
  /** Backoff cap (default 30,000 ms). */
  maxBackoffMs?: number;
  /** Per-attempt timeout (default 30,000 ms). */
  attemptTimeoutMs?: number;
  /** Accept loopback receivers (127.0.0.0/8, [::1], localhost), over plain http too (default true). */
  allowLoopbackReceivers?: boolean;
  /** Told about every delivery attempt as it ends. */
  onAttempt?: (attempt: DeliveryAttempt) => void;
  /**
   * How each job's webhook is sent besides once (default: once, as the gateway):
   * compressed, tampered, twice, replayed later; or a function choosing it per job
   * (`undefined`: once). A value the function returns that is not a valid delivery ends
   * that job's delivery as `gave-up`, the error in its attempt.
   */
  delivery?: SimulatedDelivery | ((job: SimulatedJob) => SimulatedDelivery | undefined);
  /** Largest job request body taken, in bytes (default 25 MiB); larger ones are answered 413. */
  maxRequestBytes?: number;
}

export interface GatewaySimulator {
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  readonly url: string;
  /** `url` + `/v3/universal-ai/async`, where jobs are created. */
  readonly jobsUrl: string;
  /** The bearer token. */
  readonly token: string;
  /** The public key of the signatures (SPKI PEM): give it to the receiver. */
  readonly publicKey: string;
  /** Every delivery attempt so far, in order (a live array). */
  readonly deliveries: readonly DeliveryAttempt[];
  /** Resolves when the job's delivery has ended (delivered, rejected, gave up or cancelled). */
  waitForDelivery(jobId: string): Promise<DeliveryResult>;
  /** Stops the server, cancels pending completions and deliveries. Idempotent. */
  close(): Promise<void>;
}

interface Job {
  id: string;
  request: JobRequest;
  createdAt: string;
  status: 'processing' | 'success' | 'fail';
  cost: number;
  finishedAt?: string;
  output?: WireObject;
  error?: { message: string };
  originalResponse?: WireValue;
  timer?: NodeJS.Timeout;
  /** Present when the job has a receiver. */
  delivery?: { promise: Promise<DeliveryResult>; settle: (result: DeliveryResult) => void };
}

/** The simulator's options, checked and resolved once. */
interface Settings {
  token: string;
  key: KeyObject;
  dialect: DialectName;
  delayMs: number;
  retries: number;
  backoffMs: number;
  maxBackoffMs: number;
  attemptTimeoutMs: number;
  allowLoopback: boolean;
  headers: Readonly<Required<HeaderNameOptions>>;
  onAttempt?: (attempt: DeliveryAttempt) => void;
  delivery: Readonly<SimulatedDelivery> | ((job: SimulatedJob) => SimulatedDelivery | undefined);
  maxRequestBytes: number;
}

// setTimeout's limit: a longer delay would fire at once.
const MAX_TIMER_MS = 2 ** 31 - 1;

function whole(value: number | undefined, name: string, fallback: number, min = 0): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min || value > MAX_TIMER_MS)
    throw optionError`${option(name)} must be a whole number from ${min} to ${MAX_TIMER_MS}, got ${String(value)}`;
  return value;
}

function newKeyPair(): Promise<KeyObject> {
  return new Promise((resolve, reject) =>
    generateKeyPair('rsa', { modulusLength: 2048 }, (err, _publicKey, privateKey) =>
      err ? reject(err) : resolve(privateKey),
    ),
  );
}

async function settings(options: GatewaySimulatorOptions): Promise<Settings> {
  checkOptionNames(options, SIMULATOR_OPTIONS);
  const s: Omit<Settings, 'key'> = {
    token: options.token ?? `sim_${randomBytes(16).toString('hex')}`,
    dialect: assertDialect(options.dialect ?? 'orjson', 'dialect'),
    delayMs: whole(options.delayMs, 'delayMs', 200),
    retries: whole(options.retries, 'retries', 3),
    backoffMs: whole(options.backoffMs, 'backoffMs', 1000),
    maxBackoffMs: whole(options.maxBackoffMs, 'maxBackoffMs', 30_000),
    attemptTimeoutMs: whole(options.attemptTimeoutMs, 'attemptTimeoutMs', 30_000, 1),
    allowLoopback: options.allowLoopbackReceivers ?? true,
    headers: resolveHeaderNames(options),
    onAttempt: options.onAttempt,
    delivery:
      typeof options.delivery === 'function'
        ? options.delivery
        : checkSimulatedDelivery(options.delivery ?? {}),
    maxRequestBytes: whole(options.maxRequestBytes, 'maxRequestBytes', DEFAULT_MAX_REQUEST_BYTES, 1),
  };
  if (s.token.length === 0 || /[\s\u0000-\u001f]/.test(s.token))
    throw optionError`${option('token')} must be a non-empty string without whitespace`;
  const key = options.privateKey === undefined ? await newKeyPair() : privateKeyOption(options.privateKey);
  return Object.freeze({ ...s, key });
}

function sameToken(given: string, expected: string): boolean {
  // Digests have one length, so the comparison takes the same time whatever was sent.
  const digest = (t: string) => createHash('sha256').update(t).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

async function readBody(req: IncomingMessage, limit: number): Promise<Uint8Array | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) return undefined;
    chunks.push(chunk as Buffer);
  }
  return new Uint8Array(Buffer.concat(chunks));
}

function now(): string {
  return new Date().toISOString();
}

/**
 * A price as the gateway writes `cost`: a decimal string (`"0.00002"`, never `"2e-5"`,
 * which its pattern `^(?!^[-+.]*$)[+-]?0*\d*\.?\d*$` refuses).
 */
export function decimal(value: number): string {
  return value.toFixed(12).replace(/0+$/, '').replace(/\.$/, '');
}

/** The job as `GET /v3/universal-ai/async/{id}` (and the 202) show it. */
function resource(job: Job): WireObject {
  const r = job.request;
  return {
    public_id: job.id,
    status: job.status,
    created_at: job.createdAt,
    finished_at: job.finishedAt,
    feature: r.feature,
    subfeature: r.subfeature,
    provider: r.provider,
    model: r.model,
    cost: decimal(job.cost),
    output: job.output,
    error: job.error,
    original_response: r.showOriginalResponse ? job.originalResponse : undefined,
  };
}

/**
 * The `async_job_completed` payload with the fields the gateway documents: `output` only on
 * success, `error` only on failure, `original_response` only when asked, `user_parameters`
 * only when set.
 */
function webhookPayload(job: Job): WireObject {
  const r = job.request;
  return {
    event: 'async_job_completed',
    job_id: job.id,
    status: job.status,
    feature: r.feature,
    subfeature: r.subfeature,
    provider: r.provider,
    model: r.model,
    created_at: job.createdAt,
    finished_at: job.finishedAt,
    output: job.output,
    error: job.error,
    original_response: r.showOriginalResponse ? job.originalResponse : undefined,
    user_parameters: r.userWebhookParameters,
  };
}

/** A job's result, as the gateway would have it once the job finishes. */
function finish(job: Job): void {
  job.timer = undefined;
  job.finishedAt = now();
  if (job.request.outcome === 'fail') {
    const failure = simulatedFailure(job.request.provider);
    job.status = 'fail';
    job.cost = 0;
    job.error = { message: failure.message };
    job.originalResponse = failure.originalResponse;
  } else {
    const result = simulatedResult(job.request.feature, job.request.input);
    job.status = 'success';
    job.output = result.output;
    job.originalResponse = result.originalResponse;
  }
}

/** A new job, processing; with a receiver, the delivery it will settle. */
function newJob(request: JobRequest): Job {
  const cost = simulatedResult(request.feature, request.input).cost;
  const job: Job = { id: randomUUID(), request, createdAt: now(), status: 'processing', cost };
  if (request.webhookReceiver !== undefined) {
    let settle!: (result: DeliveryResult) => void;
    const promise = new Promise<DeliveryResult>((resolve) => (settle = resolve));
    job.delivery = { promise, settle };
  }
  return job;
}

/** How the job's webhook is sent: the `delivery` option, or what its function says for this job. */
function deliveryStyle(s: Settings, job: Job): Readonly<SimulatedDelivery> {
  if (typeof s.delivery !== 'function') return s.delivery;
  const r = job.request;
  const userParameters =
    r.userWebhookParameters === undefined
      ? {}
      : { userParameters: JSON.parse(writeWire(r.userWebhookParameters)) as unknown };
  const model = [r.feature, r.subfeature, r.provider, ...(r.model === null ? [] : [r.model])].join('/');
  const status = job.status === 'fail' ? 'fail' : 'success';
  return checkSimulatedDelivery(s.delivery({ jobId: job.id, model, status, ...userParameters }) ?? {});
}

/** Where a request goes: the collection (create), one job (read), or nowhere (404). */
function target(req: IncomingMessage): { path: string; isCollection: boolean; id: string | undefined } {
  const path = new URL(req.url ?? '/', 'http://simulator').pathname.replace(/\/+$/, '');
  const isCollection = path === JOBS_PATH;
  const id = path.startsWith(JOBS_PATH + '/')
    ? decodeURIComponent(path.slice(JOBS_PATH.length + 1))
    : undefined;
  return { path, isCollection, id };
}

function authorized(req: IncomingMessage, token: string): boolean {
  const auth = /^Bearer[ ]+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  return auth !== null && sameToken(auth[1]!, token);
}

/**
 * One simulator's state (its settings, jobs, delivery attempts, deliveries in flight, the
 * HTTP server) and what it does: answer requests, create and finish jobs, deliver their
 * webhooks with retries, shut down.
 */
class Simulator {
  readonly jobs = new Map<string, Job>();
  /** Every delivery attempt so far, in order (a live array). */
  readonly deliveries: DeliveryAttempt[] = [];
  private readonly inflight = new Set<Promise<unknown>>();
  private readonly cancel = new AbortController();
  private closing: Promise<void> | undefined;
  private readonly server: Server;

  constructor(private readonly s: Settings) {
    this.server = createServer((req, res) => {
      this.route(req, res).catch((err: unknown) => {
        if (!res.headersSent) this.fail(res, 500, `Simulator error: ${(err as Error).message}`);
        else res.destroy();
      });
    });
  }

  /** Listens on `port` of `host`; resolves with the base URL. */
  async listen(port: number, host: string): Promise<string> {
    const { server } = this;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const address = server.address() as AddressInfo;
    const name = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    return `http://${name}:${address.port}`;
  }

  waitForDelivery(jobId: string): Promise<DeliveryResult> {
    const job = this.jobs.get(jobId);
    if (job === undefined)
      return Promise.reject(new TypeError(`No job with id ${JSON.stringify(jobId)} on this simulator`));
    if (job.delivery === undefined)
      return Promise.reject(new TypeError(`Job ${jobId} has no webhook_receiver, so nothing is delivered`));
    return job.delivery.promise;
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  // --- Requests

  private send(
    res: ServerResponse,
    status: number,
    value: WireValue,
    headers: Record<string, string> = {},
  ): void {
    res
      .writeHead(status, { 'content-type': 'application/json', ...headers })
      .end(writeWire(value, this.s.dialect));
  }

  private fail(res: ServerResponse, status: number, message: string, headers?: Record<string, string>): void {
    this.send(res, status, { error: { message } }, headers);
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { path, isCollection, id } = target(req);
    if (!isCollection && (id === undefined || id.includes('/')))
      return this.fail(res, 404, `No route ${req.method ?? ''} ${path}`);
    if (!authorized(req, this.s.token)) {
      req.resume();
      return this.fail(res, 401, 'Missing or invalid bearer token (Authorization: Bearer <token>)', {
        'www-authenticate': 'Bearer',
      });
    }
    if (isCollection) {
      if (req.method === 'POST') return this.createJob(req, res);
      req.resume();
      return this.fail(res, 405, 'Use POST to create a job', { allow: 'POST' });
    }
    req.resume();
    if (req.method !== 'GET') return this.fail(res, 405, 'Use GET to read a job', { allow: 'GET' });
    const job = this.jobs.get(id!);
    if (job === undefined) return this.fail(res, 404, `No job with id ${JSON.stringify(id)}`);
    this.send(res, 200, resource(job));
  }

  private async createJob(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const limit = this.s.maxRequestBytes;
    const raw = await readBody(req, limit);
    if (raw === undefined)
      return this.fail(res, 413, `The body is larger than ${limit} bytes`, { connection: 'close' });
    let body: WireValue;
    try {
      body = parseWire(raw);
    } catch (err) {
      return this.fail(res, 400, `The body is not valid JSON: ${(err as Error).message}`);
    }
    const request = await validateJobRequest(body, { allowLoopback: this.s.allowLoopback });
    if (isFieldProblem(request))
      return this.send(res, 422, { error: { field: request.field, message: request.message } });
    if (this.closing) return this.fail(res, 503, 'The simulator is shutting down');
    const job = newJob(request);
    this.jobs.set(job.id, job);
    job.timer = setTimeout(() => this.complete(job), this.s.delayMs);
    this.send(res, 202, resource(job));
  }

  // --- Completions and their deliveries

  private complete(job: Job): void {
    finish(job);
    const url = job.request.webhookReceiver;
    if (url === undefined || job.delivery === undefined) return;
    const settle = job.delivery.settle;
    const running = this.deliver(job, url).then(settle, (err: unknown) => {
      // A `delivery` function's bad value, or the unexpected (the URL was checked when the job was created): a failed delivery.
      const attempt: DeliveryAttempt = {
        jobId: job.id,
        url,
        sending: 1,
        attempt: 1,
        error: String(err),
        outcome: 'gave-up',
        startedAt: Date.now(),
        elapsedMs: 0,
      };
      settle({
        jobId: job.id,
        url,
        outcome: 'gave-up',
        attempts: [attempt],
        sendings: [{ sending: 1, kind: 'first', outcome: 'gave-up', attempts: [attempt] }],
      });
    });
    this.inflight.add(running);
    void running.finally(() => this.inflight.delete(running));
  }

  /** Signs the job's webhook and sends it as the `delivery` option says, retrying as the gateway does, every attempt recorded. */
  private async deliver(job: Job, url: string): Promise<DeliveryResult> {
    const { s } = this;
    const record = (attempt: DeliveryAttempt) => {
      this.deliveries.push(attempt);
      s.onAttempt?.(attempt);
    };
    const policy = {
      retries: s.retries,
      timeoutMs: s.attemptTimeoutMs,
      backoffMs: s.backoffMs,
      maxBackoffMs: s.maxBackoffMs,
    };
    const context = {
      key: s.key,
      dialect: s.dialect,
      headers: s.headers,
      policy,
      signal: this.cancel.signal,
      record,
    };
    return deliverPayload(
      context,
      { jobId: job.id, url, payload: webhookPayload(job) },
      deliveryStyle(s, job),
    );
  }

  /** Cancels the jobs not finished and the deliveries under way, then stops the server. */
  private async shutdown(): Promise<void> {
    for (const job of this.jobs.values()) {
      if (job.timer === undefined) continue;
      clearTimeout(job.timer);
      job.timer = undefined;
      job.delivery?.settle({
        jobId: job.id,
        url: job.request.webhookReceiver!,
        outcome: 'cancelled',
        attempts: [],
        sendings: [],
      });
    }
    this.cancel.abort(new DOMException('The gateway simulator was closed', 'AbortError'));
    await Promise.allSettled([...this.inflight]);
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}

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
 *
 * Starts the simulator (see `startGatewaySimulator` in `jobhook/testing` for the
 * documented entry point).
 */
export async function startGatewaySimulator(
  options: GatewaySimulatorOptions = {},
): Promise<GatewaySimulator> {
  const s = await settings(options);
  const simulator = new Simulator(s);
  const url = await simulator.listen(options.port ?? 0, options.host ?? '127.0.0.1');
  return {
    url,
    jobsUrl: url + JOBS_PATH,
    token: s.token,
    publicKey: createPublicKey(s.key).export({ type: 'spki', format: 'pem' }) as string,
    deliveries: simulator.deliveries,
    waitForDelivery: (jobId: string) => simulator.waitForDelivery(jobId),
    close: () => simulator.close(),
  };
}

/** The names of {@link GatewaySimulatorOptions}. */
export const SIMULATOR_OPTIONS = {
  host: true,
  port: true,
  token: true,
  privateKey: true,
  dialect: true,
  delayMs: true,
  retries: true,
  backoffMs: true,
  maxBackoffMs: true,
  attemptTimeoutMs: true,
  allowLoopbackReceivers: true,
  ...HEADER_NAME_OPTIONS,
  onAttempt: true,
  delivery: true,
  maxRequestBytes: true,
} as const satisfies OptionNamesOf<GatewaySimulatorOptions>;
