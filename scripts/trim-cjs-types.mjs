// The CommonJS declarations (dist/*.d.cts) without their @example sections. tsup writes
// the same declarations twice, once per format; the examples, a twelfth of their bytes,
// stay in the ESM declarations (dist/*.d.ts), in the sources and in the README, so the
// tarball keeps under its 400 kB limit (test/package/pack.test.ts). Descriptions, @param
// and every other tag stay in both. Run after tsup (npm run build). `--out-dir DIR`: another dist/.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const at = process.argv.indexOf('--out-dir');
const dist = at > 0 ? process.argv[at + 1] : fileURLToPath(new URL('../dist/', import.meta.url));

/** A `/** … *\/` block without its @example sections (each runs to the next tag or the block's end). */
function withoutExamples(block) {
  const kept = [];
  let inExample = false;
  for (const line of block.split('\n')) {
    const t = line.trim();
    if (t.startsWith('* @example')) {
      inExample = true;
      continue;
    }
    if (inExample && (t.startsWith('* @') || t.startsWith('*/'))) inExample = false;
    if (!inExample) kept.push(line);
  }
  // A block whose last kept line before the close is a lone "*" loses it.
  if (kept.length > 2 && kept.at(-2).trim() === '*') kept.splice(-2, 1);
  return kept.join('\n');
}

let examples = 0;
for (const name of readdirSync(dist).filter((n) => n.endsWith('.d.cts'))) {
  const file = join(dist, name);
  const text = readFileSync(file, 'utf8');
  const out = text.replace(/\/\*\*[\s\S]*?\*\//g, (block) =>
    block.includes('@example') ? (examples++, withoutExamples(block)) : block,
  );
  if (out !== text) writeFileSync(file, out);
}
if (examples === 0)
  throw new Error('trim-cjs-types: no @example found in dist/*.d.cts (did tsup write declarations?)');
