/**
 * OpenTelemetry, through the providers the application gives (`meterProvider`,
 * `tracerProvider`) or the global ones of `@opentelemetry/api` when that optional peer is
 * installed. Typed structurally: jobhook's declarations name no OpenTelemetry package, and
 * nothing is loaded, recorded or paid for when there is no provider.
 *
 * Names and units follow OpenTelemetry's semantic-convention style (seconds, bytes).
 * Spans: one per delivery (`jobhook.receive`, kind server) or recovered job
 * (`jobhook.reconcile`, kind consumer), made active so the application's own spans in
 * `onEvent` are its children; children for verify, claim, handler and complete.
 */

import type { OptionNamesOf } from '../base/options.js';

/** What jobhook uses of an OpenTelemetry `Attributes`. */
export type Attributes = Record<string, string | number | boolean>;

/** What jobhook uses of an OpenTelemetry `MeterProvider` (`@opentelemetry/sdk-metrics`' is one). */
export interface MeterProviderLike {
  getMeter(name: string, version?: string): MeterLike;
}

/** What jobhook uses of an OpenTelemetry `Meter`. */
export interface MeterLike {
  createCounter(
    name: string,
    options?: { description?: string; unit?: string },
  ): { add(value: number, attributes?: Attributes): void };
  createHistogram(
    name: string,
    options?: { description?: string; unit?: string; advice?: { explicitBucketBoundaries?: number[] } },
  ): { record(value: number, attributes?: Attributes): void };
  createObservableGauge(
    name: string,
    options?: { description?: string; unit?: string },
  ): {
    addCallback(callback: (result: { observe(value: number, attributes?: Attributes): void }) => void): void;
  };
}

/** What jobhook uses of an OpenTelemetry `Span`. */
export interface SpanLike {
  setAttribute(key: string, value: string | number | boolean): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  end(): void;
  /** False for a span that records nothing (no SDK, or sampled out): jobhook then skips its bookkeeping. */
  isRecording?(): boolean;
}

/** What jobhook uses of an OpenTelemetry `Tracer`. */
export interface TracerLike {
  startSpan(name: string, options?: { kind?: number; attributes?: Attributes }): SpanLike;
  startActiveSpan<R>(
    name: string,
    options: { kind?: number; attributes?: Attributes },
    fn: (span: SpanLike) => R,
  ): R;
}

/** What jobhook uses of an OpenTelemetry `TracerProvider` (`@opentelemetry/sdk-trace-base`'s is one). */
export interface TracerProviderLike {
  getTracer(name: string, version?: string): TracerLike;
}

/** Options that turn telemetry on (the job runner's; receivers and the reconciler pass them on when they make one). */
export interface TelemetryOptions {
  /** Metrics go here (default: the global MeterProvider of `@opentelemetry/api`, when installed). `false`: none. */
  meterProvider?: MeterProviderLike | false;
  /** Spans go here (default: the global TracerProvider of `@opentelemetry/api`, when installed). `false`: none. */
  tracerProvider?: TracerProviderLike | false;
}

// Values of OpenTelemetry's SpanKind and SpanStatusCode enums (stable in the API).
const KIND = { internal: 0, server: 1, consumer: 4 } as const;
const STATUS_ERROR = 2;

interface OtelApi {
  metrics: { getMeterProvider(): MeterProviderLike };
  trace: { getTracerProvider(): TracerProviderLike };
  createNoopMeter?(): object;
  ProxyTracerProvider?: new () => { getDelegate(): unknown };
}

/** A global TracerProvider that forwards to the SDK once one is registered (the API's ProxyTracerProvider). */
interface DelegatingProvider extends TracerProviderLike {
  getDelegate(): unknown;
}

/** How often a tracer of the global provider is asked again whether an SDK is behind it. */
const SDK_CHECK_MS = 1000;

let api: OtelApi | null | undefined;

/** `@opentelemetry/api` when it can be loaded synchronously (Node, Bun, Deno), else null. Once. */
function otelApi(): OtelApi | null {
  if (api !== undefined) return api;
  api = null;
  try {
    const mod = (
      globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }
    ).process?.getBuiltinModule?.('node:module') as
      { createRequire(url: string): (id: string) => unknown } | undefined;
    if (mod !== undefined) api = mod.createRequire(import.meta.url)('@opentelemetry/api') as OtelApi;
  } catch {
    // Not installed: no telemetry unless providers are given.
  }
  return api;
}

function provider<P>(
  given: P | false | undefined,
  what: string,
  global: (a: OtelApi) => P,
): { provider: P; global?: OtelApi } | undefined {
  if (given === false) return undefined;
  if (given !== undefined) {
    if (typeof given !== 'object' || given === null)
      throw new TypeError(
        `${what} must be an OpenTelemetry ${what === 'meterProvider' ? 'MeterProvider' : 'TracerProvider'} or false`,
      );
    return { provider: given };
  }
  const a = otelApi();
  return a === null ? undefined : { provider: global(a), global: a };
}

/** The global API's meter, unless it is the no-op one (no SDK registered: then nothing is recorded, as before, at no cost). */
function globalMeter(a: OtelApi | undefined, meter: MeterLike | undefined): MeterLike | undefined {
  if (a === undefined || meter === undefined || typeof a.createNoopMeter !== 'function') return meter;
  return (meter as object).constructor === a.createNoopMeter().constructor ? undefined : meter;
}

type Counter = ReturnType<MeterLike['createCounter']>;
type Histogram = ReturnType<MeterLike['createHistogram']>;

/** Bucket boundaries for durations in seconds (OpenTelemetry's advice for HTTP server durations), and for body sizes. */
const SECONDS = {
  advice: {
    explicitBucketBoundaries: [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
  },
};
const LAG = {
  advice: { explicitBucketBoundaries: [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600, 21600, 86400] },
};
const BYTES = {
  advice: {
    explicitBucketBoundaries: [1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 33554432],
  },
};

const NAME = 'jobhook';
const VERSION = '0.1.0';

/** The instruments and tracer of one job runner, or none (every method then a no-op costing a call). */
export class Telemetry {
  readonly deliveries: Counter | undefined;
  readonly verifyDuration: Histogram | undefined;
  readonly handlerDuration: Histogram | undefined;
  readonly deliveryLag: Histogram | undefined;
  readonly storeDuration: Histogram | undefined;
  readonly bodySize: Histogram | undefined;
  readonly recovered: Counter | undefined;
  readonly superseded: Counter | undefined;
  private readonly meter: MeterLike | undefined;
  private readonly tracer: TracerLike | undefined;
  /**
   * The global provider's, when it forwards to an SDK that may be registered later: until
   * one is, the tracer is left alone (its spans would record nothing and cost a context
   * and a span object per delivery); asked again at most every SDK_CHECK_MS.
   */
  private readonly proxy: { provider: DelegatingProvider; noop: unknown } | undefined;
  private sdkCheckedAt = -Infinity;
  private sdk = false;

  constructor(options: TelemetryOptions = {}) {
    const meters = provider(options.meterProvider, 'meterProvider', (a) => a.metrics.getMeterProvider());
    const tracers = provider(options.tracerProvider, 'tracerProvider', (a) => a.trace.getTracerProvider());
    const m = globalMeter(meters?.global, meters?.provider.getMeter(NAME, VERSION));
    this.meter = m;
    this.tracer = tracers?.provider.getTracer(NAME, VERSION);
    const delegating = tracers?.provider as Partial<DelegatingProvider> | undefined;
    const Proxy = tracers?.global?.ProxyTracerProvider;
    this.proxy =
      Proxy !== undefined && typeof delegating?.getDelegate === 'function'
        ? { provider: delegating as DelegatingProvider, noop: new Proxy().getDelegate() }
        : undefined;
    this.deliveries = m?.createCounter('jobhook.deliveries', {
      description:
        'Deliveries answered, by outcome (processed, duplicate, refused, failed, busy, unavailable)',
    });
    this.verifyDuration = m?.createHistogram('jobhook.verify.duration', {
      ...SECONDS,
      unit: 's',
      description: 'Verification of a delivery: signature, canonical forms, event',
    });
    this.handlerDuration = m?.createHistogram('jobhook.handler.duration', {
      ...SECONDS,
      unit: 's',
      description: "The application's onEvent",
    });
    this.deliveryLag = m?.createHistogram('jobhook.delivery.lag', {
      ...LAG,
      unit: 's',
      description: 'Receipt minus the signed finished_at',
    });
    this.storeDuration = m?.createHistogram('jobhook.store.duration', {
      ...SECONDS,
      unit: 's',
      description: 'One idempotency store operation',
    });
    this.bodySize = m?.createHistogram('jobhook.body.size', {
      ...BYTES,
      unit: 'By',
      description: 'Body bytes of a delivery as read',
    });
    this.recovered = m?.createCounter('jobhook.reconciler.recovered', {
      description: 'Completions the reconciler found by polling and processed',
    });
    this.superseded = m?.createCounter('jobhook.jobs.superseded', {
      description:
        'Jobs that may have run twice (a takeover of a lapsed lease, a completion that found the job taken over)',
    });
  }

  /** The tracer, unless it is the global one with no SDK behind it yet. */
  private active(): TracerLike | undefined {
    const { proxy } = this;
    if (proxy === undefined) return this.tracer;
    const now = Date.now();
    if (now - this.sdkCheckedAt >= SDK_CHECK_MS) {
      this.sdkCheckedAt = now;
      this.sdk = proxy.provider.getDelegate() !== proxy.noop;
    }
    return this.sdk ? this.tracer : undefined;
  }

  /** Whether anything is recorded at all. */
  get enabled(): boolean {
    return this.meter !== undefined || this.tracer !== undefined;
  }

  /** Reports `read()` as an observable gauge. */
  gauge(name: string, description: string, read: () => number): void {
    this.meter?.createObservableGauge(name, { description }).addCallback((r) => r.observe(read()));
  }

  /**
   * Runs `fn` inside a new active root-level span for one delivery (`server`) or one
   * recovered job (`consumer`): spans made meanwhile (jobhook's phases, the application's
   * own in onEvent) are its children. `attributes`: given when the span starts (samplers see them).
   */
  within<R>(
    name: string,
    kind: 'server' | 'consumer',
    attributes: Readonly<Attributes> | undefined,
    fn: (span: SpanLike | undefined) => Promise<R>,
  ): Promise<R> {
    const tracer = this.active();
    if (tracer === undefined) return fn(undefined);
    // No async wrapper: one promise and one await fewer per delivery (each a turn through the context manager's hooks).
    return tracer.startActiveSpan(name, spanOptions(KIND[kind], attributes), (span) => {
      // A span that records nothing (no SDK registered, or sampled out) is still made active
      // (the application's spans keep its sampling decision), but ending it does nothing.
      if (span.isRecording?.() === false) return fn(span);
      let out: Promise<R>;
      try {
        out = fn(span);
      } catch (err) {
        span.end();
        return Promise.reject(err);
      }
      return out.then(
        (value) => {
          span.end();
          return value;
        },
        (err: unknown) => {
          span.end();
          throw err;
        },
      );
    });
  }

  /** A span that begins and ends now (a delivery refused on its headers): `error.type` set when given. */
  instant(
    name: string,
    kind: 'server' | 'consumer',
    attributes: Readonly<Attributes>,
    errorType?: string,
  ): void {
    const tracer = this.active();
    if (tracer === undefined) return;
    const span = tracer.startSpan(name, spanOptions(KIND[kind], attributes));
    if (errorType !== undefined) fail(span, undefined, errorType);
    span.end();
  }

  /** A child span of the active one around `fn` (not made active: onEvent stays in the delivery's context). */
  phase<R>(name: string, fn: () => R | Promise<R>, attributes?: Readonly<Attributes>): R | Promise<R> {
    const tracer = this.active();
    // Without a tracer: `fn` itself, not even a promise more.
    if (tracer === undefined) return fn();
    const span = tracer.startSpan(name, spanOptions(KIND.internal, attributes));
    // A span that records nothing (no SDK registered, or its delivery sampled out): ending it
    // now or later is the same (nothing), so `fn` itself, without a promise more.
    if (span.isRecording?.() === false) {
      span.end();
      return fn();
    }
    let out: R | Promise<R>;
    try {
      out = fn();
    } catch (err) {
      fail(span, err);
      span.end();
      throw err;
    }
    if (typeof (out as { then?: unknown } | null | undefined)?.then !== 'function') {
      span.end();
      return out;
    }
    // Ended when `fn`'s promise settles, without an async function around it (a promise and an await fewer).
    return Promise.resolve(out).then(
      (value) => {
        span.end();
        return value;
      },
      (err: unknown) => {
        fail(span, err);
        span.end();
        throw err;
      },
    );
  }
}

/** Span options, made once per kind (and per attribute set given, by identity: callers pass their own constant sets). */
const OPTIONS_BY_KIND = new Map<number, { kind: number }>();
const OPTIONS_WITH = new WeakMap<
  Readonly<Attributes>,
  Map<number, { kind: number; attributes: Attributes }>
>();
function spanOptions(
  kind: number,
  attributes: Readonly<Attributes> | undefined,
): { kind: number; attributes?: Attributes } {
  if (attributes === undefined) {
    let o = OPTIONS_BY_KIND.get(kind);
    if (o === undefined) OPTIONS_BY_KIND.set(kind, (o = Object.freeze({ kind })));
    return o;
  }
  if (!Object.isFrozen(attributes)) return { kind, attributes: attributes as Attributes };
  let byKind = OPTIONS_WITH.get(attributes);
  if (byKind === undefined) OPTIONS_WITH.set(attributes, (byKind = new Map()));
  let o = byKind.get(kind);
  if (o === undefined) byKind.set(kind, (o = Object.freeze({ kind, attributes: attributes as Attributes })));
  return o;
}

/**
 * Frozen attribute sets for metrics and spans, one per combination of up to three values
 * (absent ones undefined), made on first use and reused: no object per record. Bounded: past
 * `max` combinations, a fresh object each time.
 */
export class AttributeSets {
  private readonly sets = new Map<
    string | undefined,
    Map<string | undefined, Map<string | undefined, Readonly<Attributes>>>
  >();
  private size = 0;
  constructor(
    private readonly make: (a: string, b: string | undefined, c: string | undefined) => Attributes,
    private readonly max = 256,
  ) {}

  get(a: string, b?: string, c?: string): Readonly<Attributes> {
    const known = this.sets.get(a)?.get(b)?.get(c);
    if (known !== undefined) return known;
    const set = Object.freeze(this.make(a, b, c));
    if (this.size < this.max) {
      let byB = this.sets.get(a);
      if (byB === undefined) this.sets.set(a, (byB = new Map()));
      let byC = byB.get(b);
      if (byC === undefined) byB.set(b, (byC = new Map()));
      byC.set(c, set);
      this.size++;
    }
    return set;
  }
}

/** Marks a span failed: `error.type` and an error status (messages may hold backend details: left to the log). */
export function fail(span: SpanLike | undefined, err: unknown, type?: string): void {
  if (span === undefined) return;
  span.setAttribute(
    'error.type',
    type ??
      (typeof (err as { code?: unknown })?.code === 'string'
        ? (err as { code: string }).code
        : ((err as Error)?.name ?? 'Error')),
  );
  span.setStatus({ code: STATUS_ERROR });
}

/** Telemetry that records nothing. */
export const NO_TELEMETRY = new Telemetry({ meterProvider: false, tracerProvider: false });

/** The telemetry for `options`: none when no provider is given or can be found. */
export function createTelemetry(options: TelemetryOptions): Telemetry {
  if (options.meterProvider === false && options.tracerProvider === false) return NO_TELEMETRY;
  const t = new Telemetry(options);
  return t.enabled ? t : NO_TELEMETRY;
}

/** The names of {@link TelemetryOptions}. */
export const TELEMETRY_OPTIONS = {
  meterProvider: true,
  tracerProvider: true,
} as const satisfies OptionNamesOf<TelemetryOptions>;
