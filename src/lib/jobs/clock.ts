/**
 * The two readings of time a job runner needs, from one object it owns.
 * - `now`: the wall clock (epoch ms), for what is compared with other machines' times:
 *   the signed `finished_at`, retention ends handed to stores.
 * - `monotonic`: milliseconds that never go back and keep counting while the process is
 *   paused (SIGSTOP, a frozen VM, a long GC), for how long this process has held a claim
 *   without confirming it: a paused holder finds its lease over the moment it resumes,
 *   before any timer of its own has run.
 */
export interface Clock {
  now(): number;
  monotonic(): number;
}

export const systemClock: Clock = Object.freeze({
  now: () => Date.now(),
  monotonic: () => performance.now(),
});
