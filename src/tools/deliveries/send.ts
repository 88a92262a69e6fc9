import { concatBytes, enable, option, optionError } from '../../lib/entries/tools-door.js';

/** What happened on one attempt. */
export interface AttemptReport {
  attempt: number;
  /** HTTP status, when an answer came. */
  status?: number;
  /** Network error or timeout, when no answer came. */
  error?: string;
  /** No answer came within the attempt's timeout (`error` says how long that was). */
  timedOut?: boolean;
  /**
   * What a jobhook receiver's answer said: `processed` or `duplicate` for a 2xx, its error
   * code (`SIGNATURE_INVALID`, `IN_PROGRESS`…) otherwise. Absent when the body says neither.
   */
  answer?: string;
  /** The answer's `Retry-After`, when it had one. */
  retryAfter?: string;
  outcome: 'delivered' | 'rejected' | 'retry' | 'gave-up';
  /** Wait before the next attempt (outcome `retry`). */
  delayMs?: number;
  /** When the attempt started (epoch ms). */
  startedAt: number;
  elapsedMs: number;
}

export interface SendOptions {
  url: string;
  headers: Record<string, string>;
  body: string | Uint8Array;
  /** Retries after the first attempt (default 3, as the gateway). */
  retries?: number;
  /** Per-attempt timeout (default 30 s). */
  timeoutMs?: number;
  /** First backoff, doubled after each attempt (default 1 s). */
  backoffMs?: number;
  /** Backoff cap (default 30 s). */
  maxBackoffMs?: number;
  /** Allow http:// to a host that is not loopback. */
  allowInsecure?: boolean;
  /** Cancels the delivery: the attempt in flight and any pending backoff. `sendDelivery` then rejects with the signal's reason. */
  signal?: AbortSignal;
  onAttempt?: (report: AttemptReport) => void;
}

export interface SendResult {
  delivered: boolean;
  attempts: AttemptReport[];
}

/** Answer bodies are read this far, no further (a receiver's answer is a small JSON object). */
const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * The body of `res`, read as it comes and no further than `limit` bytes: undefined past
 * it, the rest left unread (the stream is cancelled). A declared length is not trusted:
 * a close-delimited answer declares none.
 */
export async function readBounded(res: Response, limit: number): Promise<Uint8Array | undefined> {
  if (res.body === null) return new Uint8Array(0);
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return concatBytes(chunks);
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      return undefined;
    }
    chunks.push(value);
  }
}

/** The `status` or error `code` of a jobhook receiver's JSON answer, if that is what came. */
async function readAnswer(res: Response): Promise<string | undefined> {
  let body: Uint8Array | undefined;
  try {
    body = await readBounded(res, MAX_ANSWER_BYTES);
  } catch {
    return undefined; // the status came; the body did not (a timeout, a reset)
  }
  if (body === undefined || body.byteLength === 0) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(body));
  } catch {
    return undefined;
  }
  const { status, error } = (typeof value === 'object' && value !== null ? value : {}) as {
    status?: unknown;
    error?: { code?: unknown };
  };
  if (status === 'processed' || status === 'duplicate') return status;
  return typeof error?.code === 'string' && /^[A-Z][A-Z0-9_]{0,63}$/.test(error.code)
    ? error.code
    : undefined;
}

function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127(\.\d{1,3}){3}$/.test(hostname);
}

/** Throws an OptionError (a TypeError) for URLs `sendDelivery` refuses; `name` is the option that holds the URL. */
export function checkTarget(url: string, allowInsecure = false, name = 'url'): URL {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw optionError`${option(name)} is not a URL: ${url}`;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw optionError`${option(name)} must be an http:// or https:// URL, got ${u.protocol}`;
  if (u.protocol === 'http:' && !isLoopback(u.hostname) && !allowInsecure) {
    throw optionError`refusing to send over plain http:// to ${u.hostname} (not loopback); use https:// or ${enable('allowInsecure')}`;
  }
  return u;
}

/** Waits `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The per-attempt timeout, also aborted by the caller's signal (AbortSignal.any needs Node 20.3). */
export function attemptSignal(
  timeoutMs: number,
  signal: AbortSignal | undefined,
): { signal: AbortSignal; done: () => void } {
  const timeout = AbortSignal.timeout(timeoutMs);
  if (signal === undefined) return { signal: timeout, done: () => undefined };
  const both = new AbortController();
  const fromTimeout = () => both.abort(timeout.reason);
  const fromCaller = () => both.abort(signal.reason);
  if (signal.aborted) fromCaller();
  timeout.addEventListener('abort', fromTimeout, { once: true });
  signal.addEventListener('abort', fromCaller, { once: true });
  return {
    signal: both.signal,
    done: () => {
      timeout.removeEventListener('abort', fromTimeout);
      signal.removeEventListener('abort', fromCaller);
    },
  };
}

/**
 * POSTs a delivery with the gateway's policy: retry on 5xx, timeouts and network
 * errors, never on 4xx; exponential backoff with a cap. Redirects are not followed
 * (a 3xx ends the delivery like a 4xx): following them would let a receiver
 * redirect the sender to an address it would refuse to call directly.
 */
export async function sendDelivery(options: SendOptions): Promise<SendResult> {
  const url = checkTarget(options.url, options.allowInsecure);
  const retries = options.retries ?? 3;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const backoffMs = options.backoffMs ?? 1000;
  const maxBackoffMs = options.maxBackoffMs ?? 30_000;
  const cancel = options.signal;
  const attempts: AttemptReport[] = [];
  for (let attempt = 1; attempt <= retries + 1; attempt++) {
    if (cancel?.aborted) throw cancel.reason;
    const startedAt = Date.now();
    const t0 = performance.now();
    let status: number | undefined;
    let error: string | undefined;
    let timedOut = false;
    let answer: string | undefined;
    let retryAfter: string | null = null;
    const timer = attemptSignal(timeoutMs, cancel);
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: options.headers,
        body: options.body as BodyInit,
        redirect: 'manual',
        signal: timer.signal,
      });
      status = res.status;
      retryAfter = res.headers.get('retry-after');
      answer = await readAnswer(res);
    } catch (err) {
      if (cancel?.aborted) throw cancel.reason;
      const e = err as Error & { cause?: { code?: string } };
      timedOut = e.name === 'TimeoutError';
      error = timedOut ? `timed out after ${timeoutMs} ms` : (e.cause?.code ?? e.message);
    } finally {
      timer.done();
    }
    const elapsedMs = Math.round(performance.now() - t0);
    const retryable = status === undefined || status >= 500;
    const got =
      status !== undefined
        ? {
            status,
            ...(answer !== undefined ? { answer } : {}),
            ...(retryAfter !== null ? { retryAfter } : {}),
          }
        : { error, ...(timedOut ? { timedOut } : {}) };
    let report: AttemptReport;
    if (status !== undefined && status >= 200 && status < 300)
      report = { attempt, ...got, outcome: 'delivered', startedAt, elapsedMs };
    else if (!retryable) report = { attempt, ...got, outcome: 'rejected', startedAt, elapsedMs };
    else if (attempt > retries) report = { attempt, ...got, outcome: 'gave-up', startedAt, elapsedMs };
    else
      report = {
        attempt,
        ...got,
        outcome: 'retry',
        delayMs: Math.min(backoffMs * 2 ** (attempt - 1), maxBackoffMs),
        startedAt,
        elapsedMs,
      };
    attempts.push(report);
    options.onAttempt?.(report);
    if (report.outcome !== 'retry') return { delivered: report.outcome === 'delivered', attempts };
    await sleep(report.delayMs!, cancel);
  }
  return { delivered: false, attempts };
}
