/**
 * Why a delivery was refused, told so that an operator can act: refusals that point at
 * this receiver's setup (no key opens the signature, the signature header missing, a
 * body changed on the way, the body unavailable, too large, clocks apart) are logged at
 * warn or error by default, with the cause and the fix, at most once per interval and
 * kind (then one summary line with the count: base/alerts.ts). Refusals anyone can cause
 * without saying anything about the setup stay at debug.
 */
import { ALERT_INTERVAL_MS, Alerts, type AlertLevel } from '../base/alerts.js';
import { isWebhookError, type AnyWebhookError } from '../base/errors.js';
import { errorDetails, type Logger } from '../base/log.js';
import { quoted } from '../base/text.js';
import { ClientAbortedError } from './body.js';
import { renamedHeader, signatureOpened } from './evidence.js';
import { SignatureShareError, type AdmissionState, type DeliveryGuard } from './guard.js';

/** What is told of one kind of refusal: its level, its cause and fix (first line), and what its summary counts. */
interface Told {
  level: AlertLevel;
  summary: string;
  first: (err: AnyWebhookError) => string;
}

const status = (err: AnyWebhookError) => `${err.status} ${err.code}`;

/** What the diagnosis knows beyond one refusal: what opened and verified lately, and the bodies in flight. */
export interface Evidence {
  /** When a signature last opened with a configured key, a delivery last verified (performance.now()). */
  readonly lastOpened: number;
  readonly lastVerified: number;
  readonly guard: Pick<DeliveryGuard, 'state'>;
}

/** A refusal anyone can cause, once the setup is shown right: counted in the summary, no recommendation. */
const counted = (summary: string): Told => ({
  level: 'info',
  summary,
  first: (e) => `jobhook: refused a request ${status(e)} (${summary})`,
});

/** Whether `at` (performance.now()) falls within the last alert interval. */
const lately = (at: number) => performance.now() - at < ALERT_INTERVAL_MS;

/**
 * The refusals that say something about the setup, by code (and reason). A refusal that
 * recommends a change does so only on evidence an unsigned sender cannot forge: a
 * signature that opened with the configured key (a renamed header, a body too large),
 * or no signature opening and no delivery verifying for a whole interval (a wrong key, a
 * dropped header: then the first refusal may be the gateway's, and it is told loudly).
 * While signatures open and deliveries verify, the same refusals are counted only.
 */
function told(err: AnyWebhookError, evidence: Evidence | undefined): [key: string, told: Told] | undefined {
  const verified = evidence !== undefined && lately(evidence.lastVerified);
  switch (err.code) {
    case 'SIGNATURE_INVALID':
    case 'SIGNATURE_MISSING':
    case 'SIGNATURE_MALFORMED':
    case 'ALGORITHM_UNSUPPORTED':
      return signatureTold(err, evidence);
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
      return signatureOpened(err)
        ? [err.code, TOO_LARGE]
        : ['BODY_TOO_LARGE:unsigned', counted('413 BODY_TOO_LARGE, unsigned')];
    case 'EVENT_TOO_OLD':
    case 'EVENT_FROM_FUTURE':
      if (verified) return [`${err.code}:counted`, counted(`${err.code}, while other deliveries verify`)];
      return [
        err.code,
        {
          level: 'warn',
          summary: `signed deliveries refused ${err.code}`,
          first: (e) =>
            `jobhook: refused a signed delivery ${status(e)}: ${e.message} No delivery has verified here lately: if the gateway's deliveries get this, check this machine's clock (and maxAgeSeconds, maxFutureSkewSeconds).`,
        },
      ];
    case 'RECEIVER_BUSY':
      return err instanceof SignatureShareError
        ? ['busy:signature', SIGNATURE_SHARE]
        : ['busy', busyTold(evidence?.guard.state())];
    default:
      return undefined;
  }
}

/** The signature's refusals: loud, with a recommendation, only on evidence (see told). */
function signatureTold(err: AnyWebhookError, evidence: Evidence | undefined): [key: string, told: Told] {
  const opened = evidence !== undefined && lately(evidence.lastOpened);
  const verified = evidence !== undefined && lately(evidence.lastVerified);
  switch (err.code) {
    case 'SIGNATURE_INVALID':
      if (err.reason === 'unknown-key')
        return opened
          ? [
              'unknown-key:counted',
              counted("no configured key opens their signature, while the gateway's open"),
            ]
          : ['unknown-key', UNKNOWN_KEY];
      if (err.reason === 'body-changed')
        return verified
          ? [
              'body-changed:counted',
              counted('a captured signature with another body, while deliveries verify'),
            ]
          : ['body-changed', BODY_CHANGED];
      return ['replayed', REPLAYED];
    case 'SIGNATURE_MISSING': {
      const renamed = renamedHeader(err);
      if (renamed !== undefined) return [`renamed:${renamed.toLowerCase()}`, renamedTold(renamed)];
      return opened
        ? ['missing:counted', counted('no signature header, while signed deliveries arrive')]
        : ['missing', MISSING];
    }
    default:
      if (opened) return [`${err.code}:counted`, counted(`${err.code}, while signed deliveries arrive`)];
      return [
        err.code,
        {
          level: 'warn',
          summary: `deliveries refused ${err.code} (the signature header is not what the gateway sends)`,
          first: (e) =>
            `jobhook: refused a delivery ${status(e)}: ${e.message} No signature has opened here lately: if deliveries from the gateway get this, something between it and this receiver changes the header.`,
        },
      ];
  }
}

const UNKNOWN_KEY: Told = {
  level: 'warn',
  summary:
    'deliveries refused 401 SIGNATURE_INVALID: no configured key opens their signature (forged, or publicKey is not the gateway key)',
  first: () =>
    'jobhook: refused a delivery 401 SIGNATURE_INVALID: no configured key opens its signature, and no signature has opened here lately. If it came from the gateway, publicKey is not the key the gateway signs with ' +
    "(another environment's key? a rotation? check GATEWAY_PUBLIC_KEY) and every delivery is lost: the gateway does not retry a 401. Forged requests look the same.",
};

const BODY_CHANGED: Told = {
  level: 'warn',
  summary:
    'deliveries refused 401 SIGNATURE_INVALID: the gateway key opens their signature but the body is not what was signed',
  first: () =>
    "jobhook: refused a delivery 401 SIGNATURE_INVALID: the gateway's key opens its signature, but the body is not what was signed, and no delivery has verified here lately. Something between the gateway and jobhook " +
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
  summary: 'signed deliveries refused 413 BODY_TOO_LARGE',
  first: (e) =>
    `jobhook: refused a signed delivery 413 BODY_TOO_LARGE: ${e.message} Its signature opened with publicKey. The gateway does not retry a 413: if it sends deliveries this large, raise maxBodyBytes (and any limit in front of jobhook).`,
};

const MISSING: Told = {
  level: 'warn',
  summary: 'deliveries refused 401 SIGNATURE_MISSING (no signature header)',
  first: () =>
    'jobhook: refused a delivery 401 SIGNATURE_MISSING: it has no signature header, and no signature has opened here lately. If it came from the gateway, a proxy dropped or renamed the header, or the gateway names it otherwise (signatureHeader); a renamed header that carries the gateway signature is named here once one arrives.',
};

/** A signature that opened with publicKey under another header: a rename, proven. */
function renamedTold(header: string): Told {
  const name = quoted(header, 100);
  return {
    level: 'warn',
    summary: `deliveries whose signature came under ${name}, refused 401 SIGNATURE_MISSING`,
    first: () =>
      `jobhook: refused a delivery 401 SIGNATURE_MISSING: its signature came under the header ${name} and opens with publicKey: something between the gateway and this receiver renames the header. ` +
      `Every delivery is lost (the gateway does not retry a 401): set signatureHeader: ${name.replace(/^"|"$/g, "'")}, or stop the rename.`,
  };
}

const SIGNATURE_SHARE: Told = {
  level: 'warn',
  summary:
    'requests refused 503 RECEIVER_BUSY: one signature holding its whole share of the bodies in flight',
  first: (e) => {
    const { requests, bytes } = e as SignatureShareError;
    return (
      `jobhook: refused a request 503 RECEIVER_BUSY: ${requests} requests carrying one signature hold ${bytes} body bytes, its whole share (the gateway sends a delivery a few times at most). ` +
      'A captured signature is being replayed, likely with bodies that stall; deliveries under other signatures keep the rest of maxInFlightBytes, and stalled bodies are dropped within seconds. No limit to raise.'
    );
  },
};

/** The bodies in flight as the log tells them; advice to raise a limit only when no one signature holds most of them. */
function busyTold(state: AdmissionState | undefined): Told {
  return {
    level: 'warn',
    summary: 'deliveries answered 503 RECEIVER_BUSY (the gateway retries them)',
    first: (e) => {
      if (state === undefined)
        return `jobhook: answered a delivery 503 RECEIVER_BUSY: ${e.message} The gateway retries.`;
      const { requests, bytes, maxBytes, signatures, largestSignature: top } = state;
      const held = `${requests} requests under ${signatures} signatures hold ${bytes} of maxInFlightBytes ${maxBytes} body bytes; the most under one signature: ${top.requests} requests, ${top.bytes} bytes.`;
      const one = top.bytes * 2 > bytes;
      return `jobhook: answered a delivery 503 RECEIVER_BUSY: ${held} ${
        one
          ? 'One signature holds most of them: a captured signature replayed; the gateway retries genuine deliveries, and stalled bodies are dropped within seconds.'
          : 'The gateway retries; if this lasts while the bodies in flight are genuine deliveries, raise maxInFlightBytes or workerPoolSize, or add receivers.'
      }`;
    },
  };
}

export class Diagnosis {
  readonly alerts: Alerts;

  /** `evidence`: what opened and verified lately (the receiver's Verification); without it every alarm is told as it comes. */
  constructor(
    readonly log: Logger,
    private readonly evidence?: Evidence,
  ) {
    this.alerts = new Alerts(log);
  }

  /** Tells why a delivery was refused, at the level it deserves. */
  refused(err: unknown): void {
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
    const kind = told(err, this.evidence);
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
