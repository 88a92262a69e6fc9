/**
 * How the runner tells a failure in its log. A store that is down, not migrated, or a
 * body that was never kept fails every delivery the same way: the first of each kind in
 * an interval is logged in full (its cause and fix), the rest are counted into one
 * summary line (base/alerts.ts), so an outage is loud but never a flood. A handler's
 * failure and a job that may have run twice are each told: they are about one job.
 */
import { Alerts } from '../base/alerts.js';
import { isWebhookError } from '../base/errors.js';
import { errorDetails, type Logger } from '../base/log.js';

/** Stages whose failures repeat for every delivery while their cause lasts. */
const REPEATING: ReadonlySet<string> = new Set(['body', 'claim', 'renew', 'complete', 'release', 'poll']);

/** The code of an error's first cause that has one (ECONNREFUSED, 42P01…): a new cause is told in full. */
function causeCode(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown } })?.cause;
  return typeof cause?.code === 'string' ? cause.code : '';
}

export class FailureLog {
  private readonly alerts: Alerts;

  constructor(private readonly log: Logger) {
    this.alerts = new Alerts(log);
  }

  /** `what`: the failure in words (`the idempotency store failed to claim`). */
  tell(stage: string, what: string, error: unknown, jobId?: string): void {
    const line = `jobhook: ${what}${jobId === undefined ? '' : ` for job ${jobId}`}`;
    if (!REPEATING.has(stage)) return this.log.error(line, errorDetails(error));
    const code = isWebhookError(error) ? error.code : ((error as Error)?.name ?? 'Error');
    const message = (error as Error)?.message;
    this.alerts.raise(
      `${stage}:${code}:${causeCode(error)}`,
      'error',
      `${what} (${code})`,
      () => (typeof message === 'string' && message !== '' ? `${line}: ${message}` : line),
      () => errorDetails(error, typeof message === 'string' && message !== '' ? `${line}: ${message}` : line),
    );
  }
}
