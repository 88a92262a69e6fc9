/**
 * Why a delivery was refused, told so that an operator can act: refusals that point at
 * this receiver's setup (no key opens the signature, the signature header missing, a
 * body changed on the way, the body unavailable, too large, clocks apart) are logged at
 * warn or error by default, with the cause and the fix, at most once per interval and
 * kind (then one summary line with the count: base/alerts.ts). Refusals anyone can cause
 * without saying anything about the setup stay at debug.
 */
import { Alerts, type AlertLevel } from '../base/alerts.js';
import { isWebhookError, type AnyWebhookError } from '../base/errors.js';
import { errorDetails, type Logger } from '../base/log.js';
import type { HeadersInput } from '../core/verify/headers.js';
import { ClientAbortedError } from './body.js';

/** What is told of one kind of refusal: its level, its cause and fix (first line), and what its summary counts. */
interface Told {
  level: AlertLevel;
  summary: string;
  first: (err: AnyWebhookError) => string;
}

const status = (err: AnyWebhookError) => `${err.status} ${err.code}`;

/** The refusals that say something about the setup, by code (and reason). */
function told(
  err: AnyWebhookError,
  signatureHeader: string,
  headers: HeadersInput | undefined,
): [key: string, told: Told] | undefined {
  switch (err.code) {
    case 'SIGNATURE_INVALID':
      if (err.reason === 'unknown-key') return ['unknown-key', UNKNOWN_KEY];
      if (err.reason === 'body-changed') return ['body-changed', BODY_CHANGED];
      return ['replayed', REPLAYED];
    case 'SIGNATURE_MISSING':
      return ['missing', missing(signatureHeader, headers)];
    case 'SIGNATURE_MALFORMED':
    case 'ALGORITHM_UNSUPPORTED':
      return [
        err.code,
        {
          level: 'warn',
          summary: `deliveries refused ${err.code} (the signature header is not what the gateway sends)`,
          first: (e) =>
            `jobhook: refused a delivery ${status(e)}: ${e.message} If deliveries from the gateway get this, something between it and this receiver changes the header.`,
        },
      ];
    case 'BODY_UNAVAILABLE':
      return [
        err.code,
        {
          level: 'error',
          summary: 'deliveries answered 500 BODY_UNAVAILABLE (the raw body was not kept)',
          first: (e) => `jobhook: ${e.message}`,
        },
      ];
    case 'BODY_TOO_LARGE':
      return [err.code, TOO_LARGE];
    case 'EVENT_TOO_OLD':
    case 'EVENT_FROM_FUTURE':
      return [
        err.code,
        {
          level: 'warn',
          summary: `signed deliveries refused ${err.code}`,
          first: (e) =>
            `jobhook: refused a signed delivery ${status(e)}: ${e.message} If the gateway's deliveries get this, check this machine's clock (and maxAgeSeconds, maxFutureSkewSeconds).`,
        },
      ];
    case 'RECEIVER_BUSY':
      return [
        err.code,
        {
          level: 'warn',
          summary: 'deliveries answered 503 RECEIVER_BUSY (the gateway retries them)',
          first: (e) =>
            `jobhook: answered a delivery 503 RECEIVER_BUSY: ${e.message} The gateway retries; if this lasts, raise maxInFlightBytes or workerPoolSize, or add receivers.`,
        },
      ];
    default:
      return undefined;
  }
}

const UNKNOWN_KEY: Told = {
  level: 'warn',
  summary:
    'deliveries refused 401 SIGNATURE_INVALID: no configured key opens their signature (forged, or publicKey is not the gateway key)',
  first: () =>
    'jobhook: refused a delivery 401 SIGNATURE_INVALID: no configured key opens its signature. If it came from the gateway, publicKey is not the key the gateway signs with ' +
    "(another environment's key? a rotation? check GATEWAY_PUBLIC_KEY) and every delivery is lost: the gateway does not retry a 401. Forged requests look the same.",
};

const BODY_CHANGED: Told = {
  level: 'warn',
  summary:
    'deliveries refused 401 SIGNATURE_INVALID: the gateway key opens their signature but the body is not what was signed',
  first: () =>
    "jobhook: refused a delivery 401 SIGNATURE_INVALID: the gateway's key opens its signature, but the body is not what was signed. Something between the gateway and jobhook " +
    'changed the bytes (a proxy or CDN that re-encodes, a body parser that re-serialized the JSON: give jobhook the raw bytes), or a captured signature is being replayed with another body. ' +
    "Capture one and run 'jobhook explain --key <public key> <capture>' to see which.",
};

const REPLAYED: Told = {
  level: 'info',
  summary: 'replays of signatures verified here, with other bodies, refused 401',
  first: (e) => `jobhook: refused a replay 401 SIGNATURE_INVALID: ${e.message}`,
};

const TOO_LARGE: Told = {
  level: 'warn',
  summary: 'deliveries refused 413 BODY_TOO_LARGE',
  first: (e) =>
    `jobhook: refused a delivery 413 BODY_TOO_LARGE: ${e.message} The gateway does not retry a 413: if it sends deliveries this large, raise maxBodyBytes (and any limit in front of jobhook).`,
};

/** Names of headers that look like a signature header, for a delivery without the configured one. */
function lookalikes(signatureHeader: string, headers: HeadersInput | undefined): string[] {
  if (headers === undefined || typeof (headers as { get?: unknown }).get === 'function') {
    const h = headers as { forEach?: (f: (v: string, k: string) => void) => void } | undefined;
    const names: string[] = [];
    h?.forEach?.((_, k) => names.push(k));
    return names.filter((n) => /signature/i.test(n) && n.toLowerCase() !== signatureHeader.toLowerCase());
  }
  return Object.keys(headers).filter(
    (n) => /signature/i.test(n) && n.toLowerCase() !== signatureHeader.toLowerCase(),
  );
}

function missing(signatureHeader: string, headers: HeadersInput | undefined): Told {
  return {
    level: 'warn',
    summary: `deliveries refused 401 SIGNATURE_MISSING (no ${signatureHeader} header)`,
    first: () => {
      const seen = lookalikes(signatureHeader, headers);
      const hint =
        seen.length > 0
          ? ` This one has ${seen.join(', ')}: if that is the gateway's, set signatureHeader: '${seen[0]}'.`
          : '';
      return `jobhook: refused a delivery 401 SIGNATURE_MISSING: it has no ${signatureHeader} header. If it came from the gateway, a proxy dropped or renamed the header, or the gateway names it otherwise (signatureHeader).${hint}`;
    },
  };
}

export class Diagnosis {
  readonly alerts: Alerts;

  constructor(
    readonly log: Logger,
    private readonly signatureHeader: string,
  ) {
    this.alerts = new Alerts(log);
  }

  /** Tells why a delivery was refused (its headers, for hints), at the level it deserves. */
  refused(err: unknown, headers?: HeadersInput): void {
    if (err instanceof ClientAbortedError) return this.log.debug(`jobhook: ${err.message}`);
    if (!isWebhookError(err)) {
      const key = `unexpected:${(err as Error)?.message ?? String(err)}`.slice(0, 200);
      return this.alerts.raise(
        key,
        'error',
        'deliveries answered 500 after an unexpected failure (as above)',
        () => 'jobhook: the receiver failed unexpectedly',
        () => errorDetails(err),
      );
    }
    const kind = told(err, this.signatureHeader, headers);
    if (kind !== undefined)
      return this.alerts.raise(kind[0], kind[1].level, kind[1].summary, () => kind[1].first(err));
    if (err.status >= 500) this.log.error(`jobhook: ${err.code}: ${err.message}`);
    else if (err.code === 'BODY_TIMEOUT' || err.code === 'ENCODING_UNSUPPORTED')
      this.log.debug(`jobhook: refused a delivery: ${err.code}`, { message: err.message });
    else
      this.alerts.raise(
        `signed:${err.code}`,
        'info',
        `signed deliveries refused ${err.code}`,
        () => `jobhook: refused a signed delivery ${status(err)}: ${err.message}`,
      );
  }
}
