// jobhook/web on Deno.serve, with Deno KV as the store (jobhook/deno): a job id claimed or
// completed is known to every isolate (Deno Deploy) and kept across restarts. Run, with
// jobhook in node_modules (npm install jobhook):
//   GATEWAY_PUBLIC_KEY="$(cat gateway-public.pem)" deno run --unstable-kv --allow-net --allow-env server.ts
// Deno.openKv() opens Deno Deploy's database there, elsewhere a file under DENO_DIR; KV_PATH
// names another file (then add --allow-read --allow-write).
import { createReceiver } from 'jobhook/web';
import { DenoKvIdempotencyStore } from 'jobhook/deno';

const kv = await Deno.openKv(Deno.env.get('KV_PATH'));

const receive = createReceiver({
  publicKey: Deno.env.get('GATEWAY_PUBLIC_KEY')!,
  store: new DenoKvIdempotencyStore({ kv }),
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
