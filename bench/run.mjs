// npm run bench: every benchmark in turn, each in its own process (build first).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const dist = fileURLToPath(new URL('../dist/index.js', import.meta.url));
if (!existsSync(dist)) {
  console.error('bench: dist/ is missing; run npm run build first');
  process.exit(2);
}
const only = process.argv.slice(2);
const benches = ['verify', 'canonicalize', 'engine', 'event-loop', 'express', 'stores', 'cli'].filter((b) => only.length === 0 || only.includes(b));
let failed = 0;
for (const name of benches) {
  console.log(`\n===== bench/${name}.mjs =====\n`);
  const r = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(new URL(`./${name}.mjs`, import.meta.url))], { stdio: 'inherit' });
  if (r.status !== 0) {
    failed++;
    console.error(`bench/${name}.mjs exited with ${r.status}`);
  }
}
process.exit(failed === 0 ? 0 : 1);
