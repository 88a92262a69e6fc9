import { defineConfig } from 'tsup';

// JOBHOOK_BUILD=js (npm run demo): JavaScript only, keeping the declarations already
// in dist, so the demo starts in seconds. Everything else builds the whole package.
const jsOnly = process.env.JOBHOOK_BUILD === 'js';

export default defineConfig([
  {
    entry: { index: 'src/index.ts', neutral: 'src/neutral.ts', express: 'src/express.ts', web: 'src/web.ts', redis: 'src/redis.ts', postgres: 'src/postgres.ts', testing: 'src/testing.ts', 'verify-worker': 'src/lib/verify/verify-worker.ts' },
    format: ['esm', 'cjs'],
    dts: !jsOnly,
    sourcemap: true,
    clean: !jsOnly,
    target: 'node20',
    splitting: true,
    // Class names survive the CJS build: err.name, String(err) and constructor.name stay readable.
    keepNames: true,
    // import.meta.url in the CJS build (optional peer dependencies are loaded with createRequire).
    shims: true,
    // Keep node:crypto rather than crypto: Deno and Workers (nodejs_compat) resolve only the prefixed names.
    removeNodeProtocol: false,
  },
  {
    entry: { cli: 'src/cli.ts' },
    format: ['esm'],
    target: 'node20',
    sourcemap: true,
    keepNames: true,
    removeNodeProtocol: false,
    banner: { js: '#!/usr/bin/env node' },
  },
]);
