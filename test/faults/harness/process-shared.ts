/** Names shared by the receiver processes of the receiver-fault suite and the suite itself. */

/** The store's table (PostgreSQL) and key prefix (Redis). */
export const STORE_TABLE = 'faults_jobs';
export const REDIS_KEY_PREFIX = 'faults:job:';
/** Transactional mode: one row per effect written through `context.transaction` (no unique key: a double shows as two rows). */
export const EFFECTS_TABLE = 'faults_effects';
/** The README's inbox pattern (INBOX=1): one key per job, inserted ON CONFLICT (job_id) DO NOTHING through the transaction. */
export const INBOX_TABLE = 'faults_inbox';

/** Handler work before the effect, 1–20 ms, the same for a job in every process. */
export function workMsOf(jobId: string): number {
  return 1 + (parseInt(jobId.slice(0, 4), 16) % 20);
}
