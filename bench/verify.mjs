// Verification throughput on one delivery, every contender in the same process.
import { createHash, createPublicKey, createVerify, verify as rsaVerify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import forge from 'node-forge';
import stableStringify from 'fast-json-stable-stringify';
import safeStableStringify from 'safe-stable-stringify';
import { createVerifier, signDelivery } from '../dist/index.js';
import { createWebVerifier } from '../dist/web.js';
import { ocrBody } from './bodies.mjs';
import { machine, measure, measureAsync, table } from './harness.mjs';

const root = new URL('../fixtures/keys/', import.meta.url);
const publicPem = readFileSync(new URL('test-2048-public.pem', root), 'utf8');
const privatePem = readFileSync(new URL('test-2048-private.pem', root), 'utf8'); // TEST-ONLY key
const keyObject = createPublicKey(publicPem);
const forgeKey = forge.pki.publicKeyFromPem(publicPem);

function contenders(body) {
  const { headers } = signDelivery(body, privatePem);
  const sigHex = headers['X-Service-Signature'];
  const sig = Buffer.from(sigHex, 'hex');
  const bytes = new TextEncoder().encode(body);
  const verifier = createVerifier({ publicKey: publicPem });
  const web = createWebVerifier({ publicKey: publicPem });
  const digestHex = verifier.verify(bytes, headers).canonicalSha256;
  const message = Buffer.from(digestHex, 'latin1');
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
  return {
    'crypto.verify + KeyObject (the limit)': () => rsaVerify('sha256', message, keyObject, sig),
    'jobhook createVerifier().verify': () => verifier.verify(bytes, headers),
    'jobhook createWebVerifier().verify (async)': { async: () => web.verify(bytes, headers) },
    'naive: JSON.parse + safe-stable-stringify + PEM per call': naive,
    'node-forge pipeline': forgePipeline,
    _valid: { naive: naive(), forge: forgePipeline() },
  };
}

console.log(`# verify — ${machine()}\n`);
for (const [label, body, opts] of [
  ['~1.4 KB delivery', ocrBody(1400), {}],
  ['1 MB delivery', ocrBody(1024 * 1024), { samples: 5, minSampleMs: 500 }],
]) {
  const c = contenders(body);
  const rows = [];
  let limit;
  for (const [name, fn] of Object.entries(c)) {
    if (name.startsWith('_')) continue;
    if (name === 'node-forge pipeline' && body.length > 100_000) continue;
    const r = typeof fn === 'function' ? measure(fn, opts) : await measureAsync(fn.async, opts);
    limit ??= r.median;
    rows.push({ contender: name, 'ops/s (median)': r.median.toFixed(0), 'µs/op': (1e6 / r.median).toFixed(1), 'vs limit': (r.median / limit).toFixed(2) });
  }
  console.log(`## ${label} (${Buffer.byteLength(body)} B)\n`);
  console.log(table(rows, Object.keys(rows[0])));
  console.log(`\nnaive recipe accepts this signature: ${c._valid.naive}; node-forge pipeline (fast-json-stable-stringify, compact) accepts it: ${c._valid.forge}\n`);
}
