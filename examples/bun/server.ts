// jobhook/web on Bun.serve. Run: GATEWAY_PUBLIC_KEY="$(cat gateway-public.pem)" bun server.ts
import { createReceiver } from 'jobhook/web';

const receive = createReceiver({
  publicKey: Bun.env.GATEWAY_PUBLIC_KEY!,
  onEvent: async (event, { jobId }) => {
    // Your work, e.g. await db.results.upsert(jobId, event). Throw to have the gateway retry.
    console.log(`job ${jobId}: ${event.status}`);
  },
});

const server = Bun.serve({
  port: Number(Bun.env.PORT ?? 3000),
  hostname: Bun.env.HOST, // undefined: every interface
  routes: { '/webhooks/gateway': { POST: receive } },
  fetch: () => new Response('Not Found', { status: 404 }),
});
console.log(`listening on ${server.url}`);
