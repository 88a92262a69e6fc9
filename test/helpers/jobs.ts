/**
 * Helpers of the job-protocol tests: a clock that can jump as a process pause makes it,
 * and a collector of onError's reports.
 */
import { systemClock, type Clock } from '../../src/lib/jobs/clock.js';

/** The system clock, with a monotonic reading that can jump ahead as a process pause makes it. */
export function pausableClock(): Clock & { pause(ms: number): void } {
  let skipped = 0;
  return {
    now: () => Date.now() + skipped,
    monotonic: () => systemClock.monotonic() + skipped,
    pause: (ms) => void (skipped += ms),
  };
}

/** onError's reports, by stage. */
export function reports() {
  const seen: { stage: string; jobId?: string; error: unknown }[] = [];
  return {
    seen,
    onError: (error: unknown, c: { jobId?: string; stage: string }) => void seen.push({ ...c, error }),
    stages: () => seen.map((s) => s.stage),
  };
}
