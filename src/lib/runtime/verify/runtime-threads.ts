/**
 * jobhook/web on Node: the verification workers' modules without naming a node: module
 * (a bundler for an edge runtime would try to resolve it).
 */
import type { NodeBuiltins } from './worker-options.js';

/**
 * The same modules where the runtime offers them without an import a bundler would try
 * to resolve (`process.getBuiltinModule`: Node ≥ 20.16, Bun, Deno): jobhook/web running
 * on Node verifies costly bodies on the same workers. Undefined elsewhere (an edge
 * runtime): everything is verified on the calling thread.
 */
export function runtimeBuiltins(): NodeBuiltins | undefined {
  const p = (
    globalThis as { process?: { versions?: { node?: string }; getBuiltinModule?: (name: string) => unknown } }
  ).process;
  const get = p?.getBuiltinModule;
  // Node itself: Bun and Deno have workers of their own making, not tried here.
  const edge =
    (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent === 'Cloudflare-Workers';
  if (
    typeof get !== 'function' ||
    typeof p?.versions?.node !== 'string' ||
    'Bun' in globalThis ||
    'Deno' in globalThis ||
    edge
  )
    return undefined;
  const load =
    <T>(name: string) =>
    async () =>
      get.call(p, name) as T;
  try {
    if (
      typeof (get.call(p, 'node:worker_threads') as { Worker?: unknown } | undefined)?.Worker !== 'function'
    )
      return undefined;
  } catch {
    return undefined;
  }
  return {
    workerThreads: load('node:worker_threads'),
    os: load('node:os'),
    module: load('node:module'),
    url: load('node:url'),
  };
}
