// jobhook/web in a Cloudflare module Worker, with a Durable Object as the store that all of
// the Worker's isolates share (jobhook/cloudflare; its binding and migration: wrangler.toml).
// The key is a secret in `env`, so the receiver is made at the first request and kept for
// the isolate's life:
//   wrangler secret put GATEWAY_PUBLIC_KEY   (paste the PEM)
// Workers compile no WebAssembly from bytes: wrangler compiles the .wasm file jobhook ships,
// so signatures are opened in WebAssembly rather than with BigInt arithmetic.
import { createReceiver, provideRsaWasmModule } from 'jobhook/web';
import { DurableObjectIdempotencyStore } from 'jobhook/cloudflare';
import rsaWasm from 'jobhook/rsa.wasm';

// The Durable Object class that keeps the claims and completions, exported by the Worker.
export { JobhookIdempotencyObject } from 'jobhook/cloudflare';

provideRsaWasmModule(rsaWasm);

let receive;

export default {
  async fetch(request, env) {
    const { pathname } = new URL(request.url);
    if (request.method !== 'POST' || pathname !== '/webhooks/gateway')
      return new Response('Not Found', { status: 404 });
    receive ??= createReceiver({
      publicKey: env.GATEWAY_PUBLIC_KEY,
      store: new DurableObjectIdempotencyStore({ namespace: env.JOBHOOK }),
      onEvent: async (event, { jobId }) => {
        // Your work, e.g. await env.RESULTS.put(jobId, JSON.stringify(event)). Throw to have the gateway retry.
        console.log(`job ${jobId}: ${event.status}`);
      },
    });
    return receive(request);
  },
};
