/** The words of `jobhook explain`: a report of the findings, and one line per cause. */
import type { Cause, Explanation, ReserializedHow, Skipped } from './explain-findings.js';
import { escapeControls } from './io.js';
import { describeBase64 } from './signature-encoding.js';

const HOW: Record<ReserializedHow, string> = {
  'pretty-printed': 'pretty-printed by JSON.stringify(…, null, 2) (a logger or proxy?)',
  reserialized: 'parsed and serialized again (JSON.parse + JSON.stringify?)',
};

function sender(dialect: string): string {
  return dialect.startsWith('python') ? "Python's json.dumps" : 'an older orjson';
}

/** One cause in words. */
export function describeCause(c: Cause): string {
  switch (c.kind) {
    case 'body-too-large':
      return `The body has ${c.bytes} bytes, more than maxBodyBytes (${c.limit}): the verifier refuses it (BODY_TOO_LARGE) without reading it, so it was not analysed (--max-body-bytes raises the limit).`;
    case 'canonical-too-large':
      return `The canonical form of this body would exceed maxCanonicalBytes (${c.limit} bytes): the verifier refuses it (CANONICAL_TOO_LARGE) without building it, so no dialect was examined.`;
    case 'malformed':
      return `The body is not strict JSON: ${c.message} It cannot be what the gateway signed (truncated or altered on the way?).`;
    case 'valid':
      return c.dialect === 'orjson'
        ? 'Valid: the signature verifies under the orjson dialect.'
        : `Valid, but signed in the ${c.dialect} dialect, not the gateway's default orjson: the sender serializes with ${sender(c.dialect)}. A receiver restricted to other dialects rejects it.`;
    case 'valid-but-whitespace':
      return `The signature header contains whitespace inside the hex; without it the signature verifies (key ${c.keyIndex}, ${c.dialect} dialect): the header was wrapped or altered on the way.`;
    case 'missing':
      return 'The signature header is missing: the request was not signed, or a proxy dropped the header.';
    case 'whitespace':
      return 'The signature header contains whitespace inside the hex: it was wrapped or altered on the way.';
    case 'base64':
      return `The signature header looks like base64, not hex (${describeBase64(c)}). The gateway sends the signature in hex: ${c.opensWithKey === undefined ? 'whatever wrote this header encoded it otherwise (a sender other than the gateway, a proxy, a test written by hand).' : `decoded, it opens with key ${c.opensWithKey}, so the signature is right and only its encoding is not: whatever wrote this header (a sender other than the gateway, a proxy, a test written by hand) re-encoded it.`}`;
    case 'non-hex':
      return 'The signature header contains characters other than hex digits (several headers joined? an encoding applied?).';
    case 'length':
      return `The signature has ${c.hexDigits} hex digits but the key's modulus needs ${c.wanted.join(' or ')}: ${c.truncated ? 'it was truncated' : 'it is too long (padded, or made with a larger key)'}.`;
    case 'wrong-key':
      return "No key opens the signature to a well-formed PKCS#1 v1.5 SHA-256 block: it was made with another key (a rotation? check the gateway's current public key) or corrupted.";
    case 'floats-written-as-integers':
      return `The body was ${HOW[c.how]}: floats were written as integers (1.0 → 1) at ${c.keys.map((k) => JSON.stringify(k)).join(', ')}. With those restored it verifies (${c.dialect} dialect). Verify the raw bytes as received.`;
    case 'body-not-signed':
      return `Key ${c.keyIndex} opens the signature (the key is right), but the signed digest matches no dialect of this body: the body is not the one that was signed.`;
    case 'pretty-printed':
      return `The body is pretty-printed: it was ${HOW[c.how]}. Whitespace alone does not matter, but re-serializing changes numbers and escapes.`;
    case 'escaped-non-ascii':
      return 'The body escapes non-ASCII characters as \\uXXXX: if the sender did not, it was re-serialized (ensure_ascii / JSON encoders of proxies).';
    case 'no-zero-fraction-floats':
      return 'The body has no float written with a zero fraction (1.0, 0.0): JSON.parse + JSON.stringify turns those into integers.';
    case 'big-integers':
      return `The body has ${c.count} integer(s) beyond 2^53, which JavaScript rounds when the body goes through JSON.parse.`;
    case 'changed-after-signing':
      return 'Otherwise the body was changed after signing (tampered, or edited by a middlebox).';
  }
}

const SKIPPED: Record<Skipped['reason'], string> = {
  'no-key-opens':
    'not analysed: no key opens the signature, so no body can match it (the verifier stops here too); canonical forms skipped',
  'body-too-large': 'not analysed: larger than maxBodyBytes',
  malformed: 'not analysed further: not strict JSON',
  'canonical-too-large': 'not analysed further: its canonical form would exceed maxCanonicalBytes',
};

/** What the signature header holds, as the report's second line says it. */
function describeHeader(s: Explanation['signature']): string {
  if (!s.present) return 'MISSING';
  if (s.base64 !== undefined) return `BASE64, NOT HEX (${describeBase64(s.base64)})`;
  return `${s.hexDigits} hex digits${s.uppercase ? ', uppercase' : ''}${s.whitespace ? ', CONTAINS WHITESPACE' : ''}${s.nonHex ? ', CONTAINS NON-HEX CHARACTERS' : ''}`;
}

/** Human-readable report of an explanation; anything quoted from the input is shown with its control characters escaped. */
export function formatExplanation(e: Explanation, keyNames: readonly string[]): string {
  const lines: string[] = [];
  lines.push(e.valid ? 'VALID' : 'INVALID');
  const s = e.signature;
  lines.push(`signature header: ${describeHeader(s)}`);
  for (const k of e.keys) {
    const opens =
      k.wellFormed === undefined
        ? ''
        : k.wellFormed
          ? ', opens the signature (right key)'
          : ', does not open the signature (wrong key?)';
    lines.push(
      `key ${k.index} (${keyNames[k.index] ?? 'key'}): RSA ${k.modulusBits}-bit, needs ${k.expectedHexDigits} hex digits: length ${k.lengthMatches ? 'matches' : 'DOES NOT MATCH'}${opens}`,
    );
  }
  if (e.malformed !== undefined) lines.push(`body: NOT STRICT JSON: ${e.malformed}`);
  else if (e.skipped !== undefined) lines.push(`body: ${SKIPPED[e.skipped.reason]}`);
  for (const d of e.dialects) {
    const name = d.dialect.padEnd(13);
    if (d.unrepresentable !== undefined)
      lines.push(`dialect ${name} cannot represent this body (${d.unrepresentable})`);
    else
      lines.push(
        `dialect ${name} sha256 ${d.canonicalSha256}${d.sameAs ? ` (same bytes as ${d.sameAs})` : ''}  ${d.verifiesWith.length ? `VERIFIES with key ${d.verifiesWith.join(', ')}` : 'does not verify'}`,
      );
  }
  const b = e.body;
  if (b !== undefined) {
    lines.push(
      `body: ${b.prettyPrinted ? 'pretty-printed' : 'compact'}, non-ASCII escaped: ${b.escapedNonAscii ? 'yes' : 'no'}, floats like 1.0: ${b.zeroFractionFloats}, integers beyond 2^53: ${b.integersBeyond2p53}`,
    );
  }
  const x = e.expected;
  if (x !== undefined) {
    if (x.identical) lines.push(`expected canonical (${x.dialect}): identical`);
    else if (x.unrepresentable !== undefined)
      lines.push(
        `expected canonical (${x.dialect}): this dialect cannot write this body (${x.unrepresentable})`,
      );
    else
      lines.push(
        `expected canonical (${x.dialect}): first difference at byte ${x.offset}`,
        `  ours:     ${x.got}`,
        `  expected: ${x.want}`,
      );
  }
  for (const c of e.causes) lines.push(`CAUSE: ${describeCause(c)}`);
  return lines.map(escapeControls).join('\n') + '\n';
}
