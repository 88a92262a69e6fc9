// Goal 2 (issue 13): canonicalize + SHA-256 through the public API, against native
// JSON.stringify(JSON.parse(b), null, 2) + SHA-256, in interleaved rounds in one process.
//   node bench/canonicalize.mjs   (after npm run build)
import { createHash } from 'node:crypto';
import { canonicalizeToBytes } from '../dist/index.js';
import { base64Body, ocrBody } from './bodies.mjs';
import { interleaved, load, machine, summarize, table } from './harness.mjs';

const sha = (x) => createHash('sha256').update(x).digest('hex');
console.log(
  `# canonicalize + SHA-256 — ${machine()}\n\nStarted ${new Date().toISOString()}, load average ${load()}.\n`,
);
for (const [label, text, opts] of [
  ['OCR-like 1 KB', ocrBody(1024), { rounds: 15, minMs: 100 }],
  ['OCR-like 100 KB', ocrBody(100 * 1024), { rounds: 15, minMs: 150 }],
  ['OCR-like 10 MB', ocrBody(10 * 1024 * 1024), { rounds: 9, warmup: 2, reps: 2 }],
  ['base64-dominated 10 MB', base64Body(10 * 1024 * 1024), { rounds: 9, warmup: 2, reps: 2 }],
]) {
  const bytes = new TextEncoder().encode(text);
  const times = await interleaved(
    {
      'native: JSON.stringify(JSON.parse(text), null, 2)': () =>
        sha(JSON.stringify(JSON.parse(text), null, 2)),
      'jobhook canonicalizeToBytes(bytes)': () => sha(canonicalizeToBytes(bytes)),
      'jobhook canonicalizeToBytes(text)': () => sha(canonicalizeToBytes(text)),
    },
    opts,
  );
  console.log(`## ${label} (${bytes.length} B)\n`);
  console.log(
    table(
      summarize(times, 'native: JSON.stringify(JSON.parse(text), null, 2)', {
        unit: bytes.length > 1e6 ? 'ms' : 'µs',
        bytes: bytes.length,
      }),
    ),
  );
  console.log();
}
console.log(
  `Native takes the body as text (its best case; it is not canonical: only a yardstick). Finished ${new Date().toISOString()}, load average ${load()}.`,
);
