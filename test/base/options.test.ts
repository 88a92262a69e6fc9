/**
 * Unknown option names are refused at construction, naming the nearest known one, by
 * every public constructor; every name the lists know is accepted.
 */
import { afterAll, describe, expect, it } from 'vitest';
import * as root from '../../src/index.js';
import * as gatewayEntry from '../../src/gateway.js';
import * as expressEntry from '../../src/express.js';
import * as web from '../../src/web.js';
import * as testing from '../../src/testing.js';
import { PostgresIdempotencyStore } from '../../src/postgres.js';
import { RedisIdempotencyStore } from '../../src/redis.js';
import { checkOptionNames, nearestName } from '../../src/lib/base/options.js';
import { VERIFIER_OPTIONS } from '../../src/lib/runtime/verify/node-verifier.js';
import { WEB_VERIFIER_OPTIONS } from '../../src/lib/runtime/verify/web-verifier.js';
import { SIGN_OPTIONS } from '../../src/lib/runtime/sign.js';
import { AGNOSTIC_RECEIVER_OPTIONS } from '../../src/lib/adapters/agnostic.js';
import { EXPRESS_RECEIVER_OPTIONS } from '../../src/lib/adapters/express.js';
import { MIDDLEWARE_OPTIONS } from '../../src/lib/adapters/middleware.js';
import { WEB_RECEIVER_OPTIONS } from '../../src/lib/adapters/web.js';
import { MEMORY_STORE_OPTIONS } from '../../src/lib/jobs/memory-store.js';
import { JOB_RUNNER_OPTIONS } from '../../src/lib/jobs/runner.js';
import { REDIS_STORE_OPTIONS } from '../../src/lib/stores/redis.js';
import { POSTGRES_STORE_OPTIONS } from '../../src/lib/stores/postgres.js';
import { DurableObjectIdempotencyStore } from '../../src/cloudflare.js';
import { DenoKvIdempotencyStore } from '../../src/deno.js';
import { DURABLE_OBJECT_STORE_OPTIONS } from '../../src/lib/stores/durable-object-store.js';
import { DENO_KV_STORE_OPTIONS } from '../../src/lib/stores/deno-kv.js';
import { SQLITE_STORE_OPTIONS } from '../../src/lib/stores/sqlite.js';
import { SqliteIdempotencyStore } from '../../src/sqlite.js';
import { sqliteDir, sqliteMissing } from '../helpers/sqlite.js';
import { GATEWAY_CLIENT_OPTIONS } from '../../src/lib/gateway/client.js';
import { RECONCILER_OPTIONS } from '../../src/lib/gateway/reconciler.js';
import { SIMULATOR_OPTIONS } from '../../src/tools/simulator/simulator.js';
import { SIGN_PAYLOAD_OPTIONS } from '../../src/tools/deliveries/sign-payload.js';
import { TEST_KEY_OPTIONS } from '../../src/tools/deliveries/keys.js';
import { privatePem, publicPem } from '../helpers/keys.js';

const publicKey = publicPem(2048);
const privateKey = privatePem(2048);
const onEvent = () => undefined;
const closers: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  await Promise.all(closers.map((c) => c()));
});

interface Case {
  /** Builds with these options (a rejection or a throw both count). */
  make: (options: Record<string, unknown>) => unknown;
  /** Options it accepts. */
  valid: Record<string, unknown>;
  /** The list its options are checked against. */
  names: Readonly<Record<string, true>>;
  /** A misspelling and the name it should suggest. */
  typo: [string, string];
}

const gateway = () => gatewayEntry.createGatewayClient({ baseUrl: 'http://127.0.0.1:1', token: 't' });
const delivery = root.signDelivery('{"job_id":"x"}', privateKey);

const CASES: Record<string, Case> = {
  "createVerifier ('jobhook')": {
    make: (o) => root.createVerifier(o as never),
    valid: { publicKey },
    names: VERIFIER_OPTIONS,
    typo: ['maxBodyByte', 'maxBodyBytes'],
  },
  verifyWebhook: {
    make: (o) => {
      try {
        return root.verifyWebhook(delivery.body, delivery.headers, o as never);
      } catch (err) {
        if (root.isWebhookError(err)) return undefined; // constructed; the delivery itself is refused
        throw err;
      }
    },
    valid: { publicKey },
    names: VERIFIER_OPTIONS,
    typo: ['publickey', 'publicKey'],
  },
  "createVerifier ('jobhook/web')": {
    make: (o) => web.createVerifier(o as never),
    valid: { publicKey },
    names: WEB_VERIFIER_OPTIONS,
    typo: ['dialect', 'dialects'],
  },
  "createReceiver ('jobhook')": {
    make: (o) => root.createReceiver(o as never),
    valid: { publicKey, onEvent, log: {} },
    names: AGNOSTIC_RECEIVER_OPTIONS,
    typo: ['maxBodyByte', 'maxBodyBytes'],
  },
  "createReceiver ('jobhook/express')": {
    make: (o) => expressEntry.createReceiver(o as never),
    valid: { publicKey, onEvent, log: {} },
    names: EXPRESS_RECEIVER_OPTIONS,
    typo: ['onevent', 'onEvent'],
  },
  "createReceiver ('jobhook/web')": {
    make: (o) => web.createReceiver(o as never),
    valid: { publicKey, onEvent, log: {} },
    names: WEB_RECEIVER_OPTIONS,
    typo: ['retainMS', 'retainMs'],
  },
  createMiddleware: {
    make: (o) => expressEntry.createMiddleware(o as never),
    valid: { publicKey, errors: 'next' },
    names: MIDDLEWARE_OPTIONS,
    typo: ['error', 'errors'],
  },
  createJobRunner: {
    make: (o) => root.createJobRunner(o as never),
    valid: { leaseMs: 5_000, log: {} },
    names: JOB_RUNNER_OPTIONS,
    typo: ['retain', 'retainMs'],
  },
  MemoryIdempotencyStore: {
    make: (o) => new root.MemoryIdempotencyStore(o as never),
    valid: { maxEntries: 10 },
    names: MEMORY_STORE_OPTIONS,
    typo: ['maxEntry', 'maxEntries'],
  },
  RedisIdempotencyStore: {
    make: (o) => {
      const store = new RedisIdempotencyStore(o as never);
      closers.push(() => store.close());
      return store;
    },
    valid: { url: 'redis://127.0.0.1:1', log: {} },
    names: REDIS_STORE_OPTIONS,
    typo: ['keyprefix', 'keyPrefix'],
  },
  PostgresIdempotencyStore: {
    make: (o) => {
      const store = new PostgresIdempotencyStore(o as never);
      closers.push(() => store.close());
      return store;
    },
    valid: { connectionString: 'postgres://127.0.0.1:1/none' },
    names: POSTGRES_STORE_OPTIONS,
    typo: ['tabel', 'table'],
  },
  // Construction only (nothing is sent): the binding's and the database's shapes.
  DurableObjectIdempotencyStore: {
    make: (o) => new DurableObjectIdempotencyStore(o as never),
    valid: { namespace: { idFromName: (name: string) => name, get: () => undefined } },
    names: DURABLE_OBJECT_STORE_OPTIONS,
    typo: ['shard', 'shards'],
  },
  DenoKvIdempotencyStore: {
    make: (o) => new DenoKvIdempotencyStore(o as never),
    valid: { kv: { atomic: () => undefined, getMany: () => undefined, list: () => undefined } },
    names: DENO_KV_STORE_OPTIONS,
    typo: ['prefixes', 'prefix'],
  },
  // Node 20 has no node:sqlite: the store cannot be made there (test/stores/sqlite.test.ts says so).
  ...(sqliteMissing === undefined
    ? {
        SqliteIdempotencyStore: {
          make: (o: Record<string, unknown>) => {
            const store = new SqliteIdempotencyStore(o as never);
            closers.push(() => store.close());
            return store;
          },
          valid: { path: `${sqliteDir('options')}/options.db`, log: false },
          names: SQLITE_STORE_OPTIONS,
          typo: ['busyTimeout', 'busyTimeoutMs'] as [string, string],
        },
      }
    : {}),
  createGatewayClient: {
    make: (o) => gatewayEntry.createGatewayClient(o as never),
    valid: { baseUrl: 'http://127.0.0.1:1', token: 't' },
    names: GATEWAY_CLIENT_OPTIONS,
    typo: ['baseURL', 'baseUrl'],
  },
  createReconciler: {
    make: (o) => gatewayEntry.createReconciler(o as never),
    valid: { client: gateway(), store: new root.MemoryIdempotencyStore(), onEvent },
    names: RECONCILER_OPTIONS,
    typo: ['interval', 'intervalMs'],
  },
  startGatewaySimulator: {
    make: async (o) => {
      const sim = await testing.startGatewaySimulator(o as never);
      closers.push(() => sim.close());
      return sim;
    },
    valid: { privateKey, delayMs: 10 },
    names: SIMULATOR_OPTIONS,
    typo: ['allowLoopbackReceiver', 'allowLoopbackReceivers'],
  },
  signDelivery: {
    make: (o) => root.signDelivery('{}', privateKey, o as never),
    valid: { dialect: 'python' },
    names: SIGN_OPTIONS,
    typo: ['user_agent', 'userAgent'],
  },
  signPayload: {
    make: (o) => testing.signPayload({}, privateKey, o as never),
    valid: { dialect: 'python' },
    names: SIGN_PAYLOAD_OPTIONS,
    typo: ['signatureHeaders', 'signatureHeader'],
  },
  generateTestKeys: {
    make: (o) => testing.generateTestKeys(o as never),
    valid: { bits: 2048 },
    names: TEST_KEY_OPTIONS,
    typo: ['bit', 'bits'],
  },
};

async function outcome(make: () => unknown): Promise<unknown> {
  try {
    await make();
    return undefined;
  } catch (err) {
    return err;
  }
}

describe.each(Object.entries(CASES))('%s', (_name, c) => {
  it('refuses a misspelt option, naming the nearest one, and accepts the valid options', async () => {
    const [typo, meant] = c.typo;
    const err = await outcome(() => c.make({ ...c.valid, [typo]: c.valid[meant] ?? 1 }));
    expect(err).toBeInstanceOf(TypeError);
    expect((err as Error).message).toBe(`unknown option ${typo}; did you mean ${meant}?`);
    expect(await outcome(() => c.make(c.valid))).toBeUndefined();
  });

  it('knows every name of its list (whatever else it says about the value)', async () => {
    for (const name of Object.keys(c.names)) {
      const err = await outcome(() => c.make({ ...c.valid, [name]: c.valid[name] }));
      expect(String(err), name).not.toMatch(/unknown option/);
    }
  });
});

describe('checkOptionNames and nearestName', () => {
  const known = [
    'maxBodyBytes',
    'maxCanonicalBytes',
    'publicKey',
    'leaseMs',
    'log',
    'now',
    'bodyTimeoutMs',
    'operationTimeoutMs',
  ];

  it.each([
    ['maxBodyByte', 'maxBodyBytes'],
    ['maxBodyBtyes', 'maxBodyBytes'], // two letters swapped
    ['MAXBODYBYTES', 'maxBodyBytes'],
    ['publickey', 'publicKey'],
    ['key', 'publicKey'], // a part of one name only
    ['lease', 'leaseMs'],
    ['lg', 'log'],
  ])('%s → %s', (name, near) => {
    expect(nearestName(name, known)).toBe(near);
  });

  it('suggests nothing for a name far from all (and lists them), or a part of several', () => {
    expect(nearestName('colour', known)).toBeUndefined();
    expect(nearestName('timeout', known)).toBeUndefined(); // bodyTimeoutMs or operationTimeoutMs?
    expect(() => checkOptionNames({ colour: 1 }, { log: true, now: true })).toThrow(
      new TypeError('unknown option colour; the options are log, now'),
    );
  });

  it('lets every known name through, and leaves non-objects to the constructor', () => {
    expect(() => checkOptionNames({ log: undefined, now: 1 }, { log: true, now: true })).not.toThrow();
    expect(() => checkOptionNames(undefined, { log: true })).not.toThrow();
    expect(() => checkOptionNames(null, { log: true })).not.toThrow();
    // Inherited names are not options (Object.keys), and an undefined value still has a name.
    expect(() => checkOptionNames({ lgo: undefined }, { log: true })).toThrow(/did you mean log\?/);
  });
});
