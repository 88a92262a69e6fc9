// Verification on a ~1.4 KB delivery and a 1 MB one, every contender in interleaved
// rounds in one process (see harness.mjs).
//   goal (issue 13): a valid delivery ≥ 0.75× the throughput of the floor = bare
//     crypto.verify on the precomputed digest + JSON.parse(body), what any receiver must do;
//   goal (issue 9): a forged delivery costs ≤ 1.5× one bare crypto.verify.
//   node bench/verify.mjs   (after npm run build)
import { createHash, createPublicKey, createVerify, verify as rsaVerify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import forge from 'node-forge';
import stableStringify from 'fast-json-stable-stringify';
import safeStableStringify from 'safe-stable-stringify';
import { createVerifier, signDelivery } from '../dist/index.js';
import { createVerifier as createWebVerifier } from '../dist/web.js';
import { ocrBody } from './bodies.mjs';
import { interleaved, load, machine, median, spread, summarize, table } from './harness.mjs';

const root = new URL('../fixtures/keys/', import.meta.url);
const publicPem = readFileSync(new URL('test-2048-public.pem', root), 'utf8');
const privatePem = readFileSync(new URL('test-2048-private.pem', root), 'utf8'); // TEST-ONLY key
const keyObject = createPublicKey(publicPem);
const forgeKey = forge.pki.publicKeyFromPem(publicPem);

function contenders(body, { small }) {
  const { headers } = signDelivery(body, privatePem);
  const sigHex = headers['X-Service-Signature'];
  const sig = Buffer.from(sigHex, 'hex');
  const bytes = new TextEncoder().encode(body);
  const verifier = createVerifier({ publicKey: publicPem, maxAgeSeconds: false });
  const web = createWebVerifier({ publicKey: publicPem, maxAgeSeconds: false });
  const digestHex = verifier.verify(bytes, headers).canonicalSha256;
  const message = Buffer.from(digestHex, 'latin1');
  const forged = { ...headers, 'X-Service-Signature': 'ab'.repeat(256) };
  const forgedOk = (() => {
    try {
      verifier.verify(bytes, forged);
      return false;
    } catch (err) {
      return err.code === 'SIGNATURE_INVALID';
    }
  })();
  if (!forgedOk) throw new Error('the forged delivery must be refused with SIGNATURE_INVALID');
  const naive = () => {
    const canonical = safeStableStringify(JSON.parse(body), null, 2);
    const hex = createHash('sha256').update(canonical).digest('hex');
    return createVerify('sha256').update(hex).verify(publicPem, sigHex, 'hex');
  };
  const forgePipeline = () => {
    const md = forge.md.sha256.create();
    md.update(stableStringify(JSON.parse(body)), 'utf8');
    const inner = forge.md.sha256.create();
    inner.update(md.digest().toHex(), 'utf8');
    return forgeKey.verify(inner.digest().bytes(), forge.util.hexToBytes(sigHex));
  };
  const buffer = Buffer.from(bytes);
  // Receivers get headers with lower-case names (node:http); bytes, or text where a framework decoded them.
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  const c = {
    'floor: crypto.verify + JSON.parse': () =>
      rsaVerify('sha256', message, keyObject, sig) && JSON.parse(body),
    'floor from bytes: crypto.verify + JSON.parse(bytes)': () =>
      rsaVerify('sha256', message, keyObject, sig) && JSON.parse(buffer),
    'bare crypto.verify': () => rsaVerify('sha256', message, keyObject, sig),
    'jobhook verify (valid, text)': () => verifier.verify(body, lower),
    'jobhook verify (valid, bytes)': () => verifier.verify(bytes, lower),
    'jobhook verify (forged)': () => {
      try {
        verifier.verify(bytes, forged);
      } catch {
        // SIGNATURE_INVALID, checked above
      }
    },
    'jobhook/web verify (valid, bytes, async)': () => web.verify(bytes, lower),
    'naive: JSON.parse + safe-stable-stringify + PEM per call': naive,
  };
  if (small) c['node-forge pipeline'] = forgePipeline;
  return { c, accepts: { naive: naive(), forge: forgePipeline() } };
}

console.log(`# verify — ${machine()}\n\nStarted ${new Date().toISOString()}, load average ${load()}.\n`);
for (const [label, size, opts] of [
  ['~1.4 KB delivery', 1400, { rounds: 21, warmup: 3, minMs: 150 }],
  ['1 MB delivery', 1024 * 1024, { rounds: 9, warmup: 2, reps: 5 }],
]) {
  const body = ocrBody(size);
  const { c, accepts } = contenders(body, { small: size < 10_000 });
  const times = await interleaved(c, opts);
  console.log(`## ${label} (${Buffer.byteLength(body)} B)\n`);
  console.log(
    table(summarize(times, 'floor: crypto.verify + JSON.parse', { unit: size < 10_000 ? 'µs' : 'ms' })),
  );
  const per = (a, b) => times[a].map((t, i) => times[b][i] / t);
  const forgedCost = times['jobhook verify (forged)'].map((t, i) => t / times['bare crypto.verify'][i]);
  console.log(
    `\ngoal 1, same input: text ${median(per('jobhook verify (valid, text)', 'floor: crypto.verify + JSON.parse')).toFixed(2)}× the floor; bytes ${median(per('jobhook verify (valid, bytes)', 'floor from bytes: crypto.verify + JSON.parse(bytes)')).toFixed(2)}× the floor from bytes (throughput, median of rounds)`,
  );
  console.log(
    `forged delivery ÷ bare crypto.verify (time, per round): median ${median(forgedCost).toFixed(2)} (${spread(forgedCost)})`,
  );
  console.log(
    `naive recipe accepts this delivery: ${accepts.naive}; node-forge pipeline accepts it: ${accepts.forge}\n`,
  );
}
console.log(`Finished ${new Date().toISOString()}, load average ${load()}.`);
