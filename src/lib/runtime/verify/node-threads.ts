/**
 * How the Node entries reach the modules of the verification workers: loaded by the
 * first costly delivery, not by `import('jobhook')` (bench/import.mjs).
 */
import type { NodeBuiltins } from './worker-options.js';

export const nodeBuiltins: NodeBuiltins = {
  workerThreads: () => import('node:worker_threads'),
  os: () => import('node:os'),
  module: () => import('node:module'),
  url: () => import('node:url'),
};
