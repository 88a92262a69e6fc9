// app/api/webhooks/gateway/route.ts
import { createReceiver } from 'jobhook/web';
import { saveResult } from '../../../../lib/results';

export const POST = createReceiver({
  // A function: read at the first delivery, so `next build` runs without the key.
  publicKey: () => process.env.GATEWAY_PUBLIC_KEY!,
  onEvent: async (event, { jobId }) => {
    await saveResult(jobId, event);
  },
});
