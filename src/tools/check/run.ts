/**
 * Sends a check's deliveries one after the other (the latencies stay comparable), each
 * as the gateway would: with its retries, once, twice, twice at once, or after an
 * attempt it gave up on. The check's time limit and the caller's signal stop it.
 */
import { sleep, type AttemptReport } from '../deliveries/send.js';
import { sendCopies, type Twice } from '../deliveries/variants.js';
import { sendAndDrop } from './drop.js';
import type { CheckSettings, RetryPolicy } from './options.js';
import type { PlannedCase, SendReport } from './types.js';

export interface Sending {
  s: CheckSettings;
  signal: AbortSignal;
  /** Told of each attempt as it ends, with the copy it belongs to (1, or 2 when sent twice). */
  tell?: (attempt: AttemptReport, copy: number) => void;
}

/** The case's delivery with `policy`'s retries, once or twice. */
async function withPolicy(
  x: Sending,
  c: PlannedCase,
  policy: RetryPolicy,
  twice?: Twice,
): Promise<SendReport[]> {
  const sent = await sendCopies(
    {
      url: x.s.url.href,
      headers: c.headers,
      body: c.body,
      ...policy,
      allowInsecure: x.s.allowInsecure,
      signal: x.signal,
    },
    twice,
    x.tell,
  );
  return sent.map(({ attempts, delivered }) => ({ attempts, delivered }));
}

/** The first attempt cut once its body was sent, then what is left of the gateway's attempts. */
async function dropped(x: Sending, c: PlannedCase): Promise<SendReport> {
  const p = x.s.policy;
  const cut = await sendAndDrop(x.s.url, c.headers, c.body, p.timeoutMs);
  if (x.signal.aborted) throw x.signal.reason;
  const delayMs = Math.min(p.backoffMs, p.maxBackoffMs);
  const first: AttemptReport = {
    attempt: 1,
    error: cut.error ?? 'cut by the check once its body was sent',
    outcome: p.retries > 0 ? 'retry' : 'gave-up',
    startedAt: cut.startedAt,
    elapsedMs: cut.elapsedMs,
    ...(p.retries > 0 ? { delayMs } : {}),
  };
  x.tell?.(first, 1);
  if (p.retries === 0) return { attempts: [first], delivered: false, dropped: true };
  await sleep(delayMs, x.signal);
  const tell =
    x.tell && ((a: AttemptReport, copy: number) => x.tell!({ ...a, attempt: a.attempt + 1 }, copy));
  const [rest] = (await withPolicy({ ...x, tell }, c, {
    ...p,
    retries: p.retries - 1,
    backoffMs: Math.min(p.backoffMs * 2, p.maxBackoffMs),
  })) as [SendReport];
  return {
    attempts: [first, ...rest.attempts.map((a) => ({ ...a, attempt: a.attempt + 1 }))],
    delivered: rest.delivered,
    dropped: true,
  };
}

/** Sends one case as its mode says; rejects with the signal's reason when stopped. */
export async function sendCase(x: Sending, c: PlannedCase): Promise<SendReport[]> {
  const policy = x.s.policy;
  switch (c.mode) {
    case 'policy':
      return withPolicy(x, c, policy);
    case 'single':
      return withPolicy(x, c, { ...policy, retries: 0 });
    case 'twice':
      return withPolicy(x, c, policy, 'in-a-row');
    case 'concurrent':
      return withPolicy(x, c, policy, 'at-once');
    case 'dropped':
      return [await dropped(x, c)];
  }
}
