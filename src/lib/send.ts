/** What happened on one attempt. */
export interface AttemptReport {
  attempt: number;
  /** HTTP status, when an answer came. */
  status?: number;
  /** Network error or timeout, when no answer came. */
  error?: string;
  outcome: 'delivered' | 'rejected' | 'retry' | 'gave-up';
  /** Wait before the next attempt (outcome `retry`). */
  delayMs?: number;
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
  onAttempt?: (report: AttemptReport) => void;
}

export interface SendResult {
  delivered: boolean;
  attempts: AttemptReport[];
}

function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127(\.\d{1,3}){3}$/.test(hostname);
}

/** Throws a TypeError for URLs `sendDelivery` refuses. */
export function checkTarget(url: string, allowInsecure = false): URL {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new TypeError(`--to is not a URL: ${url}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new TypeError(`--to must be an http:// or https:// URL, got ${u.protocol}`);
  if (u.protocol === 'http:' && !isLoopback(u.hostname) && !allowInsecure) {
    throw new TypeError(`refusing to send over plain http:// to ${u.hostname} (not loopback); use https:// or --allow-insecure`);
  }
  return u;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * POSTs a delivery with the gateway's policy: retry on 5xx, timeouts and network
 * errors, never on 4xx; exponential backoff with a cap.
 */
export async function sendDelivery(options: SendOptions): Promise<SendResult> {
  const url = checkTarget(options.url, options.allowInsecure);
  const retries = options.retries ?? 3;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const backoffMs = options.backoffMs ?? 1000;
  const maxBackoffMs = options.maxBackoffMs ?? 30_000;
  const attempts: AttemptReport[] = [];
  for (let attempt = 1; attempt <= retries + 1; attempt++) {
    const t0 = performance.now();
    let status: number | undefined;
    let error: string | undefined;
    try {
      const res = await fetch(url, { method: 'POST', headers: options.headers, body: options.body as BodyInit, signal: AbortSignal.timeout(timeoutMs) });
      status = res.status;
      await res.arrayBuffer().catch(() => undefined);
    } catch (err) {
      const e = err as Error & { cause?: { code?: string } };
      error = e.name === 'TimeoutError' ? `timed out after ${timeoutMs} ms` : (e.cause?.code ?? e.message);
    }
    const elapsedMs = Math.round(performance.now() - t0);
    const retryable = status === undefined || status >= 500;
    let report: AttemptReport;
    if (status !== undefined && status >= 200 && status < 300) report = { attempt, status, outcome: 'delivered', elapsedMs };
    else if (!retryable) report = { attempt, status, outcome: 'rejected', elapsedMs };
    else if (attempt > retries) report = { attempt, ...(status !== undefined ? { status } : { error }), outcome: 'gave-up', elapsedMs };
    else report = { attempt, ...(status !== undefined ? { status } : { error }), outcome: 'retry', delayMs: Math.min(backoffMs * 2 ** (attempt - 1), maxBackoffMs), elapsedMs };
    attempts.push(report);
    options.onAttempt?.(report);
    if (report.outcome !== 'retry') return { delivered: report.outcome === 'delivered', attempts };
    await sleep(report.delayMs!);
  }
  return { delivered: false, attempts };
}
