/**
 * The option names of every public constructor, in one place, so that a misspelt option
 * (`maxBodyByte`) is refused at construction with the nearest name (`checkOptionNames`
 * in options.ts, re-exported here so a constructor imports one module) instead of being
 * ignored.
 *
 * Adding an option: add its name to the list of its options type below. Each list is
 * checked against its TypeScript interface (`satisfies Names<…>`), so `npm run
 * typecheck` fails until a name added to an interface is added here, and a name listed
 * here must exist in the interface. A constructor whose options type combines several
 * interfaces spreads their lists.
 */
import type { ReceiverOptions } from './adapters/agnostic.js';
import type { ExpressReceiverOptions, MiddlewareOptions } from './adapters/express.js';
import type { WebReceiverOptions } from './adapters/web.js';
import type { GatewayClientOptions } from './gateway/client.js';
import type { ReconcilerOptions } from './gateway/reconciler.js';
import type { JobRunnerOptions } from './jobs/runner.js';
import type { MemoryStoreOptions } from './jobs/memory-store.js';
import type { PostgresStoreOptions, PurgeOptions } from './stores/postgres.js';
import type { RedisStoreOptions } from './stores/redis.js';
import type { ReceiverOptionsBase } from './receive/core.js';
import type { SignOptions } from './runtime/sign.js';
import type { TestKeyOptions } from './testing/keys.js';
import type { SignPayloadOptions } from './testing/sign-payload.js';
import type { GatewaySimulatorOptions } from './testing/simulator.js';
import type { VerifierOptions } from './runtime/verify/node-verifier.js';
import type { VerifyOptionsBase } from './core/verify/options.js';
import type { WebVerifierOptions } from './runtime/verify/web-verifier.js';
import type { WorkerOptions } from './runtime/verify/worker-pool.js';

export { checkOptionNames } from './base/options.js';

/** Every key of `T`, no other. */
type Names<T> = { readonly [K in keyof Required<T>]: true };

const VERIFY_BASE = {
  dialects: true,
  signatureHeader: true,
  algorithmHeader: true,
  maxBodyBytes: true,
  maxCanonicalBytes: true,
  maxAgeSeconds: true,
  maxFutureSkewSeconds: true,
  integers: true,
  maxDepth: true,
  now: true,
} as const satisfies Names<VerifyOptionsBase>;

const RECEIVER_BASE = {
  onEvent: true,
  store: true,
  runner: true,
  leaseMs: true,
  takeoverGraceMs: true,
  retainMs: true,
  retryAfterSeconds: true,
  bodyTimeoutMs: true,
  log: true,
  onError: true,
  onDelivery: true,
  meterProvider: true,
  tracerProvider: true,
  maxInFlightBytes: true,
} as const satisfies Names<ReceiverOptionsBase<unknown>>;

const WORKERS = { workerThresholdBytes: true, workerPoolSize: true } as const satisfies Names<WorkerOptions>;

/** `createVerifier` from `jobhook` (and `verifyWebhook`). */
export const VERIFIER_OPTIONS = { ...VERIFY_BASE, publicKey: true } as const satisfies Names<VerifierOptions>;
/** `createVerifier` from `jobhook/web`. */
export const WEB_VERIFIER_OPTIONS = { ...VERIFY_BASE, publicKey: true } as const satisfies Names<WebVerifierOptions>;
/** `createReceiver` from `jobhook` and from `jobhook/express`. */
export const NODE_RECEIVER_OPTIONS = { ...VERIFIER_OPTIONS, ...RECEIVER_BASE, ...WORKERS } as const satisfies Names<ReceiverOptions> & Names<ExpressReceiverOptions>;
/** `createReceiver` from `jobhook/web`. */
export const WEB_RECEIVER_OPTIONS = { ...WEB_VERIFIER_OPTIONS, ...RECEIVER_BASE, ...WORKERS } as const satisfies Names<WebReceiverOptions>;
/** `createMiddleware` from `jobhook/express`. */
export const MIDDLEWARE_OPTIONS = { ...VERIFIER_OPTIONS, ...WORKERS, errors: true, bodyTimeoutMs: true, log: true, maxInFlightBytes: true } as const satisfies Names<MiddlewareOptions>;

export const MEMORY_STORE_OPTIONS = { maxEntries: true, now: true, log: true } as const satisfies Names<MemoryStoreOptions>;
export const REDIS_STORE_OPTIONS = { client: true, url: true, keyPrefix: true, pendingKey: true, operationTimeoutMs: true, log: true, now: true } as const satisfies Names<RedisStoreOptions>;
export const POSTGRES_STORE_OPTIONS = { pool: true, connectionString: true, table: true, schema: true, operationTimeoutMs: true, transactional: true, now: true } as const satisfies Names<PostgresStoreOptions>;
/** `purgeExpired()` of the PostgreSQL store. */
export const PURGE_OPTIONS = { batchSize: true } as const satisfies Names<PurgeOptions>;

export const GATEWAY_CLIENT_OPTIONS = { baseUrl: true, token: true, store: true, timeoutMs: true, log: true, fetch: true } as const satisfies Names<GatewayClientOptions>;
export const RECONCILER_OPTIONS = {
  client: true,
  runner: true,
  store: true,
  onEvent: true,
  graceMs: true,
  intervalMs: true,
  batchSize: true,
  concurrency: true,
  leaseMs: true,
  retainMs: true,
  takeoverGraceMs: true,
  log: true,
  onError: true,
  now: true,
  meterProvider: true,
  tracerProvider: true,
} as const satisfies Names<ReconcilerOptions>;

/** `createJobRunner` from `jobhook`. */
export const JOB_RUNNER_OPTIONS = { store: true, leaseMs: true, takeoverGraceMs: true, retainMs: true, log: true, onError: true, meterProvider: true, tracerProvider: true } as const satisfies Names<JobRunnerOptions>;

/** `startGatewaySimulator` from `jobhook/testing`. */
export const SIMULATOR_OPTIONS = {
  host: true,
  port: true,
  token: true,
  privateKey: true,
  dialect: true,
  delayMs: true,
  retries: true,
  backoffMs: true,
  maxBackoffMs: true,
  attemptTimeoutMs: true,
  allowLoopbackReceivers: true,
  signatureHeader: true,
  algorithmHeader: true,
  webhookHeader: true,
  onAttempt: true,
} as const satisfies Names<GatewaySimulatorOptions>;

/** `signDelivery` from `jobhook`. */
export const SIGN_OPTIONS = { dialect: true, signatureHeader: true, algorithmHeader: true, webhookHeader: true, userAgent: true } as const satisfies Names<SignOptions>;
/** `signPayload` from `jobhook/testing`. */
export const SIGN_PAYLOAD_OPTIONS = { dialect: true, signatureHeader: true, algorithmHeader: true, webhookHeader: true } as const satisfies Names<SignPayloadOptions>;
/** `generateTestKeys` from `jobhook/testing`. */
export const TEST_KEY_OPTIONS = { bits: true } as const satisfies Names<TestKeyOptions>;

