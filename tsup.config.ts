import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { transformSync } from 'esbuild';
import ts from 'typescript';
import { defineConfig, type Options } from 'tsup';
import { distName, ENTRIES } from './entries.mjs';

// JOBHOOK_BUILD=js (npm run demo): JavaScript only, keeping the declarations already
// in dist, so the demo starts in seconds. Everything else builds the whole package
// (and `npm pack` runs the whole build first: the prepack script).
const jsOnly = process.env.JOBHOOK_BUILD === 'js';

const common: Options = {
  target: 'node20',
  // No source maps: they were 60 % of the package.
  sourcemap: false,
  // Readable: no minification, so a stack trace and a configuration error point at a
  // line people can read (a minified chunk printed ~149 kB of source before a
  // TypeError). esbuild drops comments but keeps lines and names; no keepNames either:
  // its __name helper renamed every per-request closure (22 µs a request in a profile).
  minify: false,
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
 *   the CLI (and its lazily loaded simulator and check) and the verification worker take all of
 *   jobhook: they are used with it anyway;
 * - jobhook/web takes the runtime-neutral API of jobhook, and the edge build of jobhook
 *   and the runtime-neutral subpaths (errors, gateway, store) take jobhook/web (the
 *   verifier and receiver on WebCrypto): they run on the same edge runtimes and are used
 *   together, and so the code they share with the Node entries is one chunk instead of
 *   several. An edge bundle of jobhook/web is ~9 kB larger (3 kB
 *   gzipped), one of jobhook alone ~48 kB; one of both, as the Workers recipe has, ~9 kB;
 * - the modules loaded by a dynamic import() when first used (the WebAssembly canonical
 *   engine, the WebAssembly RSA operation, the worker pool) take jobhook/web: esbuild makes each of them an entry of
 *   its own, so a module such a chunk shares with the entries (the errors, the BigInt
 *   RSA) would otherwise be cut out of their chunks into a new one that `import('jobhook')`
 *   loads too. Loading such a chunk loads the jobhook/web chunk with it (13 kB, once).
 */
const SHARES = new Map<string, string>([
  ...ENTRIES.flatMap((e): Array<[string, string]> => [
    ...(e.shares === undefined ? [] : [[e.source, e.shares] as [string, string]]),
    ...(e.edge === undefined ? [] : [[e.edge, 'src/web.ts'] as [string, string]]),
  ]),
  // The CLI with its lazily loaded commands, and the verification worker: with jobhook.
  ['src/cli.ts', 'src/index.ts'],
  ['src/tools/cli/simulate.ts', 'src/index.ts'],
  ['src/tools/cli/check.ts', 'src/index.ts'],
  ['src/lib/runtime/verify/verify-worker.ts', 'src/index.ts'],
  // The modules a dynamic import() loads when first used: with jobhook/web.
  ['src/lib/runtime/crypto/rsa-public.ts', 'src/web.ts'],
  ['src/lib/runtime/verify/pool.ts', 'src/web.ts'],
  ['src/lib/core/canonical/wasm/engine.ts', 'src/web.ts'],
]);
const shareTheCore = {
  name: 'jobhook-share-the-core',
  setup(build: {
    onLoad: (
      o: { filter: RegExp },
      f: (a: { path: string }) => { contents: string; loader: 'ts' } | undefined,
    ) => void;
  }) {
    const root = process.cwd();
    build.onLoad({ filter: /\.ts$/ }, ({ path }) => {
      const shared = SHARES.get(relative(root, path).split(sep).join('/'));
      if (shared === undefined) return undefined;
      return {
        contents: `${readFileSync(path, 'utf8')}\nimport * as jobhookShared from ${JSON.stringify(join(root, shared))};\nvoid Object.keys(jobhookShared);\n`,
        loader: 'ts',
      };
    });
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
const esmOnly = {
  ...Object.fromEntries(ENTRIES.flatMap((e) => (e.edge === undefined ? [] : [[distName(e.edge), e.edge]]))),
  cli: 'src/cli.ts',
  'verify-worker': 'src/lib/runtime/verify/verify-worker.ts',
};

/**
 * The CommonJS build printed statement by statement, as the ESM build is. tsup turns the
 * split ESM chunks into CommonJS with sucrase, which writes its helpers and every
 * `exports.name = …` of a chunk on one line (one of 4.7 kB); esbuild reprints each file
 * without changing what it does, so no line of the package is over 1,000 characters and
 * a stack trace points at a readable line.
 */
function printCjsReadably(file: string): void {
  writeFileSync(
    file,
    transformSync(readFileSync(file, 'utf8'), {
      loader: 'js',
      format: 'cjs',
      target: 'node20',
      legalComments: 'none',
    }).code,
  );
}

/**
 * The comments esbuild keeps (documentation of methods and statements) out of the built
 * JavaScript: the code keeps its lines and names, the documentation is in the sources
 * and the declarations (.d.ts). They were a tenth of the code's bytes, read at every cold
 * import, and their typography made chunks non-ASCII: code with one non-ASCII byte is
 * decoded from UTF-8 the slow way and compiled as two-byte source.
 */
function withoutComments(file: string): void {
  const text = readFileSync(file, 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.JS);
  const ranges = new Map<number, number>();
  const collect = (pos: number) => {
    for (const r of [
      ...(ts.getLeadingCommentRanges(text, pos) ?? []),
      ...(ts.getTrailingCommentRanges(text, pos) ?? []),
    ])
      ranges.set(r.pos, r.end);
  };
  const visit = (node: ts.Node) => {
    collect(node.pos);
    collect(node.end);
    ts.forEachChild(node, visit);
  };
  visit(source);
  collect(source.endOfFileToken.pos);
  let out = '';
  let at = 0;
  for (const [pos, end] of [...ranges].sort((a, b) => a[0] - b[0])) {
    if (pos < at) continue;
    // The #! line of the CLI stays, the annotations bundlers shake code by (`/* @__PURE__ */`),
    // and esbuild's `// src/…` line before each module's code: which source a line came from.
    if (
      (pos === 0 && text.startsWith('#!')) ||
      /^(\/\*\s*[#@]__(PURE|NO_SIDE_EFFECTS)__\s*\*\/|\/\/ src\/\S+$)/.test(text.slice(pos, end))
    )
      continue;
    out += text.slice(at, pos);
    at = end;
  }
  out += text.slice(at);
  // Lines the comments filled, gone; code lines as they were (trailing blanks trimmed).
  writeFileSync(
    file,
    out
      .split('\n')
      .map((line) => line.trimEnd())
      .filter((line, i, all) => line !== '' || (i > 0 && all[i - 1] !== ''))
      .join('\n'),
  );
}

/** After each build: readable CommonJS, no comments. */
function finish(): void {
  for (const name of readdirSync('dist')) {
    const file = join('dist', name);
    if (name.endsWith('.cjs')) printCjsReadably(file);
    if (/\.c?js$/.test(name)) withoutComments(file);
  }
}

export default defineConfig([
  {
    ...common,
    entry: Object.fromEntries(ENTRIES.map((e) => [distName(e.source), e.source])),
    format: ['esm', 'cjs'],
    dts: !jsOnly,
    clean: !jsOnly,
    // One copy of each class and module state for every entry (jobhook and jobhook/express share errors and stores).
    splitting: true,
    // import.meta.url in the CJS build (optional peer dependencies are loaded with createRequire).
    shims: true,
    esbuildPlugins: [shareTheCore],
    onSuccess: async () => finish(),
    esbuildOptions(options, { format }) {
      if (format === 'esm')
        options.entryPoints = { ...(options.entryPoints as Record<string, string>), ...esmOnly };
      // tsup turns the CommonJS chunks into CommonJS with sucrase, which rewrites a class with
      // fields as an anonymous class expression named after a temporary (an error's name read
      // "_class2"): esbuild lowers the fields first, so the classes keep their names.
      else options.supported = { ...options.supported, 'class-field': false, 'class-static-field': false };
    },
  },
]);
