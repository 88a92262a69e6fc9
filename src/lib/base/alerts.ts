/**
 * Loud, never a flood: a problem that points at the receiver's configuration (a wrong
 * key, a proxy dropping the signature header, a store not migrated) is logged at warn or
 * error the first time it happens in an interval, with its cause and fix; the same
 * problem again within the interval costs a counter increment, and one summary line with
 * the count closes the interval. Forged traffic looks like some of these problems, so
 * that is all it can cost.
 */
import type { Logger } from './log.js';

/** How long a problem's first line stands for its repeats (then one summary line). */
export const ALERT_INTERVAL_MS = 60_000;

/** The levels a problem is told at. */
export type AlertLevel = 'info' | 'warn' | 'error';

interface Seen {
  level: AlertLevel;
  /** What the summary says of the repeats. */
  summary: string;
  repeats: number;
}

export class Alerts {
  private readonly seen = new Map<string, Seen>();
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly log: Logger,
    private readonly intervalMs = ALERT_INTERVAL_MS,
  ) {}

  /**
   * One occurrence of the problem `key`: `first()` is logged at `level` when it is the
   * first in the interval (details: `details()`), else it is counted for the summary.
   */
  raise(
    key: string,
    level: AlertLevel,
    summary: string,
    first: () => string,
    details?: () => Record<string, unknown>,
  ): void {
    const seen = this.seen.get(key);
    if (seen !== undefined) {
      seen.repeats++;
      return;
    }
    this.seen.set(key, { level, summary, repeats: 0 });
    this.log[level](first(), details?.());
    if (this.timer === undefined) {
      this.timer = setTimeout(() => this.close(), this.intervalMs);
      (this.timer as { unref?: () => void }).unref?.();
    }
  }

  /** Ends the interval: a summary line per problem that came again, then every problem logs in full at its next occurrence. */
  close(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const seconds = Math.round(this.intervalMs / 1000);
    for (const { level, summary, repeats } of this.seen.values()) {
      if (repeats > 0) this.log[level](`jobhook: ${repeats} more in the last ${seconds} s: ${summary}`);
    }
    this.seen.clear();
  }
}
