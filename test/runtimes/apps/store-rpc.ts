/**
 * The store apps' shared part (store-worker.ts on workerd, store-deno.ts on Deno): the
 * store's methods called over HTTP by the Node test process (test/stores/runtime-stores.ts),
 * a receiver on the store for the fault cases, and a loop of claims and completions for the
 * bench. Bundled with esbuild from the sources, so the store under test is the one in src/.
 */
import { createReceiver } from '../../../src/web.js';
import { MemoryIdempotencyStore, type IdempotencyStore } from '../../../src/store.js';

/** A store of the runtime's kind: `scope` keeps runs apart (object name, key prefix); `now` is the test's clock. */
export type MakeStore = (scope: string, options: { now?: () => number; shards?: number }) => IdempotencyStore;

interface Call {
  scope: string;
  method: string;
  args: unknown[];
  now?: number;
  shards?: number;
}

/** POST /call: `{ value }`, or `{ error: { name, message, code } }` (the store threw). */
async function call(make: MakeStore, body: Call): Promise<Response> {
  const store = make(body.scope, {
    ...(body.now === undefined ? {} : { now: () => body.now! }),
    ...(body.shards === undefined ? {} : { shards: body.shards }),
  });
  try {
    const method = (store as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[body.method];
    if (typeof method !== 'function') throw new TypeError(`no method ${body.method}`);
    const value = await method.apply(store, body.args);
    return Response.json({ value: value ?? null });
  } catch (err) {
    const e = err as { name?: string; message?: string; code?: string };
    return Response.json({ error: { name: e?.name, message: e?.message, code: e?.code } });
  }
}

/** GET /bench?pairs=&inflight=&store=memory|runtime: claim + complete pairs, timed inside the runtime. */
async function bench(make: MakeStore, url: URL): Promise<Response> {
  const pairs = Number(url.searchParams.get('pairs') ?? 1000);
  const inflight = Number(url.searchParams.get('inflight') ?? 1);
  const scope = `bench-${Date.now()}-${Math.random().toString(36).slice(2)}`;
  const store = url.searchParams.get('store') === 'memory' ? new MemoryIdempotencyStore() : make(scope, {});
  let next = 0;
  const t0 = performance.now();
  const lane = async () => {
    while (next < pairs) {
      const job = `${scope}-${next++}`;
      const c = await store.claim(job, { leaseMs: 30_000 });
      if (c.status !== 'acquired') throw new Error(`claim: ${c.status}`);
      await store.complete(job, c.token, { retainMs: 60_000, fence: c.fence });
    }
  };
  await Promise.all(Array.from({ length: inflight }, lane));
  // workerd's clock moves only across I/O; the pairs are I/O, so the time is real.
  return Response.json({ pairs, inflight, ms: performance.now() - t0 });
}

export interface ReceiverSetup {
  publicKey: string;
  /** Records an effect or a report in the test process (which no fault kills). */
  tell: (kind: 'effect' | 'report', line: Record<string, unknown>) => Promise<unknown>;
  /** Keeps the request alive until `p` settles (workerd's waitUntil). */
  keep?: (p: Promise<unknown>) => void;
  leaseMs: number;
  takeoverGraceMs: number;
  workMs: number;
}

/** The receiver of the fault cases: each handler tells its effect, then works `workMs`. */
export function faultReceiver(store: IdempotencyStore, s: ReceiverSetup): (r: Request) => Promise<Response> {
  const reports: Array<Promise<unknown>> = [];
  const receive = createReceiver({
    publicKey: s.publicKey,
    store,
    leaseMs: s.leaseMs,
    takeoverGraceMs: s.takeoverGraceMs,
    log: false,
    onError: (error, { jobId, stage }) => {
      const e = error as { code?: string };
      reports.push(s.tell('report', { jobId, stage, code: e?.code }).catch(() => undefined));
    },
    onEvent: async (_event, ctx) => {
      await s.tell('effect', { jobId: ctx.jobId, fence: ctx.fencingToken });
      await new Promise((r) => setTimeout(r, s.workMs));
    },
  });
  return async (request) => {
    const response = await receive(request);
    const told = Promise.all(reports.splice(0));
    if (s.keep) s.keep(told);
    else await told;
    return response;
  };
}

/** The app's routes: POST /call, GET /bench, POST /webhooks/gateway (when `receiver`), GET / (ready). */
export async function route(
  make: MakeStore,
  request: Request,
  receiver?: (r: Request) => Promise<Response>,
): Promise<Response> {
  const url = new URL(request.url);
  if (request.method === 'POST' && url.pathname === '/call')
    return call(make, (await request.json()) as Call);
  if (url.pathname === '/bench') return bench(make, url);
  if (request.method === 'POST' && url.pathname === '/webhooks/gateway' && receiver) return receiver(request);
  return new Response('ok');
}
