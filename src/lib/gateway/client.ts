/**
 * A client of the gateway's async-job API: create a job (recording it as pending in
 * the idempotency store, so the reconciler can poll it if its webhook never comes)
 * and read a job's resource.
 */
import type { JsonValue } from '../core/canonical/to-value.js';
import {
  GatewayNotFoundError,
  GatewayRejectedError,
  GatewayUnauthorizedError,
  GatewayUnavailableError,
} from '../base/errors.js';
import type { JsonObjectValue } from '../core/event.js';
import type { IdempotencyStore } from '../jobs/store.js';
import { errorDetails, resolveLogger, type Logger, type LoggerInput } from '../base/log.js';
import { optionalNumber } from '../base/options.js';
import { checkOptionNames, type OptionNamesOf } from '../base/options.js';
import { JOBS_PATH } from '../base/protocol.js';

/** `POST /v3/universal-ai/async`, as the gateway takes it. */
export interface CreateJobRequest {
  /** `feature/subfeature/provider[/model]`, e.g. `ocr/ocr_async/amazon`. */
  model: string;
  /** The feature's input (file URL, text, language…). */
  input: JsonObjectValue;
  /** Up to 3 other providers to try. */
  fallbacks?: string[];
  /** Include the provider's raw answer in the result. */
  show_original_response?: boolean;
  /** Where the `async_job_completed` webhook goes (https; 1–2,083 characters). */
  webhook_receiver?: string;
  /** Echoed in the webhook as `user_parameters`. */
  user_webhook_parameters?: JsonObjectValue;
}

/** A job as the gateway shows it. */
export interface JobResource {
  public_id: string;
  /** `processing` until it finishes, then `success` or `fail`. */
  status: 'processing' | 'success' | 'fail';
  created_at?: string;
  finished_at?: string;
  feature?: string;
  subfeature?: string;
  provider?: string;
  model?: string | null;
  /** The price, a decimal string (`"0.0015"`). */
  cost?: string;
  /** The result, once `success`. */
  output?: JsonObjectValue;
  /** Why, once `fail`. */
  error?: { message: string } & JsonObjectValue;
  original_response?: JsonValue;
}

export interface GatewayClientOptions {
  /** The gateway's base URL, e.g. `https://api.gateway.example` (or a simulator's `url`). */
  baseUrl: string;
  /** API token, sent as `Authorization: Bearer …`. */
  token: string;
  /** With a store that tracks pending jobs, `createJob` records each job for the reconciler. */
  store?: IdempotencyStore;
  /** Per request (default 30 s). */
  timeoutMs?: number;
  /** Where a failure to record a created job goes (default: console). */
  log?: LoggerInput;
  /** The fetch to use (default `globalThis.fetch`). */
  fetch?: typeof fetch;
}

export interface GatewayClient {
  /** Creates a job; with a `store`, records it as pending. Rejects with a GatewayError. */
  createJob(request: CreateJobRequest): Promise<JobResource>;
  /** The job's resource. Rejects with GatewayNotFoundError for an unknown id. */
  getJob(id: string): Promise<JobResource>;
}

function errorFrom(status: number, body: unknown, what: string): Error {
  const e = (body as { error?: { message?: unknown; field?: unknown } } | undefined)?.error;
  const said = typeof e?.message === 'string' ? `: ${e.message}` : '';
  if (status === 401 || status === 403)
    return new GatewayUnauthorizedError(`The gateway refused the token (${status}) ${what}${said}`, status);
  if (status === 404)
    return new GatewayNotFoundError(`The gateway does not know ${what} (404)${said}`, status);
  if (status >= 500)
    return new GatewayUnavailableError(`The gateway failed (${status}) ${what}${said}`, status);
  return new GatewayRejectedError(
    `The gateway refused ${what} (${status})${said}`,
    status,
    typeof e?.field === 'string' ? e.field : undefined,
  );
}

/** The client's options, checked and resolved once at construction. */
interface ClientSettings {
  /** The base URL without trailing slashes. */
  readonly root: string;
  readonly token: string;
  readonly timeoutMs: number;
  readonly fetch: typeof fetch;
  readonly log: Logger;
  /** Checked at construction to track pending jobs. */
  readonly store: PendingTracker | undefined;
}

type PendingTracker = Required<Pick<IdempotencyStore, 'trackPending'>>;

/** Checks the options (TypeError for mistakes) and resolves them into a frozen record. */
function resolveClient(options: GatewayClientOptions): ClientSettings {
  checkOptionNames(options, GATEWAY_CLIENT_OPTIONS);
  if (typeof options !== 'object' || options === null)
    throw new TypeError('options must be an object with baseUrl and token');
  let base: URL;
  try {
    base = new URL(options.baseUrl);
  } catch {
    throw new TypeError(`baseUrl must be a URL; got ${JSON.stringify(options.baseUrl)}`);
  }
  if (base.protocol !== 'https:' && base.protocol !== 'http:')
    throw new TypeError(`baseUrl must be http(s); got ${base.protocol}`);
  if (typeof options.token !== 'string' || options.token === '')
    throw new TypeError('token must be a non-empty string');
  const timeoutMs = optionalNumber(options.timeoutMs, 'timeoutMs', 30_000);
  const doFetch = options.fetch ?? globalThis.fetch;
  const log = resolveLogger(options.log);
  const store = options.store;
  if (store !== undefined && typeof store.trackPending !== 'function')
    throw new TypeError("store must track pending jobs (trackPending): all of jobhook's stores do");
  return Object.freeze({
    root: base.href.replace(/\/+$/, ''),
    token: options.token,
    timeoutMs,
    fetch: doFetch,
    log,
    store: store as PendingTracker | undefined,
  });
}

/** One request to the gateway: the job resource it answers, or a GatewayError. */
async function call(
  s: ClientSettings,
  method: 'GET' | 'POST',
  path: string,
  what: string,
  body?: unknown,
): Promise<JobResource> {
  const { fetch: doFetch, timeoutMs } = s;
  let res: Response;
  try {
    res = await doFetch(s.root + path, {
      method,
      headers: {
        authorization: `Bearer ${s.token}`,
        accept: 'application/json',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(timeoutMs),
      redirect: 'error',
    });
  } catch (err) {
    const reason =
      (err as Error).name === 'TimeoutError'
        ? `no answer within ${timeoutMs} ms`
        : ((err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message);
    throw new GatewayUnavailableError(`The gateway could not be reached ${what}: ${reason}`, undefined, {
      cause: err,
    });
  }
  return jobResource(res, await res.text(), what);
}

/** The job resource of an answer, or the GatewayError it stands for. */
function jobResource(res: Response, text: string, what: string): JobResource {
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  if (!res.ok) throw errorFrom(res.status, json, what);
  if (typeof json !== 'object' || json === null || typeof (json as JobResource).public_id !== 'string') {
    throw new GatewayUnavailableError(
      `The gateway answered ${res.status} ${what} without a job resource`,
      res.status,
    );
  }
  return json as JobResource;
}

/** Records a created job as pending, for the reconciler; a failure is logged, never thrown. */
async function trackCreated(
  log: Logger,
  store: PendingTracker,
  job: JobResource,
  request: CreateJobRequest,
): Promise<void> {
  const created = job.created_at === undefined ? NaN : Date.parse(job.created_at);
  try {
    await store.trackPending(job.public_id, {
      since: Number.isNaN(created) ? Date.now() : created,
      ...(request.user_webhook_parameters === undefined
        ? {}
        : { userParameters: request.user_webhook_parameters }),
    });
  } catch (err) {
    // The job exists at the gateway: failing here would have callers create it twice.
    log.error(
      `jobhook: job ${job.public_id} was created but could not be recorded as pending; if its webhook never comes, the reconciler will not find it.`,
      errorDetails(err),
    );
  }
}

/**
 * A client of the gateway's async-job API. With a `store`, every job it creates is
 * recorded as pending, so {@link createReconciler} can recover its completion if the
 * webhook never arrives. Errors are `GatewayError`s with a `code` and the HTTP `status`.
 *
 * @example
 * ```ts
 * import { createGatewayClient } from 'jobhook/gateway';
 *
 * const gateway = createGatewayClient({ baseUrl: 'https://api.gateway.example', token: process.env.GATEWAY_TOKEN!, store });
 * const job = await gateway.createJob({
 *   model: 'ocr/ocr_async/amazon',
 *   input: { file_url: 'https://example.com/invoice.pdf' },
 *   webhook_receiver: 'https://app.example.com/webhooks/gateway',
 *   user_webhook_parameters: { order: 'A-17' },
 * });
 * const later = await gateway.getJob(job.public_id); // status: processing | success | fail
 * ```
 */
export function createGatewayClientCore(options: GatewayClientOptions): GatewayClient {
  const s = resolveClient(options);
  return {
    async createJob(request) {
      if (typeof request !== 'object' || request === null || typeof request.model !== 'string')
        throw new TypeError('createJob takes { model, input, … }');
      const job = await call(s, 'POST', JOBS_PATH, 'to create the job', request);
      if (s.store?.trackPending !== undefined) await trackCreated(s.log, s.store, job, request);
      return job;
    },
    async getJob(id) {
      if (typeof id !== 'string' || id === '') throw new TypeError('getJob takes a job id');
      return call(s, 'GET', `${JOBS_PATH}/${encodeURIComponent(id)}`, `job ${id}`);
    },
  };
}

/** The names of {@link GatewayClientOptions}. */
export const GATEWAY_CLIENT_OPTIONS = {
  baseUrl: true,
  token: true,
  store: true,
  timeoutMs: true,
  log: true,
  fetch: true,
} as const satisfies OptionNamesOf<GatewayClientOptions>;
