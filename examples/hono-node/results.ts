// Stands in for your database in these examples.
const results = new Map<string, unknown>();

export async function saveResult(jobId: string, output: unknown): Promise<void> {
  results.set(jobId, output);
  console.log(`saved ${jobId}`);
}

export async function markFailed(jobId: string, message: string): Promise<void> {
  results.set(jobId, { failed: message });
  console.log(`failed ${jobId}: ${message}`);
}

/** Records a job once (as an INSERT … ON CONFLICT DO NOTHING would): false when it was there already. */
export async function saveOnce(jobId: string, output: unknown): Promise<boolean> {
  if (results.has(jobId)) return false;
  await saveResult(jobId, output);
  return true;
}
