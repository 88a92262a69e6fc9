// The simulator's sending of a finished job's webhook, as its `delivery` option asks.
import type { KeyObject } from 'node:crypto';
import { type DialectName, signDelivery } from '../../index.js';
import {
  option,
  optionError,
  checkOptionNames,
  type HeaderNameOptions,
  type OptionNamesOf,
} from '../../lib/entries/tools-door.js';
import { sleep, type AttemptReport, type SendOptions } from '../deliveries/send.js';
import {
  encodedDelivery,
  SENT_ENCODINGS,
  sendCopies,
  tamperedPayload,
  TWICE,
  type SentEncoding,
  type Twice,
} from '../deliveries/variants.js';
import { writeWire, type WireObject } from '../deliveries/wire.js';

/** The `User-Agent` of the simulator's deliveries. */
export const SIMULATOR_USER_AGENT = 'jobhook-gateway-simulator/1';

/**
 * How the simulator sends a job's webhook besides once, as the gateway does. The ways
 * combine: `{ encoding: 'gzip', twice: 'at-once' }` sends the compressed body twice at once.
 */
export interface SimulatedDelivery {
  /** Compress the body and say so in `Content-Encoding` (the gateway sends none; a proxy on the way may). The signature covers the JSON inside. */
  encoding?: SentEncoding;
  /** Change a value of the body after it was signed (`output.text`, or `error.message` of a failed job), as someone on the way would: a receiver must refuse it (401). */
  tampered?: boolean;
  /**
   * Send it a second time, with the gateway's retries too: `'in-a-row'` once the first
   * sending ended (a retry after a lost answer), `'at-once'` both at the same moment (a
   * retry racing a slow first attempt). A receiver must run the job once.
   */
  twice?: Twice;
  /** Send the same bytes and signature once more, this long after the sendings before it ended (a replay). */
  replayAfterMs?: number;
}

/** The names of {@link SimulatedDelivery}. */
export const SIMULATED_DELIVERY_OPTIONS = {
  encoding: true,
  tampered: true,
  twice: true,
  replayAfterMs: true,
} as const satisfies OptionNamesOf<SimulatedDelivery>;

/** A finished job, as a `delivery` function sees it to choose how its webhook is sent. */
export interface SimulatedJob {
  jobId: string;
  /** The job request's `model`. */
  model: string;
  status: 'success' | 'fail';
  /** The job request's `user_webhook_parameters` as `JSON.parse` reads them, when given. */
  userParameters?: unknown;
}

/** One delivery attempt, as recorded in `GatewaySimulator.deliveries`. */
export interface DeliveryAttempt extends AttemptReport {
  jobId: string;
  url: string;
  /** The sending it belongs to: 1 for the first (see {@link DeliveryResult.sendings}). */
  sending: number;
}

/** One sending of a job's delivery, with the gateway's retries. */
export interface DeliverySending {
  /** 1 for the first. */
  sending: number;
  /** `first`; `second` (of `twice`); `replay` (of `replayAfterMs`). */
  kind: 'first' | 'second' | 'replay';
  /** As {@link DeliveryResult.outcome}; `cancelled` when `close()` stopped it or came before it. */
  outcome: DeliveryResult['outcome'];
  attempts: DeliveryAttempt[];
}

/** How a job's delivery ended. */
export interface DeliveryResult {
  jobId: string;
  url: string;
  /**
   * How the first sending ended: `delivered` (2xx), `rejected` (4xx, or a redirect: not
   * retried), `gave-up` after the last retry, `cancelled` by `close()`. The other sendings
   * (`delivery` option) have their own in `sendings`.
   */
  outcome: 'delivered' | 'rejected' | 'gave-up' | 'cancelled';
  /** Every attempt of every sending, in the order they ended. */
  attempts: DeliveryAttempt[];
  /** Each sending: one, unless the `delivery` option asked for more; none when the job was cancelled before it finished. */
  sendings: DeliverySending[];
  /** The headers sent (absent when the job was cancelled before it finished). */
  headers?: Record<string, string>;
  /** The JSON body sent, before any Content-Encoding (the changed one when tampered). */
  body?: string;
}

/** What a delivery takes from the simulator's settings. */
export interface DeliveryContext {
  key: KeyObject;
  dialect: DialectName;
  headers: Readonly<Required<HeaderNameOptions>>;
  policy: Required<Pick<SendOptions, 'retries' | 'timeoutMs' | 'backoffMs' | 'maxBackoffMs'>>;
  /** Aborted by `close()`. */
  signal: AbortSignal;
  /** Told about every attempt as it ends. */
  record: (attempt: DeliveryAttempt) => void;
}

// setTimeout's limit: a longer delay would fire at once.
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A `delivery` value checked, or an OptionError naming the field at fault (`delivery.twice`). */
export function checkSimulatedDelivery(
  value: SimulatedDelivery,
  name = 'delivery',
): Readonly<SimulatedDelivery> {
  if (typeof value !== 'object' || value === null)
    throw optionError`${option(name)} must be an object such as { twice: 'at-once' }`;
  checkOptionNames(value, SIMULATED_DELIVERY_OPTIONS);
  const { encoding, tampered, twice, replayAfterMs } = value;
  const listed = (v: unknown, list: readonly string[], field: string) => {
    if (v !== undefined && !list.includes(v as string))
      throw optionError`${option(`${name}.${field}`)} must be ${list.map((s) => `'${s}'`).join(' or ')}, got ${JSON.stringify(v)}`;
  };
  listed(encoding, SENT_ENCODINGS, 'encoding');
  listed(twice, TWICE, 'twice');
  if (tampered !== undefined && typeof tampered !== 'boolean')
    throw optionError`${option(`${name}.tampered`)} must be true or false`;
  if (
    replayAfterMs !== undefined &&
    (!Number.isInteger(replayAfterMs) || replayAfterMs < 0 || replayAfterMs > MAX_TIMER_MS)
  ) {
    throw optionError`${option(`${name}.replayAfterMs`)} must be a whole number from 0 to ${MAX_TIMER_MS}, got ${String(replayAfterMs)}`;
  }
  return Object.freeze({ ...value });
}

/** The sendings `style` asks for, each `cancelled` until it ends. */
function plannedSendings(style: SimulatedDelivery): DeliverySending[] {
  const kinds: Array<DeliverySending['kind']> = ['first'];
  if (style.twice !== undefined) kinds.push('second');
  if (style.replayAfterMs !== undefined) kinds.push('replay');
  return kinds.map((kind, k) => ({ sending: k + 1, kind, outcome: 'cancelled', attempts: [] }));
}

/** The payload signed, then changed and compressed as `style` says: what goes on the wire. */
function wireOf(
  x: DeliveryContext,
  payload: WireObject,
  style: SimulatedDelivery,
): { headers: Record<string, string>; body: string; wire: string | Uint8Array } {
  const signed = writeWire(payload, x.dialect);
  const { headers } = signDelivery(signed, x.key, {
    dialect: x.dialect,
    userAgent: SIMULATOR_USER_AGENT,
    ...x.headers,
  });
  const body = style.tampered === true ? writeWire(tamperedPayload(payload), x.dialect) : signed;
  if (style.encoding === undefined) return { headers, body, wire: body };
  const encoded = encodedDelivery({ headers, body }, style.encoding);
  return { headers: encoded.headers, body, wire: encoded.body };
}

/**
 * Signs `payload` and sends it to `url` as `style` says, each sending with the gateway's
 * retries, every attempt recorded as it ends, and each sending's outcome with its last
 * attempt (so a `close()`, the context's signal, leaves only the unfinished `cancelled`).
 */
export async function deliverPayload(
  x: DeliveryContext,
  job: { jobId: string; url: string; payload: WireObject },
  style: SimulatedDelivery,
): Promise<DeliveryResult> {
  const { jobId, url } = job;
  const { headers, body, wire } = wireOf(x, job.payload, style);
  const sendings = plannedSendings(style);
  const attempts: DeliveryAttempt[] = [];
  const record = (report: AttemptReport, sending: number) => {
    const attempt: DeliveryAttempt = { jobId, url, sending, ...report };
    const s = sendings[sending - 1]!;
    attempts.push(attempt);
    s.attempts.push(attempt);
    if (report.outcome !== 'retry') s.outcome = report.outcome;
    x.record(attempt);
  };
  const options: SendOptions = { url, headers, body: wire, ...x.policy, signal: x.signal };
  try {
    await sendCopies(options, style.twice, record);
    if (style.replayAfterMs !== undefined) {
      await sleep(style.replayAfterMs, x.signal);
      const replay = sendings.length;
      await sendCopies(options, undefined, (report) => record(report, replay));
    }
  } catch (err) {
    if (!x.signal.aborted) throw err;
  }
  return { jobId, url, outcome: sendings[0]!.outcome, attempts, sendings, headers, body };
}
