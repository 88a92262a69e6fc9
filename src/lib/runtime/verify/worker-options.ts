/**
 * The options of the worker threads that verify costly bodies, so a 25 MB delivery does
 * not hold the event loop: their names, defaults and checks, loaded with the receivers.
 * The pool itself (pool.ts) is loaded by the first costly delivery (offload.ts), and
 * node:worker_threads by the pool when it starts its first worker: neither when jobhook
 * is imported (bench/import.mjs). What goes to a worker is decided in offload.ts.
 */
import { checkNumber, type OptionNamesOf } from '../../base/options.js';

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

/** The names of {@link WorkerOptions}. */
export const WORKER_OPTIONS = {
  workerThresholdBytes: true,
  workerPoolSize: true,
} as const satisfies OptionNamesOf<WorkerOptions>;

/** Below it, verifying on the event loop costs less than a worker round trip (bench/verify.mjs). */
export const DEFAULT_WORKER_THRESHOLD_BYTES = 1024 * 1024;

/** {@link WorkerOptions}, resolved once. */
export interface ResolvedWorkers {
  /** Bodies of this size and more go to a worker (Infinity: never). */
  readonly thresholdBytes: number;
  /** Workers at most; undefined: from the cores, once the threads are loaded. */
  readonly poolSize: number | undefined;
}

/** Checks the worker options (TypeError for mistakes). */
export function resolveWorkers(options: WorkerOptions): ResolvedWorkers {
  const { workerThresholdBytes: threshold, workerPoolSize: size } = options;
  return Object.freeze({
    thresholdBytes:
      threshold === false
        ? Infinity
        : checkNumber(threshold ?? DEFAULT_WORKER_THRESHOLD_BYTES, 'workerThresholdBytes', { min: 0 }),
    poolSize:
      size === undefined ? undefined : checkNumber(size, 'workerPoolSize', { integer: true, max: 64 }),
  });
}

/**
 * A worker idle this long is ended: its WebAssembly memory, grown by the largest body it
 * verified, never shrinks while it lives (a 25 MB delivery leaves ~100 MiB behind). The
 * next large delivery starts a new one (tens of ms); a flood keeps them busy.
 */
export const WORKER_IDLE_MS = 5_000;

/**
 * How the pool reaches Node's modules: `import()` in the Node entries (node-threads.ts);
 * `process.getBuiltinModule` in jobhook/web (runtime-threads.ts), which must name no
 * node: module a bundler for an edge runtime would try to resolve.
 */
export interface NodeBuiltins {
  workerThreads(): Promise<typeof import('node:worker_threads')>;
  os(): Promise<typeof import('node:os')>;
  module(): Promise<{ createRequire: typeof import('node:module').createRequire }>;
  url(): Promise<{ pathToFileURL: typeof import('node:url').pathToFileURL }>;
}
