/**
 * The gateway as a load generator: a fixed number of attempts in flight, each
 * delivery retried on 5xx, timeouts and connection errors with exponential backoff,
 * ended by a 2xx or 4xx or when the retries are used up.
 *
 * Why not `sendDelivery` (src/tools/deliveries/send.ts) directly: it sleeps through its backoff
 * inside one call, so a pool of 64 of them holds a slot for every delivery waiting
 * to be retried and the offered load collapses during a fault (a gateway's retry
 * queue does not block a sender while it waits); and it drops the answer body, which
 * holds the receiver's error code (IN_PROGRESS vs STORE_UNAVAILABLE) that explains a
 * failure. The policy below is the same; `sender-policy.faults.ts` checks it against
 * `sendDelivery` so the two cannot drift apart unnoticed. Attempts go through
 * node:http with a keep-alive agent rather than fetch: on this 2-core machine fetch
 * managed ~1,000 requests/s against a trivial server, node:http ~2,800, and the
 * sender shares its event loop with the two receivers.
 */
import { Agent, request } from 'node:http';
import type { Delivery } from './corpus.js';

export interface GatewayPolicy {
  /** Retries after the first attempt. */
  retries: number;
  /** First backoff, doubled after each attempt. */
  backoffMs: number;
  maxBackoffMs: number;
  /** Per-attempt timeout. */
  timeoutMs: number;
}

/** The gateway's retry policy, as `sendDelivery`'s defaults: 3 retries, backoff 1 s doubling, capped at 30 s, 30 s per attempt. */
export const GATEWAY_POLICY: GatewayPolicy = {
  retries: 3,
  backoffMs: 1000,
  maxBackoffMs: 30_000,
  timeoutMs: 30_000,
};

export type Outcome = 'delivered' | 'rejected' | 'retry' | 'gave-up';

/** What the gateway does after attempt number `attempt` (1-based) got `status` (undefined: no answer). */
export function decide(
  policy: GatewayPolicy,
  attempt: number,
  status: number | undefined,
): { outcome: Outcome; delayMs?: number } {
  if (status !== undefined && status >= 200 && status < 300) return { outcome: 'delivered' };
  if (status !== undefined && status < 500) return { outcome: 'rejected' };
  if (attempt > policy.retries) return { outcome: 'gave-up' };
  return { outcome: 'retry', delayMs: Math.min(policy.backoffMs * 2 ** (attempt - 1), policy.maxBackoffMs) };
}

export interface AttemptRecord {
  delivery: Delivery;
  attempt: number;
  status: number | undefined;
  /** `200 processed`, `503 IN_PROGRESS`, `ERR ECONNRESET`, `ERR timeout`… */
  label: string;
  outcome: Outcome;
  latencyMs: number;
}

export interface SendRunOptions {
  deliveries: Delivery[];
  /** One URL per receiver instance; `delivery.instance` picks it. */
  urls: string[];
  concurrency: number;
  /**
   * Jobs per second: new deliveries start no faster than this (a duplicate sent at once
   * with its original goes with it). Default: as fast as `concurrency` allows.
   */
  ratePerSecond?: number;
  policy: GatewayPolicy;
  /** Called when the `count`-th delivery makes its first attempt. */
  onDispatch?: (count: number) => void;
  /** Called as soon as an attempt has its answer (or its error), before anything else runs. */
  onAttempt: (record: AttemptRecord) => void;
}

function attemptOnce(
  agent: Agent,
  url: string,
  d: Delivery,
  timeoutMs: number,
): Promise<{ status?: number; label: string }> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (answer: { status?: number; label: string }) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(answer);
    };
    const req = request(
      url,
      {
        method: 'POST',
        agent,
        headers: { ...d.headers, 'content-length': String(Buffer.byteLength(d.body)) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (err: NodeJS.ErrnoException) => done({ label: `ERR ${err.code ?? err.name}` }));
        res.on('end', () => {
          let detail = '';
          try {
            const json = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
              status?: string;
              error?: { code?: string };
            };
            detail = json.error?.code ?? json.status ?? '';
          } catch {
            // not JSON: the status alone
          }
          done({ status: res.statusCode, label: `${res.statusCode} ${detail}`.trim() });
        });
      },
    );
    // The whole attempt, as the gateway's per-attempt timeout (fetch's AbortSignal.timeout in sendDelivery).
    const timer = setTimeout(() => {
      done({ label: 'ERR timeout' });
      req.destroy();
    }, timeoutMs);
    req.on('error', (err: NodeJS.ErrnoException) => done({ label: `ERR ${err.code ?? err.name}` }));
    req.end(d.body);
  });
}

/** Sends every delivery; resolves when each has ended (delivered, rejected or given up). */
export function sendAll(options: SendRunOptions): Promise<void> {
  const { deliveries, urls, concurrency, policy } = options;
  const due: Array<{ d: Delivery; attempt: number }> = [];
  let dueHead = 0;
  let fresh = 0;
  let inFlight = 0;
  let ended = 0;
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const rate = options.ratePerSecond;
  const started = performance.now();
  let paced = 0;
  let wake: ReturnType<typeof setTimeout> | undefined;
  /** Whether the next new delivery may start now (else a timer pumps again when it may). */
  const mayStart = (d: Delivery): boolean => {
    if (rate === undefined || d.kind === 'duplicate-concurrent') return true;
    const at = started + (paced * 1000) / rate;
    if (performance.now() >= at) return true;
    wake ??= setTimeout(
      () => {
        wake = undefined;
        pump();
      },
      Math.max(1, at - performance.now()),
    );
    return false;
  };
  let pump: () => void = () => undefined;
  return new Promise<void>((resolve, reject) => {
    if (deliveries.length === 0) return resolve();
    pump = () => {
      while (inFlight < concurrency) {
        // Retries that are due go before deliveries not yet tried.
        let next: { d: Delivery; attempt: number } | undefined;
        if (dueHead < due.length) next = due[dueHead++];
        else if (fresh < deliveries.length && mayStart(deliveries[fresh]!)) {
          if (deliveries[fresh]!.kind !== 'duplicate-concurrent') paced++;
          next = { d: deliveries[fresh++]!, attempt: 1 };
          options.onDispatch?.(fresh);
        }
        if (next === undefined) break;
        if (dueHead > 1024 && dueHead * 2 > due.length) {
          due.splice(0, dueHead);
          dueHead = 0;
        }
        inFlight++;
        void run(next.d, next.attempt).catch(reject);
      }
    };
    const run = async (d: Delivery, attempt: number) => {
      const t0 = performance.now();
      const answer = await attemptOnce(agent, urls[d.instance]!, d, policy.timeoutMs);
      const latencyMs = performance.now() - t0;
      const step = decide(policy, attempt, answer.status);
      inFlight--;
      options.onAttempt({
        delivery: d,
        attempt,
        status: answer.status,
        label: answer.label,
        outcome: step.outcome,
        latencyMs,
      });
      if (step.outcome === 'retry') {
        setTimeout(() => {
          due.push({ d, attempt: attempt + 1 });
          pump();
        }, step.delayMs);
      } else if (++ended === deliveries.length) {
        resolve();
        return;
      }
      pump();
    };
    pump();
  }).finally(() => {
    clearTimeout(wake);
    agent.destroy();
  });
}
