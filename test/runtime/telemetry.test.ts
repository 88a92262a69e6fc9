/**
 * Issue 20: OpenTelemetry metrics and traces with the real SDK (sdk-metrics with an
 * in-memory reader, sdk-trace-base with the in-memory span exporter, the async-hooks
 * context manager), on every receiver and on real Redis and PostgreSQL: a known mix of
 * deliveries gives exactly its counts; spans nest as documented, the application's own
 * span a child of the delivery's; onDelivery; health().
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { MeterProvider, MetricReader, type ResourceMetrics } from '@opentelemetry/sdk-metrics';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  InMemorySpanExporter,
  ParentBasedSampler,
  SimpleSpanProcessor,
  type ReadableSpan,
  type Sampler,
} from '@opentelemetry/sdk-trace-base';
import express from 'express';
import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  createJobRunner,
  createReceiver,
  MemoryIdempotencyStore,
  type DeliveryOutcome,
  type IdempotencyStore,
} from '../../src/index.js';
import { createReconciler } from '../../src/gateway.js';
import { createReceiver as createExpressReceiver } from '../../src/express.js';
import { createReceiver as createFetchReceiver } from '../../src/web.js';
import { PostgresIdempotencyStore } from '../../src/postgres.js';
import { RedisIdempotencyStore } from '../../src/redis.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';

const publicKey = publicPem(2048);

class TestReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

/** A meter and tracer provider with in-memory exporters, and readers of what they recorded. */
function otel() {
  const reader = new TestReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const points = async (name: string) => {
    const { resourceMetrics } = (await reader.collect()) as { resourceMetrics: ResourceMetrics };
    const metric = resourceMetrics.scopeMetrics
      .flatMap((s) => s.metrics)
      .find((m) => m.descriptor.name === name);
    return (metric?.dataPoints ?? []) as Array<{ attributes: Record<string, unknown>; value: unknown }>;
  };
  /** Sum of a counter's points whose attributes include `match`. */
  const count = async (name: string, match: Record<string, unknown> = {}) =>
    (await points(name))
      .filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v))
      .reduce((n, p) => n + (p.value as number), 0);
  /** Number of values a histogram recorded whose attributes include `match`. */
  const recorded = async (name: string, match: Record<string, unknown> = {}) =>
    (await points(name))
      .filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v))
      .reduce((n, p) => n + (p.value as { count: number }).count, 0);
  return { meterProvider, tracerProvider, exporter, count, recorded, points };
}

const contextManager = new AsyncLocalStorageContextManager();
beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
});
afterAll(() => {
  context.disable();
});

/** A receiver under test: post a delivery, get the status. */
type Post = (d: { body: string; headers: Record<string, string> }) => Promise<number>;
type Make = (options: Parameters<typeof createReceiver>[0]) => Post;

const adapters: Array<[string, Make]> = [
  [
    'agnostic',
    (o) => {
      const receive = createReceiver(o);
      return async (d) => (await receive(d)).status;
    },
  ],
  [
    'express',
    (o) => {
      const app = express();
      app.post('/hook', createExpressReceiver(o as Parameters<typeof createExpressReceiver>[0]));
      const agent = supertest(app);
      return async (d) => (await agent.post('/hook').set(d.headers).send(d.body)).status;
    },
  ],
  [
    'fetch',
    (o) => {
      const receive = createFetchReceiver(o as unknown as Parameters<typeof createFetchReceiver>[0]);
      return async (d) =>
        (
          await receive(
            new Request('http://localhost/hook', { method: 'POST', headers: d.headers, body: d.body }),
          )
        ).status;
    },
  ],
];

const ADAPTER_NAME: Record<string, string> = { agnostic: 'agnostic', express: 'express', fetch: 'fetch' };

/** A delivery with a signature of the right length that no key opens. */
function forged() {
  const d = signed(jobId('forged'));
  const headers = Object.fromEntries(
    Object.entries(d.headers).map(([k, v]) => [
      k,
      k.toLowerCase() === 'x-service-signature' ? 'ab'.repeat(256) : v,
    ]),
  );
  return { body: d.body, headers };
}

/** N genuine, M duplicates, K forged, one throwing handler (then its retry). */
async function mix(post: Post, throwing: string) {
  const N = 5;
  const M = 3;
  const K = 4;
  const ids = Array.from({ length: N }, () => jobId('otel'));
  for (const id of ids) expect(await post(signed(id))).toBe(200);
  // Duplicates by job id under new signatures (the same signature again is answered before its body is read: replay.test.ts).
  for (const id of ids.slice(0, M)) expect(await post(signed(id, ',"attempt":2'))).toBe(200);
  for (let k = 0; k < K; k++) expect(await post(forged())).toBe(401);
  expect(await post(signed(throwing))).toBe(500);
  return { N, M, K };
}

for (const [name, make] of adapters) {
  describe(`telemetry on the ${name} receiver`, () => {
    it('a known mix gives exactly its counts: deliveries by outcome, code, dialect and adapter; durations; body sizes', async () => {
      const t = otel();
      const throwing = jobId('throws');
      const heard: DeliveryOutcome[] = [];
      const post = make({
        publicKey,
        log: {},
        meterProvider: t.meterProvider,
        tracerProvider: t.tracerProvider,
        onEvent: (event) => {
          if (event.job_id === throwing) throw new Error('db down');
        },
        onDelivery: (o) => void heard.push(o),
      });
      const { N, M, K } = await mix(post, throwing);
      const adapter = ADAPTER_NAME[name];
      expect(await t.count('jobhook.deliveries', { outcome: 'processed', adapter, dialect: 'orjson' })).toBe(
        N,
      );
      expect(await t.count('jobhook.deliveries', { outcome: 'duplicate', adapter })).toBe(M);
      expect(
        await t.count('jobhook.deliveries', { outcome: 'refused', code: 'SIGNATURE_INVALID', adapter }),
      ).toBe(K);
      expect(
        await t.count('jobhook.deliveries', { outcome: 'failed', code: 'HANDLER_FAILED', adapter }),
      ).toBe(1);
      expect(await t.count('jobhook.deliveries')).toBe(N + M + K + 1);
      // Verified (and timed) are the deliveries whose body was read: all but the forged ones.
      expect(await t.recorded('jobhook.verify.duration')).toBe(N + M + 1);
      expect(await t.recorded('jobhook.body.size')).toBe(N + M + 1);
      expect(await t.recorded('jobhook.delivery.lag')).toBe(N + M + 1);
      // The handler ran N + 1 times (the throwing one too); the store: claims for all, completions for N.
      expect(await t.recorded('jobhook.handler.duration')).toBe(N + 1);
      expect(
        await t.recorded('jobhook.store.duration', { op: 'claim', store: 'memory', result: 'acquired' }),
      ).toBe(N + 1);
      expect(
        await t.recorded('jobhook.store.duration', { op: 'claim', store: 'memory', result: 'completed' }),
      ).toBe(M);
      expect(
        await t.recorded('jobhook.store.duration', { op: 'complete', store: 'memory', result: 'completed' }),
      ).toBe(N);
      expect(await t.recorded('jobhook.store.duration', { op: 'release', result: 'released' })).toBe(1);
      // onDelivery: once per request, with what happened.
      expect(heard).toHaveLength(N + M + K + 1);
      expect(
        heard.filter(
          (h) =>
            h.outcome === 'processed' &&
            h.status === 200 &&
            h.dialect === 'orjson' &&
            h.jobId !== undefined &&
            h.bodyBytes > 200,
        ),
      ).toHaveLength(N);
      expect(
        heard.filter(
          (h) =>
            h.outcome === 'refused' &&
            h.status === 401 &&
            h.code === 'SIGNATURE_INVALID' &&
            h.bodyBytes === 0,
        ),
      ).toHaveLength(K);
      expect(heard.find((h) => h.outcome === 'failed')).toMatchObject({
        status: 500,
        code: 'HANDLER_FAILED',
        jobId: throwing,
      });
      expect(heard.every((h) => h.durationMs >= 0 && Number.isFinite(h.durationMs))).toBe(true);
    });

    it("spans: jobhook.receive (server) with verify, claim, handler and complete children; the application's span is a child of the delivery span", async () => {
      const t = otel();
      const id = jobId('spans');
      const post = make({
        publicKey,
        log: {},
        meterProvider: false,
        tracerProvider: t.tracerProvider,
        onEvent: async () => {
          const span = t.tracerProvider.getTracer('app').startSpan('app.save');
          await new Promise((r) => setTimeout(r, 2));
          span.end();
        },
      });
      expect(await post(signed(id))).toBe(200);
      const spans = t.exporter.getFinishedSpans();
      const receive = spans.find((s) => s.name === 'jobhook.receive')!;
      expect(receive).toBeDefined();
      expect(receive.kind).toBe(1); // SpanKind.SERVER
      expect(receive.attributes).toMatchObject({
        'jobhook.job_id': id,
        'jobhook.dialect': 'orjson',
        'jobhook.adapter': ADAPTER_NAME[name],
      });
      const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;
      const id0 = receive.spanContext().spanId;
      for (const child of ['jobhook.verify', 'jobhook.claim', 'jobhook.handler', 'jobhook.complete']) {
        const span = spans.find((s) => s.name === child);
        expect(span, child).toBeDefined();
        expect(parentOf(span!), child).toBe(id0);
        expect(span!.spanContext().traceId).toBe(receive.spanContext().traceId);
      }
      expect(parentOf(spans.find((s) => s.name === 'app.save')!)).toBe(id0);
      // A forged delivery: one span, refused, with error.type.
      t.exporter.reset();
      expect(await post(forged())).toBe(401);
      const refused = t.exporter.getFinishedSpans();
      expect(refused.map((s) => s.name)).toEqual(['jobhook.receive']);
      expect(refused[0]!.attributes['error.type']).toBe('SIGNATURE_INVALID');
      expect(refused[0]!.status.code).toBe(2);
    });
  });
}

describe('telemetry of the job runner', () => {
  it('a job that may have run twice is counted (jobhook.jobs.superseded); the repair queue is a gauge', async () => {
    const t = otel();
    const store = new MemoryIdempotencyStore();
    let down = false;
    const link: IdempotencyStore = {
      claim: (id, o) => store.claim(id, o),
      renew: (id, tk, o) => store.renew(id, tk, o),
      complete: async (id, tk, o) => {
        if (down) throw new Error('no reply');
        return store.complete(id, tk, o);
      },
      release: (id, tk) => store.release(id, tk),
    };
    const runner = createJobRunner({
      store: link,
      leaseMs: 100,
      takeoverGraceMs: 0,
      log: {},
      meterProvider: t.meterProvider,
    });
    const id = jobId('taken');
    const crashed = await store.claim(id, { leaseMs: 30 });
    expect(crashed.status).toBe('acquired');
    await new Promise((r) => setTimeout(r, 50));
    down = true;
    expect(await runner.run(id, () => undefined)).toEqual({ kind: 'processed' });
    expect(await t.count('jobhook.jobs.superseded')).toBe(1);
    const gauge = await t.points('jobhook.repair.queue');
    expect(gauge.map((p) => p.value)).toEqual([1]);
    down = false;
    await runner.close(2000);
    expect((await t.points('jobhook.repair.queue')).map((p) => p.value)).toEqual([0]);
  });

  it('without given providers it takes the global ones of @opentelemetry/api (installed here); false turns them off', async () => {
    const runner = createJobRunner({ log: {} });
    expect(runner.options.telemetry.enabled).toBe(true);
    const off = createJobRunner({ log: {}, meterProvider: false, tracerProvider: false });
    expect(off.options.telemetry.enabled).toBe(false);
    expect(await off.run(jobId('off'), () => undefined)).toEqual({ kind: 'processed' });
    expect(() => createJobRunner({ meterProvider: 'yes' as never })).toThrow(TypeError);
  });

  it("the reconciler: a recovered job is counted and gets its own span (consumer), the application's span inside it", async () => {
    const t = otel();
    const store = new MemoryIdempotencyStore();
    const id = jobId('recovered');
    await store.trackPending(id, { since: 0 });
    const job = {
      public_id: id,
      status: 'success',
      feature: 'ocr',
      subfeature: 'ocr',
      provider: 'acme',
      model: null,
      created_at: '2026-11-21T10:00:00Z',
      output: { text: 'x' },
      cost: '0.01',
    };
    const reconciler = createReconciler({
      client: { getJob: async () => job as never },
      store,
      graceMs: 0,
      log: {},
      meterProvider: t.meterProvider,
      tracerProvider: t.tracerProvider,
      onEvent: () => void t.tracerProvider.getTracer('app').startSpan('app.recover').end(),
    });
    expect((await reconciler.runOnce()).processed).toBe(1);
    expect(await t.count('jobhook.reconciler.recovered')).toBe(1);
    const spans = t.exporter.getFinishedSpans();
    const root = spans.find((s) => s.name === 'jobhook.reconcile')!;
    expect(root.kind).toBe(4); // SpanKind.CONSUMER
    expect(root.attributes['jobhook.job_id']).toBe(id);
    expect(spans.find((s) => s.name === 'app.recover')!.parentSpanContext?.spanId).toBe(
      root.spanContext().spanId,
    );
    expect(spans.find((s) => s.name === 'jobhook.handler')!.parentSpanContext?.spanId).toBe(
      root.spanContext().spanId,
    );
    await reconciler.stop();
  });
});

describe('traces sampled out', () => {
  /** Deliveries sampled out at their root (ParentBased, root AlwaysOff); the application's tracer samples everything it starts at a root. */
  function sampledOut() {
    const exporter = new InMemorySpanExporter();
    const sampler: Sampler = new ParentBasedSampler({ root: new AlwaysOffSampler() });
    const tracerProvider = new BasicTracerProvider({
      sampler,
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    });
    const appProvider = new BasicTracerProvider({
      sampler: new ParentBasedSampler({ root: new AlwaysOnSampler() }),
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    });
    return { exporter, tracerProvider, appProvider };
  }

  it("records no span, yet the delivery's (non-recording) span is active in onEvent: the application's spans keep its decision", async () => {
    const t = sampledOut();
    const seen: Array<{
      active: string | undefined;
      app: string;
      recording: boolean;
      activeRecording: boolean | undefined;
    }> = [];
    const receive = createReceiver({
      publicKey,
      log: {},
      meterProvider: false,
      tracerProvider: t.tracerProvider,
      onEvent: async () => {
        const active = trace.getActiveSpan();
        const span = t.appProvider.getTracer('app').startSpan('app.save');
        await new Promise((r) => setTimeout(r, 1));
        span.end();
        seen.push({
          active: active?.spanContext().traceId,
          app: span.spanContext().traceId,
          recording: span.isRecording(),
          activeRecording: active?.isRecording(),
        });
      },
    });
    expect((await receive(signed(jobId('sampled-out')))).status).toBe(200);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.active).toBeDefined();
    expect(seen[0]!.activeRecording).toBe(false);
    // A child of the sampled-out delivery span (same trace, not sampled), not a new root sampled on its own.
    expect(seen[0]!.app).toBe(seen[0]!.active);
    expect(seen[0]!.recording).toBe(false);
    expect(t.exporter.getFinishedSpans()).toEqual([]);
  });

  it('a throwing handler and a forged delivery are answered as when recorded', async () => {
    const t = sampledOut();
    const throwing = jobId('sampled-out-throws');
    const receive = createReceiver({
      publicKey,
      log: {},
      meterProvider: false,
      tracerProvider: t.tracerProvider,
      onEvent: (event) => {
        if (event.job_id === throwing) throw new Error('handler failed');
      },
    });
    expect((await receive(signed(throwing))).status).toBe(500);
    expect((await receive(forged())).status).toBe(401);
    expect((await receive(signed(jobId('sampled-out-ok')))).status).toBe(200);
    expect(t.exporter.getFinishedSpans()).toEqual([]);
  });
});

describe('onDelivery and health()', () => {
  it('a throwing onDelivery is ignored (logged), the answer unchanged', async () => {
    const errors: string[] = [];
    const receive = createReceiver({
      publicKey,
      log: { error: (m: string) => void errors.push(m) },
      onEvent: () => undefined,
      onDelivery: () => {
        throw new Error('metrics down');
      },
    });
    expect((await receive(signed(jobId('hook')))).status).toBe(200);
    expect(errors.some((e) => e.includes('onDelivery threw'))).toBe(true);
    expect(() => createReceiver({ publicKey, onEvent: () => undefined, onDelivery: 'no' as never })).toThrow(
      TypeError,
    );
  });

  it('health(): the memory store answers; the workers and the repair queue are reported', async () => {
    const receive = createReceiver({ publicKey, log: {}, onEvent: () => undefined });
    const health = await receive.health();
    expect(health).toMatchObject({
      ok: true,
      store: { ok: true },
      repairQueue: 0,
      workers: { busy: 0, queued: 0 },
    });
    expect(health.store.latencyMs).toBeGreaterThanOrEqual(0);
  });
});

describe.skipIf(inject('redisUrl') === '' || inject('databaseUrl') === '')(
  'telemetry on real Redis and PostgreSQL',
  () => {
    const stores: Array<{ close(): Promise<void> }> = [];
    afterAll(async () => {
      await Promise.all(stores.map((s) => s.close()));
    });
    const cases: Array<[string, () => Promise<IdempotencyStore & { close(): Promise<void> }>]> = [
      [
        'redis',
        async () =>
          new RedisIdempotencyStore({
            url: inject('redisUrl'),
            keyPrefix: `otel:${process.pid}:`,
            pendingKey: `otel-pending:${process.pid}`,
            log: {},
          }),
      ],
      [
        'postgres',
        async () => {
          const s = new PostgresIdempotencyStore({
            connectionString: inject('databaseUrl'),
            table: `jobhook_otel_${process.pid}`,
          });
          await s.migrate();
          return s;
        },
      ],
    ];
    for (const [name, make] of cases) {
      it(`${name}: the mix's counts, store operations timed with store=${name}; health() answers, and says not ok when the store does not`, async () => {
        const store = await make();
        stores.push(store);
        const t = otel();
        const throwing = jobId('throws');
        const receive = createReceiver({
          publicKey,
          store,
          log: {},
          meterProvider: t.meterProvider,
          onEvent: (event) => {
            if (event.job_id === throwing) throw new Error('db down');
          },
        });
        const { N, M, K } = await mix(async (d) => (await receive(d)).status, throwing);
        expect(await t.count('jobhook.deliveries', { outcome: 'processed' })).toBe(N);
        expect(await t.count('jobhook.deliveries', { outcome: 'duplicate' })).toBe(M);
        expect(await t.count('jobhook.deliveries', { outcome: 'refused' })).toBe(K);
        expect(await t.count('jobhook.deliveries', { outcome: 'failed' })).toBe(1);
        expect(
          await t.recorded('jobhook.store.duration', { op: 'claim', store: name, result: 'acquired' }),
        ).toBe(N + 1);
        expect(
          await t.recorded('jobhook.store.duration', { op: 'complete', store: name, result: 'completed' }),
        ).toBe(N);
        expect(await receive.health()).toMatchObject({ ok: true, store: { ok: true } });
        await store.close();
        const down = await receive.health(500);
        expect(down.ok).toBe(false);
        expect(down.store.ok).toBe(false);
      });
    }
  },
);
