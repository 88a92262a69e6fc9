// One set of declarations for both formats. tsup writes the same declarations twice, once
// per format (dist/*.d.ts for import, dist/*.d.cts for require), a quarter of the tarball's
// bytes. The CommonJS ones stay whole (with their @example sections); each entry's ESM
// declaration becomes a re-export of its CommonJS one (`export * from './express.cjs'`,
// which TypeScript resolves to express.d.cts: an ES module may import a CommonJS one, so
// every resolution mode reads the same types), and the ESM declaration chunks, no longer
// imported, go. The exports map is unchanged: `types` still names a .d.ts under `import` and
// a .d.cts under `require`. Run after tsup (npm run build).
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { distName, ENTRIES } from '../entries.mjs';

const dist = fileURLToPath(new URL('../dist/', import.meta.url));
const entries = new Set(ENTRIES.map((e) => distName(e.source)));
const missing = [...entries].filter((name) => !existsSync(join(dist, `${name}.d.cts`)));
if (missing.length > 0)
  throw new Error(
    `share-declarations: no ${missing.join(', ')}.d.cts in dist/ (did tsup write declarations?)`,
  );

for (const file of readdirSync(dist).filter((n) => n.endsWith('.d.ts'))) {
  const name = file.slice(0, -'.d.ts'.length);
  if (entries.has(name)) writeFileSync(join(dist, file), `export * from './${name}.cjs';\n`);
  // The declaration chunks tsup splits the entries' types into (`log-BNVsj5oV.d.ts`).
  else if (/-[\w-]{8}$/.test(name)) rmSync(join(dist, file));
}

// Nothing left imports a declaration that went.
for (const file of readdirSync(dist).filter((n) => /\.d\.c?ts$/.test(n)))
  for (const [, target] of readFileSync(join(dist, file), 'utf8').matchAll(/from '(\.\/[^']+)'/g)) {
    const declaration = target.replace(/\.js$/, '.d.ts').replace(/\.cjs$/, '.d.cts');
    if (!existsSync(join(dist, declaration)))
      throw new Error(`share-declarations: ${file} imports ${target}, whose declaration is gone`);
  }
