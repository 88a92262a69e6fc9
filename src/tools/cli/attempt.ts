import type { AttemptReport } from '../deliveries/send.js';

/**
 * One delivery attempt as `jobhook send` and `jobhook simulate` print it:
 * `HTTP 200 after 12 ms → processed`, `HTTP 401 SIGNATURE_INVALID after 3 ms → rejected (4xx: not retried)`,
 * `timed out after 5000 ms → retry in 1000 ms`, `ECONNREFUSED after 2 ms → gave-up`.
 */
export function describeAttempt(a: AttemptReport): string {
  const got =
    a.status !== undefined
      ? `HTTP ${a.status}${a.answer !== undefined && a.outcome !== 'delivered' ? ` ${a.answer}` : ''} after ${a.elapsedMs} ms`
      : a.timedOut
        ? `${a.error}` // already says how long
        : `${a.error} after ${a.elapsedMs} ms`;
  return `${got} → ${next(a)}`;
}

function next(a: AttemptReport): string {
  switch (a.outcome) {
    case 'retry':
      return `retry in ${a.delayMs} ms`;
    case 'rejected':
      return a.status !== undefined && a.status < 400
        ? 'rejected (redirects are not followed)'
        : 'rejected (4xx: not retried)';
    case 'delivered':
      // As the receiver answered: a jobhook receiver says whether it ran the job.
      return a.answer === 'processed' || a.answer === 'duplicate' ? a.answer : 'delivered';
    case 'gave-up':
      return 'gave up';
  }
}
