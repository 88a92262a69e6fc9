import { readFileSync } from 'node:fs';
import { defineConfig, type Options } from 'tsup';

// JOBHOOK_BUILD=js (npm run demo): JavaScript only, keeping the declarations already
// in dist, so the demo starts in seconds. Everything else builds the whole package
// (and `npm pack` runs the whole build first: the prepack script).
const jsOnly = process.env.JOBHOOK_BUILD === 'js';

const common: Options = {
  target: 'node20',
  // No source maps: they were 60 % of the package.
  sourcemap: false,
  // Whitespace and comments out (the tarball ≤ 300 kB; Node compiles every byte `import('jobhook')` loads,
  // and a comment with one non-ASCII character made a whole chunk decode as UTF-16). Local names are
  // shortened too (19.5 kB of the tarball); keepNames keeps every function's and class's own name, so a
  // stack trace still names jobhook's functions (at column N of line 1). Syntax stays as written: minifySyntax
  // is left out: tsup's CJS conversion (sucrase) broke its comma expressions in classes with fields.
  minifyWhitespace: true,
  minifyIdentifiers: true,
  // Function and class names survive: stack traces, err.name, String(err) and constructor.name stay readable.
  keepNames: true,
  // Keep node:crypto rather than crypto: Deno and Workers (nodejs_compat) resolve only the prefixed names.
  removeNodeProtocol: false,
};

/**
 * esbuild puts code in one chunk per set of entries that use it, so entries that each
 * use a different part of the shared code cut it into many small chunks, and Node's ESM
 * loader pays for every file `import('jobhook')` loads (bench/import.mjs: 13 files → 5 →
 * 3). So some entries take the whole code of another module (what they export does not
 * change; the code is in their chunks, and a bundler keeps it):
 * - the Node entries besides jobhook (express, redis, postgres, testing, bullmq, nats),
 *   the CLI (and its lazily loaded simulator) and the verification worker take all of
 *   jobhook: they are used with it anyway;
 * - jobhook/web takes the runtime-neutral API (the gateway client and reconciler), and
 *   the edge build of jobhook takes jobhook/web (the verifier and receiver on WebCrypto):
 *   both run on the same edge runtimes, and so the code they share with the Node entries
 *   is one chunk instead of three. An edge bundle of jobhook/web is ~9 kB larger (3 kB
 *   gzipped), one of jobhook alone ~48 kB; one of both, as the Workers recipe has, ~9 kB.
 */
const takers: Array<[RegExp, string]> = [
  [/[\\/]src[\\/](express|redis|postgres|testing|bullmq|nats|cli|lib[\\/]cli[\\/]simulate|lib[\\/]runtime[\\/]verify[\\/]verify-worker)\.ts$/, 'index.ts'],
  [/[\\/]src[\\/]web\.ts$/, 'lib/entries/neutral-api.ts'],
  [/[\\/]src[\\/]neutral\.ts$/, 'web.ts'],
];
const shareTheCore = {
  name: 'jobhook-share-the-core',
  setup(build: { onLoad: (o: { filter: RegExp }, f: (a: { path: string }) => { contents: string; loader: 'ts' }) => void }) {
    for (const [filter, taken] of takers) {
      build.onLoad({ filter }, ({ path }) => {
        // The project's src/ is the last one in the path (nothing under src/ is named src).
        const src = path.slice(0, Math.max(path.lastIndexOf('/src/'), path.lastIndexOf('\\src\\')) + 5);
        return { contents: `${readFileSync(path, 'utf8')}\nimport * as jobhookShared from ${JSON.stringify(src + taken)};\nvoid Object.keys(jobhookShared);\n`, loader: 'ts' };
      });
    }
  },
};

/**
 * Entries of the ESM build only, without declarations: the edge build of jobhook (its
 * types are jobhook's), the CLI (`bin`; src/cli.ts starts with its #! line), and the
 * verification worker, which the pool starts by URL, next to the chunk that starts it,
 * from both builds (a worker thread is a module graph of its own, ESM whether its
 * parent was loaded by import or require). As entries of the one build they share its
 * chunks instead of carrying a copy of the library (and of both WebAssembly modules) each.
 */
const esmOnly = { neutral: 'src/neutral.ts', cli: 'src/cli.ts', 'verify-worker': 'src/lib/runtime/verify/verify-worker.ts' };

export default defineConfig([
  {
    ...common,
    entry: { index: 'src/index.ts', express: 'src/express.ts', web: 'src/web.ts', redis: 'src/redis.ts', postgres: 'src/postgres.ts', testing: 'src/testing.ts', bullmq: 'src/bullmq.ts', nats: 'src/nats.ts' },
    format: ['esm', 'cjs'],
    dts: !jsOnly,
    clean: !jsOnly,
    // One copy of each class and module state for every entry (jobhook and jobhook/express share errors and stores).
    splitting: true,
    // import.meta.url in the CJS build (optional peer dependencies are loaded with createRequire).
    shims: true,
    esbuildPlugins: [shareTheCore],
    esbuildOptions(options, { format }) {
      if (format === 'esm') options.entryPoints = { ...(options.entryPoints as Record<string, string>), ...esmOnly };
    },
  },
]);
