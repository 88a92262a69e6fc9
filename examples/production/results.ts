// Stands in for your database in this example: the job ids your handler ran, in order.
import type { EventContext, JobCompletedEvent } from 'jobhook';

const ran: string[] = [];

/** Your work for a finished job, whichever path brought it (webhook or the reconciler's poll). Throw to have it retried. */
export async function handle(event: JobCompletedEvent, { jobId, source }: EventContext): Promise<void> {
  ran.push(jobId);
  console.log(`ran ${jobId} (${source}): ${event.status}`);
}

/** How many jobs ran (for /healthz: a count, nothing else). */
export const ranCount = () => ran.length;
