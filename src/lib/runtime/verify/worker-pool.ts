/**
 * Large bodies are verified on worker threads, so a 25 MB delivery does not hold the
 * event loop. The signature is opened here first (one RSA operation: a forged request
 * never takes a worker's time or a place in the queue); the worker parses,
 * canonicalizes and hashes; the main thread then builds the event from a plan of small
 * pieces, yielding between them. Bounded: a few workers, a short queue,
 * RECEIVER_BUSY (503) past it. Node only. node:worker_threads is loaded when the first
 * large delivery needs a worker, not when jobhook is imported (it costs a cold import
 * several milliseconds: bench/import.mjs).
 */
import type { Worker } from 'node:worker_threads';
import type { DialectName } from '../../core/canonical/dialects.js';
import { parseDocument } from '../../core/canonical/parse.js';
import { documentValue } from '../../core/canonical/to-value.js';
import { ReceiverBusyError } from '../../base/errors.js';
import { reviveError } from '../../base/revive-error.js';
import { errorDetails, type Logger } from '../../base/log.js';
import { checkNumber, type OptionNamesOf } from '../../base/options.js';
import { deliveryFrom, type OpenedSignature, type ParsedBody, type VerifiedDelivery } from '../../core/verify/core.js';
import type { HeadersInput } from '../../core/verify/headers.js';
import type { ResolvedOptions, VerifyOptionsBase } from '../../core/verify/options.js';
import { placement } from '../../core/verify/cost.js';
import { buildValue } from '../../core/verify/split.js';
import type { WorkerRequest, WorkerResponse } from './verify-worker.js';

/** Options of the Node receivers for verifying large bodies off the event loop. */
export interface WorkerOptions {
  /**
   * Bodies of at least this many bytes are verified on a worker thread, and their event
   * built in slices (default 1 MiB; `false`: always on the calling thread). A smaller
   * body goes to a worker too when its parsed layout says its canonical work is costly
   * (deep nesting, many floats to format per dialect).
   */
  workerThresholdBytes?: number | false;
  /** Worker threads, started on first use (default: cores − 1, 1 to 4). */
  workerPoolSize?: number;
}

/** Below it, verifying on the event loop costs less than a worker round trip (bench/verify.mjs). */
export const DEFAULT_WORKER_THRESHOLD_BYTES = 1024 * 1024;

/**
 * Bodies the receiver read itself (nobody else holds them): they are moved to the
 * worker and back instead of copied (a 25 MB copy holds the event loop ~20 ms).
 */
export const ownedBodies = new WeakSet<Uint8Array>();

/** The SHA-256 (hex) of the raw body of each delivery verified on a worker (its body was moved there, so it is hashed there). */
export const rawHashes = new WeakMap<VerifiedDelivery, string>();

interface Task {
  request: WorkerRequest;
  resolve: (r: WorkerResponse) => void;
  reject: (err: Error) => void;
}

interface Slot {
  worker: Worker;
  task: Task | undefined;
  /** Ends the worker once it has been idle for WORKER_IDLE_MS. */
  idle?: ReturnType<typeof setTimeout>;
}

/**
 * A worker idle this long is ended: its WebAssembly memory, grown by the largest body it
 * verified, never shrinks while it lives (a 25 MB delivery leaves ~100 MiB behind). The
 * next large delivery starts a new one (tens of ms); a flood keeps them busy.
 */
export const WORKER_IDLE_MS = 5_000;

/** Starts a verification worker with the given workerData. */
type StartWorker = (workerData: unknown) => Worker;

/** What starting workers needs, loaded once, at the first large delivery. */
interface Threads {
  start: StartWorker;
  cores: number;
}

/**
 * How the pool reaches Node's modules: `import()` in the Node entries (adapters/node-threads.ts);
 * `process.getBuiltinModule` in jobhook/web, which must name no node: module a bundler
 * for an edge runtime would try to resolve.
 */
export interface NodeBuiltins {
  workerThreads(): Promise<typeof import('node:worker_threads')>;
  os(): Promise<typeof import('node:os')>;
  module(): Promise<{ createRequire: typeof import('node:module').createRequire }>;
  url(): Promise<{ pathToFileURL: typeof import('node:url').pathToFileURL }>;
}

let threads: Promise<Threads> | undefined;

/** Loads node:worker_threads and finds the worker file: the built one next to this chunk. */
function loadThreads(builtins: NodeBuiltins): Promise<Threads> {
  threads ??= (async (): Promise<Threads> => {
    const [{ Worker }, { availableParallelism }] = await Promise.all([builtins.workerThreads(), builtins.os()]);
    const cores = availableParallelism();
    const here = import.meta.url;
    if (!here.endsWith('.ts')) {
      // One worker file for both builds: a worker thread is a module of its own, ESM whether its parent was loaded by import or require.
      const file = new URL('./verify-worker.js', here);
      return { cores, start: (workerData) => new Worker(file, { workerData }) };
    }
    // Running from source (this repository's tests): the worker is TypeScript too, loaded
    // through tsx's loader registered inside the worker (hooks are not inherited in Node 20).
    const [{ createRequire }, { pathToFileURL }] = await Promise.all([builtins.module(), builtins.url()]);
    const tsx = new URL('dist/esm/api/index.mjs', pathToFileURL(createRequire(here).resolve('tsx/package.json'))).href;
    // Not new URL('./verify-worker.ts', import.meta.url): bundlers (Next.js's Turbopack) resolve that
    // pattern at build time, and the built package has no .ts file.
    const file = here.slice(0, here.lastIndexOf('/') + 1) + 'verify-worker.ts';
    const code = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(file)}); });`;
    return { cores, start: (workerData) => new Worker(code, { eval: true, workerData }) };
  })();
  // A failed load (a runtime without worker threads) is tried again by the next large delivery.
  threads.catch(() => {
    threads = undefined;
  });
  return threads;
}

/** The options a worker needs to match a body: no keys (the signature is opened here), no functions. */
function portable(o: ResolvedOptions): VerifyOptionsBase {
  const { dialects, maxBodyBytes, maxCanonicalBytes, integers, maxDepth } = o;
  return { dialects, maxBodyBytes, maxCanonicalBytes, integers, maxDepth };
}

/** What the pool offloads from: a verifier that opens signatures and can match small bodies itself. */
export interface LocalVerifier {
  readonly options: ResolvedOptions;
  open(headers: HeadersInput): OpenedSignature | Promise<OpenedSignature>;
  verifyOpened(body: string | Uint8Array, signature: OpenedSignature, parsed?: ParsedBody): VerifiedDelivery | Promise<VerifiedDelivery>;
}

export interface OffloadingVerifier {
  /** The first half, on the headers alone (always here: one RSA operation per key); a promise while a key function is resolved. */
  open(headers: HeadersInput): OpenedSignature | Promise<OpenedSignature>;
  /** The second half: on this thread for small bodies, on a worker for large ones. */
  verifyOpened(body: string | Uint8Array, signature: OpenedSignature): VerifiedDelivery | Promise<VerifiedDelivery>;
  /** Stops the workers; deliveries still waiting for one are refused (RECEIVER_BUSY, 503: the gateway retries). */
  close(): Promise<void>;
  /** Verifications on a worker now, and waiting for one. */
  workers(): { busy: number; queued: number };
}

const closing = () => new ReceiverBusyError('The receiver is shutting down; retry later.');

/**
 * `verifier.verifyOpened` for cheap bodies, a worker for costly ones (`placement`: by
 * size, then by the parsed layout). `builtins` undefined: no worker threads here (an
 * edge runtime), everything is verified on the calling thread.
 */
export function offloading(verifier: LocalVerifier, options: WorkerOptions, log: Logger, builtins: NodeBuiltins | undefined): OffloadingVerifier {
  const threshold = options.workerThresholdBytes === false ? Infinity : checkNumber(options.workerThresholdBytes ?? DEFAULT_WORKER_THRESHOLD_BYTES, 'workerThresholdBytes', { min: 0 });
  const given = options.workerPoolSize === undefined ? undefined : checkNumber(options.workerPoolSize, 'workerPoolSize', { integer: true, max: 64 });
  // Known once the threads are loaded (the default counts the cores).
  let size = 0;
  let start: StartWorker | undefined;
  const o = verifier.options;
  const slots: Slot[] = [];
  const queue: Task[] = [];
  let nextId = 1;
  let closed = false;

  function spawn(): Slot {
    const slot: Slot = { worker: start!(portable(o)), task: undefined };
    slot.worker.unref();
    slot.worker.on('message', (r: WorkerResponse) => {
      const task = slot.task;
      slot.task = undefined;
      task?.resolve(r);
      next();
    });
    const fail = (err: Error) => {
      const at = slots.indexOf(slot);
      if (at >= 0) slots.splice(at, 1);
      log.error('jobhook: a verification worker failed', errorDetails(err));
      slot.task?.reject(err);
      slot.task = undefined;
      next();
    };
    slot.worker.on('error', fail);
    slot.worker.on('exit', (code) => {
      if (slots.includes(slot)) fail(new Error(`the verification worker exited with code ${code}`));
    });
    slots.push(slot);
    return slot;
  }

  function next(): void {
    while (queue.length > 0) {
      let slot = slots.find((s) => s.task === undefined);
      if (slot === undefined && slots.length < size) slot = spawn();
      if (slot === undefined) return;
      const task = queue.shift()!;
      slot.task = task;
      if (slot.idle !== undefined) clearTimeout(slot.idle);
      slot.idle = undefined;
      slot.worker.ref();
      const { body } = task.request;
      const movable = ownedBodies.has(body) && body.byteOffset === 0 && body.byteLength === body.buffer.byteLength && body.buffer instanceof ArrayBuffer;
      slot.worker.postMessage(task.request, movable ? [body.buffer as ArrayBuffer] : []);
    }
    for (const s of slots) if (s.task === undefined) idle(s);
  }

  function idle(slot: Slot): void {
    slot.worker.unref();
    if (slot.idle !== undefined) return;
    slot.idle = setTimeout(() => {
      slot.idle = undefined;
      const at = slots.indexOf(slot);
      if (slot.task !== undefined || at < 0) return;
      // Out of the pool first, so that its exit is not taken for a failure.
      slots.splice(at, 1);
      void slot.worker.terminate();
    }, WORKER_IDLE_MS);
    slot.idle.unref?.();
  }

  async function inWorker(body: Uint8Array, signature: OpenedSignature): Promise<VerifiedDelivery> {
    if (closed) throw closing();
    if (start === undefined) {
      let loaded: Threads;
      try {
        loaded = await loadThreads(builtins!);
      } catch (err) {
        // No worker threads after all (a runtime that names the module but cannot start one): verify here.
        log.warn('jobhook: verification workers are unavailable; verifying on the calling thread', errorDetails(err));
        return verifier.verifyOpened(body, signature);
      }
      if (closed) throw closing();
      size = given ?? Math.max(1, Math.min(4, loaded.cores - 1));
      start = loaded.start;
    }
    if (queue.length >= 8 * size) throw new ReceiverBusyError(`${queue.length} large deliveries are waiting for the verification workers; retry later.`);
    const opened = signature.opened.map(({ keyIndex, hash }) => ({ keyIndex, hash }));
    const response = await new Promise<WorkerResponse>((resolve, reject) => {
      queue.push({ request: { id: nextId++, body, opened }, resolve, reject });
      next();
    });
    if ('error' in response) throw reviveError(response.error);
    const { dialect, keyIndex, canonicalSha256, plan, rawSha256 } = response.ok;
    // The body came back (moved, or the worker's copy).
    const back = response.body;
    const value = plan === undefined ? documentValue(parseDocument(back, { maxDepth: o.maxDepth }), o.integers, dialect as DialectName) : await buildValue(back, plan);
    const delivery = deliveryFrom(value, o, dialect as DialectName, keyIndex, canonicalSha256);
    rawHashes.set(delivery, rawSha256);
    return delivery;
  }

  return {
    workers: () => ({ busy: slots.filter((s) => s.task !== undefined).length, queued: queue.length }),
    open: (headers) => verifier.open(headers),
    verifyOpened(body, signature) {
      if (builtins === undefined) return verifier.verifyOpened(body, signature);
      const where = placement(body, o, threshold);
      if (!where.worker) return verifier.verifyOpened(body, signature, where.parsed);
      return inWorker(typeof body === 'string' ? new TextEncoder().encode(body) : body, signature);
    },
    async close() {
      closed = true;
      // Nothing waits for an answer that will not come: queued and running deliveries are refused.
      for (const task of queue.splice(0)) task.reject(closing());
      const all = slots.splice(0);
      for (const s of all) {
        s.task?.reject(closing());
        s.task = undefined;
        if (s.idle !== undefined) clearTimeout(s.idle);
      }
      await Promise.all(all.map((s) => s.worker.terminate()));
    },
  };
}

/** The names of {@link WorkerOptions}. */
export const WORKER_OPTIONS = { workerThresholdBytes: true, workerPoolSize: true } as const satisfies OptionNamesOf<WorkerOptions>;
