// jobhook canonicalize vs native JSON.stringify(JSON.parse(b), null, 2), same process, same bodies.
import { canonicalize } from '../dist/index.js';
import { ocrBody } from './bodies.mjs';
import { machine, measure, table } from './harness.mjs';

const sizes = [
  ['1 KB', 1024],
  ['100 KB', 100 * 1024],
  ['10 MB', 10 * 1024 * 1024],
];

console.log(`# canonicalize — ${machine()}\n`);
const rows = [];
for (const [label, size] of sizes) {
  const text = ocrBody(size);
  const bytes = new TextEncoder().encode(text);
  const mb = bytes.length / 1e6;
  const opts = size > 1e6 ? { samples: 5, minSampleMs: 1000, warmupMs: 1000 } : {};
  const native = measure(() => JSON.stringify(JSON.parse(text), null, 2), opts).median;
  const jhText = measure(() => canonicalize(text), opts).median;
  const jhBytes = measure(() => canonicalize(bytes), opts).median;
  rows.push({
    body: `${label} (${bytes.length} B)`,
    'native MB/s': (native * mb).toFixed(1),
    'jobhook (string) MB/s': (jhText * mb).toFixed(1),
    'jobhook (bytes) MB/s': (jhBytes * mb).toFixed(1),
    'ratio string/native': (jhText / native).toFixed(2),
    'ratio bytes/native': (jhBytes / native).toFixed(2),
  });
}
console.log(table(rows, Object.keys(rows[0])));
