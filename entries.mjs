/**
 * The package's public entries, listed once. Everything that names an entry follows this list:
 * - package.json `exports` is written from it (`node entries.mjs --write`) and checked against it
 *   by `npm test` (test/packaging.test.ts);
 * - the build (tsup.config.ts) builds each `source`;
 * - the exports snapshot (test/package/exports.test.ts) imports each `source` and records its names.
 *
 * Adding an entry: one row here (its `source` a few lines that re-export src/lib/), then
 * `node entries.mjs --write`, `npx vitest run test/package/exports.test.ts -u` and a review of the
 * snapshot's change.
 *
 * `shares`: the entry whose whole code the entry's chunk takes (tsup.config.ts explains why:
 * fewer, larger chunks load faster). `edge`: the build a bundler for an edge runtime picks for
 * the same subpath (conditions workerd, edge-light, worker, browser), with the same types.
 */
export const ENTRIES = [
  { subpath: '.', source: 'src/index.ts', edge: 'src/neutral.ts' },
  { subpath: './express', source: 'src/express.ts', shares: 'src/index.ts' },
  { subpath: './web', source: 'src/web.ts', shares: 'src/lib/entries/neutral-api.ts' },
  { subpath: './errors', source: 'src/errors.ts', shares: 'src/web.ts' },
  { subpath: './gateway', source: 'src/gateway.ts', shares: 'src/web.ts' },
  { subpath: './store', source: 'src/store.ts', shares: 'src/web.ts' },
  { subpath: './redis', source: 'src/redis.ts', shares: 'src/index.ts' },
  { subpath: './postgres', source: 'src/postgres.ts', shares: 'src/index.ts' },
  { subpath: './sqlite', source: 'src/sqlite.ts', shares: 'src/index.ts' },
  { subpath: './testing', source: 'src/testing.ts', shares: 'src/index.ts' },
  { subpath: './bullmq', source: 'src/bullmq.ts', shares: 'src/index.ts' },
  { subpath: './nats', source: 'src/nats.ts', shares: 'src/index.ts' },
  { subpath: './cloudflare', source: 'src/cloudflare.ts', shares: 'src/web.ts' },
  { subpath: './deno', source: 'src/deno.ts', shares: 'src/web.ts' },
];

/** Files the package exports as they are (no source entry): the RSA WebAssembly module for Workers. */
export const FILE_EXPORTS = [{ subpath: './rsa.wasm', file: './dist/rsa.wasm', types: 'rsa-wasm' }];

/** The conditions under which bundlers for edge runtimes resolve a subpath. */
const EDGE_CONDITIONS = ['workerd', 'edge-light', 'worker', 'browser'];

/** The name of an entry's files in dist/ (`src/express.ts` → `express`). */
export const distName = (source) => source.replace(/^src\//, '').replace(/\.ts$/, '');

/** package.json's `exports`, as the list above makes it. */
export function exportsMap() {
  const map = {};
  const both = (name, file = `./dist/${name}`) => ({
    import: { types: `./dist/${name}.d.ts`, default: file.endsWith('.wasm') ? file : `${file}.js` },
    require: { types: `./dist/${name}.d.cts`, default: file.endsWith('.wasm') ? file : `${file}.cjs` },
  });
  for (const entry of ENTRIES) {
    const name = distName(entry.source);
    const edge = {};
    if (entry.edge !== undefined)
      for (const condition of EDGE_CONDITIONS)
        edge[condition] = { types: `./dist/${name}.d.ts`, default: `./dist/${distName(entry.edge)}.js` };
    map[entry.subpath] = { ...edge, ...both(name) };
  }
  for (const { subpath, file, types } of FILE_EXPORTS) map[subpath] = both(types, file);
  map['./package.json'] = './package.json';
  return map;
}

if (process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  const { readFileSync, writeFileSync } = await import('node:fs');
  const path = new URL('package.json', import.meta.url);
  const pkg = JSON.parse(readFileSync(path, 'utf8'));
  const same = JSON.stringify(pkg.exports) === JSON.stringify(exportsMap());
  if (process.argv.includes('--write')) {
    pkg.exports = exportsMap();
    writeFileSync(path, JSON.stringify(pkg, null, 2) + '\n');
    console.log(same ? 'package.json exports: unchanged' : 'package.json exports: written');
  } else {
    console.log(
      same
        ? 'package.json exports follow entries.mjs'
        : 'package.json exports differ: node entries.mjs --write',
    );
    process.exitCode = same ? 0 : 1;
  }
}
