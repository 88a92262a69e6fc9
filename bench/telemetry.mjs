// Issue 20: throughput of a receiver with telemetry on against off (goal: on ≥ 0.95× off).
// The agnostic receiver with the memory store processes genuine ~1.4 KB deliveries (each
// a new job: claim, handler, completion), in interleaved rounds in one process: every
// round, every contender gets a fresh receiver and the same 400 deliveries, sequentially.
//   off:        meterProvider: false, tracerProvider: false
//   default:    nothing given: the global providers of @opentelemetry/api (installed, no SDK registered: no-op)
//   metrics:    the real SDK MeterProvider (a reader that is never collected)
//   metrics+traces: and the real SDK BasicTracerProvider (BatchSpanProcessor, an exporter that drops),
//               with the AsyncLocalStorage context manager registered, as NodeSDK does
//   metrics+traces, 10 % sampled: the same with ParentBased(TraceIdRatioBased(0.1)): 9 deliveries in 10 sampled out
//   onDelivery: only the hook
//   SDK floor: off, with onEvent making the OpenTelemetry calls a delivery makes (metrics and
//               traces) itself, straight on the same SDK (bench/telemetry-sdk-calls.mjs): its
//               cost over off is what the SDK takes whoever calls it; metrics+traces minus it, jobhook's own
//   node bench/telemetry.mjs   (after npm run build)
//   BASELINE=/path/to/other/dist/index.js node bench/telemetry.mjs: also off, default, metrics and
//   metrics+traces of that build (e.g. the previous commit's, built elsewhere), "@ baseline", in the same rounds
import { readFileSync } from 'node:fs';
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';
import { createReceiver, signDelivery } from '../dist/index.js';
import { ocrBody } from './bodies.mjs';
import { load, machine, median, spread, table } from './harness.mjs';
import { sdkCalls } from './telemetry-sdk-calls.mjs';

const keys = new URL('../fixtures/keys/', import.meta.url);
const publicKey = readFileSync(new URL('test-2048-public.pem', keys), 'utf8');
const privateKey = readFileSync(new URL('test-2048-private.pem', keys), 'utf8'); // TEST-ONLY key

const PER_ROUND = 400;
const ROUNDS = Number(process.env.ROUNDS ?? 15);
const WARMUP = 2;

class Reader extends MetricReader {
  async onForceFlush() {}
  async onShutdown() {}
}
const dropping = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {} };

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const meterProvider = new MeterProvider({ readers: [new Reader()] });
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropping)] });
// One delivery in ten traced (the rest sampled out at the root, as a production sampler would).
const sampledProvider = new BasicTracerProvider({
  sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(0.1) }),
  spanProcessors: [new BatchSpanProcessor(dropping)],
});

console.log(`bench/telemetry: ${machine()}; load ${load()}; signing ${PER_ROUND} deliveries…`);
const base = ocrBody(1400);
const finished = new Date(Date.now() - 5_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
const deliveries = Array.from({ length: PER_ROUND }, (_, k) => {
  const body = base
    .replace(/"job_id":"[^"]*"/, `"job_id":"bench-${k}"`)
    .replace(/"finished_at":"[^"]*"/, `"finished_at":"${finished}"`);
  const { headers } = signDelivery(body, privateKey);
  return {
    body: new TextEncoder().encode(body),
    headers: Object.fromEntries(Object.entries(headers).map(([h, v]) => [h.toLowerCase(), v])),
  };
});

let heard = 0;
const sdkDelivery = sdkCalls(meterProvider, tracerProvider);
const contenders = {
  off: { meterProvider: false, tracerProvider: false },
  'default (global no-op providers)': {},
  metrics: { meterProvider, tracerProvider: false },
  'metrics+traces': { meterProvider, tracerProvider },
  'metrics+traces, 10 % sampled': { meterProvider, tracerProvider: sampledProvider },
  'onDelivery only': { meterProvider: false, tracerProvider: false, onDelivery: () => void heard++ },
  'SDK floor (off + the same SDK calls in onEvent)': {
    meterProvider: false,
    tracerProvider: false,
    onEvent: () => sdkDelivery(true, true),
  },
};
const makers = Object.fromEntries(Object.keys(contenders).map((n) => [n, createReceiver]));
if (process.env.BASELINE) {
  const baseline = (await import(new URL(process.env.BASELINE, `file://${process.cwd()}/`).href))
    .createReceiver;
  for (const n of [
    'off',
    'default (global no-op providers)',
    'metrics',
    'metrics+traces',
    'metrics+traces, 10 % sampled',
  ]) {
    contenders[`${n} @ baseline`] = contenders[n];
    makers[`${n} @ baseline`] = baseline;
  }
}

// Wall time per delivery, and the process's CPU time per delivery (process.cpuUsage: all
// threads, so the BatchSpanProcessor's exports count too): on a loaded machine the wall
// time also counts the time other processes held the cores, the CPU time far less.
const times = Object.fromEntries(Object.keys(contenders).map((n) => [n, []]));
const cpu = Object.fromEntries(Object.keys(contenders).map((n) => [n, []]));
for (let r = 0; r < WARMUP + ROUNDS; r++) {
  for (const [name, options] of Object.entries(contenders)) {
    const receive = makers[name]({ publicKey, log: {}, onEvent: () => undefined, ...options });
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (const d of deliveries) {
      const answer = await receive(d);
      if (answer.status !== 200) throw new Error(`${name}: ${answer.status} ${answer.body}`);
    }
    const ms = (performance.now() - t0) / PER_ROUND;
    const c = process.cpuUsage(c0);
    if (r >= WARMUP) {
      times[name].push(ms);
      cpu[name].push((c.user + c.system) / 1000 / PER_ROUND);
    }
  }
}
if (heard === 0) throw new Error('onDelivery was not called');

const rows = Object.entries(times).map(([name, t]) => {
  const ratios = t.map((x, i) => times.off[i] / x);
  const cpuRatios = cpu[name].map((x, i) => cpu.off[i] / x);
  return {
    contender: name,
    'median µs/delivery': (median(t) * 1000).toFixed(1),
    'spread µs': spread(
      t.map((x) => x * 1000),
      1,
    ),
    'throughput × off': name === 'off' ? '1.00' : `${median(ratios).toFixed(3)} (${spread(ratios, 3)})`,
    'CPU µs/delivery': (median(cpu[name]) * 1000).toFixed(1),
    'CPU spread µs': spread(
      cpu[name].map((x) => x * 1000),
      1,
    ),
    'CPU-time throughput × off':
      name === 'off' ? '1.00' : `${median(cpuRatios).toFixed(3)} (${spread(cpuRatios, 3)})`,
  };
});
console.log(
  `\n${ROUNDS} rounds × ${PER_ROUND} deliveries (genuine, each a new job), load after: ${load()}\n`,
);
console.log(table(rows));
const FLOOR = 'SDK floor (off + the same SDK calls in onEvent)';
for (const name of ['metrics+traces', 'metrics+traces @ baseline'].filter((n) => n in times)) {
  const own = times[name].map((x, i) => (x - times[FLOOR][i]) * 1000);
  const ownCpu = cpu[name].map((x, i) => (x - cpu[FLOOR][i]) * 1000);
  const sdk = times[FLOOR].map((x, i) => (x - times.off[i]) * 1000);
  const sdkCpu = cpu[FLOOR].map((x, i) => (x - cpu.off[i]) * 1000);
  console.log(
    `${name}: the SDK floor over off ${median(sdk).toFixed(1)} µs wall, ${median(sdkCpu).toFixed(1)} µs CPU; jobhook's own over the floor ${median(own).toFixed(1)} µs wall (${spread(own, 1)}), ${median(ownCpu).toFixed(1)} µs CPU (${spread(ownCpu, 1)}) (medians of per-round differences)`,
  );
}
await tracerProvider.shutdown();
await sampledProvider.shutdown();
await meterProvider.shutdown();
