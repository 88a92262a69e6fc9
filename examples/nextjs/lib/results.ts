// Stands in for your database in this example.
import type { JobCompletedEvent } from 'jobhook';

export async function saveResult(jobId: string, event: JobCompletedEvent): Promise<void> {
  console.log(`saved ${jobId} (${event.status})`);
}
