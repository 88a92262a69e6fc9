/**
 * The Durable Object store on workerd for the tests (test/stores/runtime-stores.ts writes the
 * config): env.JOBHOOK is the namespace of JobhookIdempotencyObject, on SQLite storage on disk.
 */
import { DurableObjectIdempotencyStore, type DurableObjectNamespaceLike } from '../../../src/cloudflare.js';
import { faultReceiver, route, type MakeStore } from './store-rpc.js';

export { JobhookIdempotencyObject } from '../../../src/cloudflare.js';

interface Env {
  JOBHOOK: DurableObjectNamespaceLike;
  PUBLIC_KEY?: string;
  COLLECTOR?: { fetch(url: string, init: RequestInit): Promise<Response> };
  RECEIVER?: string;
}
interface Ctx {
  waitUntil(p: Promise<unknown>): void;
}

let receiver: ((r: Request) => Promise<Response>) | undefined;

export default {
  fetch(request: Request, env: Env, ctx: Ctx): Promise<Response> {
    const make: MakeStore = (name, o) =>
      new DurableObjectIdempotencyStore({ namespace: env.JOBHOOK, name, ...o });
    if (env.RECEIVER !== undefined && env.PUBLIC_KEY !== undefined && env.COLLECTOR !== undefined) {
      const collector = env.COLLECTOR;
      const setup = JSON.parse(env.RECEIVER) as { leaseMs: number; takeoverGraceMs: number; workMs: number };
      receiver ??= faultReceiver(make('faults', {}), {
        publicKey: env.PUBLIC_KEY,
        ...setup,
        tell: (kind, line) =>
          collector
            .fetch(`http://collector/${kind}`, { method: 'POST', body: JSON.stringify(line) })
            .then((r) => r.text()),
        keep: (p) => ctx.waitUntil(p),
      });
    }
    return route(make, request, receiver);
  },
};
