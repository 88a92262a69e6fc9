/**
 * The Deno KV store on Deno for the tests (test/stores/runtime-stores.ts starts it):
 * KV_PATH is the database file, PORT the port (0: any; the URL is printed), RECEIVER and
 * COLLECTOR_URL the fault cases' receiver.
 */
import { DenoKvIdempotencyStore } from '../../../src/deno.js';
import { faultReceiver, route, type MakeStore } from './store-rpc.js';

declare const Deno: {
  openKv(path?: string): Promise<import('../../../src/deno.js').DenoKvLike>;
  env: { get(name: string): string | undefined };
  serve(
    o: { port: number; hostname: string; onListen: (a: { hostname: string; port: number }) => void },
    h: (r: Request) => Promise<Response>,
  ): unknown;
};

const env = (name: string) => Deno.env.get(name);
const kv = await Deno.openKv(env('KV_PATH'));
const make: MakeStore = (scope, o) =>
  new DenoKvIdempotencyStore({ kv, prefix: [scope], ...(o.now === undefined ? {} : { now: o.now }) });
const setup = env('RECEIVER');
const collector = env('COLLECTOR_URL');
const receiver =
  setup === undefined || collector === undefined
    ? undefined
    : faultReceiver(make('faults', {}), {
        publicKey: env('PUBLIC_KEY')!,
        ...(JSON.parse(setup) as { leaseMs: number; takeoverGraceMs: number; workMs: number }),
        tell: (kind, line) =>
          fetch(`${collector}/${kind}`, { method: 'POST', body: JSON.stringify(line) }).then((r) => r.text()),
      });

Deno.serve(
  {
    port: Number(env('PORT') ?? 0),
    hostname: '127.0.0.1',
    onListen: ({ hostname, port }) => console.log(`listening on http://${hostname}:${port}/`),
  },
  (request) => route(make, request, receiver),
);
