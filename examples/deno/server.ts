// jobhook/web on Deno.serve. Run, with jobhook in node_modules (npm install jobhook):
//   GATEWAY_PUBLIC_KEY="$(cat gateway-public.pem)" deno run --allow-net --allow-env server.ts
import { createReceiver } from 'jobhook/web';

const receive = createReceiver({
  publicKey: Deno.env.get('GATEWAY_PUBLIC_KEY')!,
  onEvent: async (event, { jobId }) => {
    // Your work, e.g. await db.results.upsert(jobId, event). Throw to have the gateway retry.
    console.log(`job ${jobId}: ${event.status}`);
  },
});

Deno.serve(
  {
    port: Number(Deno.env.get('PORT') ?? 8000),
    hostname: Deno.env.get('HOST'), // undefined: every interface
    onListen: ({ hostname, port }) => console.log(`listening on http://${hostname}:${port}/`),
  },
  (request) => {
    const { pathname } = new URL(request.url);
    if (request.method === 'POST' && pathname === '/webhooks/gateway') return receive(request);
    return new Response('Not Found', { status: 404 });
  },
);
