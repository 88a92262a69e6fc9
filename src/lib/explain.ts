import { DIALECTS, type DialectName } from './canonical/dialects.js';
import { parseDocument } from './canonical/parse.js';
import { serializeDocument, unrepresentableReason } from './canonical/serialize.js';
import { isWebhookError } from './errors.js';
import { importNodeKey, sha256Hex, verifyRsaSha256, type NodePublicKeyInput } from './crypto/node.js';
import { DEFAULT_SIGNATURE_HEADER } from './protocol.js';
import { hexToBytes } from './verify/signature.js';
import { getHeader, type HeadersInput } from './verify/headers.js';


export interface DialectFinding {
  dialect: DialectName;
  /** Why the dialect cannot write this body, if it cannot. */
  unrepresentable?: string;
  canonicalSha256?: string;
  /** Dialect tried earlier that produced the same bytes. */
  sameAs?: DialectName;
  /** Indexes of the keys that verify under this dialect. */
  verifiesWith: number[];
}

export interface KeyFinding {
  index: number;
  modulusBits: number;
  /** Hex digits a signature for this key has. */
  expectedHexDigits: number;
  lengthMatches: boolean;
  /**
   * The raw RSA public operation on the signature gives a well-formed PKCS#1 v1.5
   * SHA-256 block: the key is right and `signedHash` is what the signer hashed.
   */
  wellFormed?: boolean;
  /** SHA-256 (hex) of the message the signer signed, when the block is well formed. */
  signedHash?: string;
}

export interface Explanation {
  valid: boolean;
  /** The JSON parse error, if the body is not strict JSON. */
  malformed?: string;
  signature: { present: boolean; hexDigits: number; whitespace: boolean; nonHex: boolean; uppercase: boolean };
  keys: KeyFinding[];
  dialects: DialectFinding[];
  body: { prettyPrinted: boolean; jsStyleIndent: boolean; escapedNonAscii: boolean; zeroFractionFloats: number; integersBeyond2p53: number };
  /** Keys whose integer values, written as floats (1 → 1.0), make the signature verify. */
  repairedFloats?: { keys: string[]; dialect: DialectName };
  /** First difference from an expected canonical text. */
  expected?: { dialect: DialectName; identical: boolean; offset?: number; got?: string; want?: string };
  /** The conclusion, one line each, most likely first. */
  causes: string[];
}

export interface ExplainOptions {
  signatureHeader?: string;
  /** The canonical text the sender says it signed, to find the first differing byte. */
  expectedCanonical?: Uint8Array;
  /** Dialect to compare `expectedCanonical` with (default: the one that verifies, else orjson). */
  dialect?: DialectName;
}


const FLOAT_TOKEN_ZERO = /(?<![\w.])-?\d+\.0+(?![\d])/g;

function bodyTraits(text: string): Explanation['body'] {
  return {
    prettyPrinted: /^[{[]\s*\n\s+"/.test(text),
    jsStyleIndent: /^\{\n {2}"/.test(text) || /^\[\n {2}\S/.test(text),
    escapedNonAscii: /\\u(?:00[89a-fA-F][0-9a-fA-F]|0[1-9a-fA-F][0-9a-fA-F]{2}|[1-9a-fA-F][0-9a-fA-F]{3})/.test(text),
    zeroFractionFloats: (text.match(FLOAT_TOKEN_ZERO) ?? []).length,
    integersBeyond2p53: (text.match(/(?<![\w.])-?\d{16,}(?![\d.eE])/g) ?? []).filter((n) => !Number.isSafeInteger(Number(n))).length,
  };
}

/** Keys whose values are floats somewhere in the body and plain integers elsewhere (1.0 → 1 damage). */
function floatLikeKeys(text: string): string[] {
  const floats = new Set<string>();
  const ints = new Set<string>();
  for (const m of text.matchAll(/"((?:[^"\\]|\\.)*)"\s*:\s*(-?\d+)((?:\.\d+)?(?:[eE][+-]?\d+)?)(?=\s*[,}\]])/g)) {
    (m[3] !== '' ? floats : ints).add(m[1]!);
  }
  const common = ['confidence', 'score', 'probability', 'x', 'y', 'w', 'h', 'left', 'top', 'width', 'height', 'start', 'end', 'duration'];
  return [...ints].filter((k) => floats.has(k) || common.includes(k));
}

function withFloats(text: string, keys: string[]): string {
  const set = new Set(keys);
  return text.replace(/"((?:[^"\\]|\\.)*)"(\s*:\s*)(-?\d+)(?=\s*[,}\]])/g, (all, key: string, sep: string, n: string) => (set.has(key) ? `"${key}"${sep}${n}.0` : all));
}

/**
 * Diagnoses a delivery that fails (or passes) verification: per-dialect digests,
 * signature shape against each key, whether the key opens the signature at all,
 * signs of re-serialization, and a repair attempt for floats written as integers.
 */
export function explainDelivery(body: Uint8Array, headers: HeadersInput, publicKeys: readonly NodePublicKeyInput[], options: ExplainOptions = {}): Explanation {
  const keys = publicKeys.map((k) => importNodeKey(k));
  const text = new TextDecoder().decode(body);
  const raw = getHeader(headers, (options.signatureHeader ?? DEFAULT_SIGNATURE_HEADER).toLowerCase()) ?? '';
  const trimmed = raw.replace(/^[ \t]+|[ \t]+$/g, '');
  const compact = trimmed.replace(/\s+/g, '');
  const signature = {
    present: trimmed.length > 0,
    hexDigits: compact.replace(/[^0-9a-fA-F]/g, '').length,
    whitespace: /\s/.test(trimmed),
    nonHex: /[^0-9a-fA-F\s]/.test(trimmed),
    uppercase: /[A-F]/.test(trimmed),
  };
  const sigBytes = !signature.nonHex && compact.length % 2 === 0 ? hexToBytes(compact) : undefined;
  const keyFindings: KeyFinding[] = keys.map((k, index) => {
    const finding: KeyFinding = { index, modulusBits: k.modulusBytes * 8, expectedHexDigits: k.modulusBytes * 2, lengthMatches: compact.length === k.modulusBytes * 2 && !signature.nonHex };
    if (finding.lengthMatches && sigBytes !== undefined) {
      const hash = k.open(sigBytes);
      finding.wellFormed = hash !== undefined;
      if (hash !== undefined) finding.signedHash = Buffer.from(hash).toString('hex');
    }
    return finding;
  });

  const explanation: Explanation = { valid: false, signature, keys: keyFindings, dialects: [], body: bodyTraits(text), causes: [] };
  let doc;
  try {
    doc = parseDocument(body);
  } catch (err) {
    if (!isWebhookError(err)) throw err;
    explanation.malformed = err.message;
    explanation.causes.push(`The body is not strict JSON: ${err.message} It cannot be what the gateway signed (truncated or altered on the way?).`);
    return explanation;
  }

  const seen = new Map<string, DialectName>();
  const canonicals = new Map<DialectName, string>();
  for (const dialect of DIALECTS) {
    const reason = unrepresentableReason(doc, dialect);
    if (reason !== undefined) {
      explanation.dialects.push({ dialect, unrepresentable: reason, verifiesWith: [] });
      continue;
    }
    const canonical = serializeDocument(doc, dialect);
    canonicals.set(dialect, canonical);
    const digest = sha256Hex(canonical);
    const sameAs = seen.get(canonical);
    if (sameAs === undefined) seen.set(canonical, dialect);
    const verifiesWith = sigBytes === undefined ? [] : keyFindings.filter((k) => k.lengthMatches && verifyRsaSha256(keys[k.index]!.key, Buffer.from(digest, 'latin1'), sigBytes)).map((k) => k.index);
    explanation.dialects.push({ dialect, canonicalSha256: digest, ...(sameAs ? { sameAs } : {}), verifiesWith });
  }
  const verified = explanation.dialects.find((d) => d.verifiesWith.length > 0);
  // The verifier takes the header only as clean hex: whitespace inside makes it invalid even if the digits verify.
  explanation.valid = verified !== undefined && !signature.whitespace && !signature.nonHex;

  if (options.expectedCanonical !== undefined) {
    const dialect = options.dialect ?? verified?.dialect ?? 'orjson';
    const got = Buffer.from(canonicals.get(dialect) ?? '', 'utf8');
    const want = Buffer.from(options.expectedCanonical);
    let offset = 0;
    while (offset < got.length && offset < want.length && got[offset] === want[offset]) offset++;
    const identical = offset === got.length && offset === want.length;
    const context = (b: Buffer) => JSON.stringify(b.subarray(Math.max(0, offset - 24), offset + 24).toString('utf8'));
    explanation.expected = identical ? { dialect, identical } : { dialect, identical, offset, got: context(got), want: context(want) };
  }

  const causes = explanation.causes;
  if (verified !== undefined && signature.whitespace) {
    causes.push(`The signature header contains whitespace inside the hex; without it the signature verifies (key ${verified.verifiesWith[0]}, ${verified.dialect} dialect): the header was wrapped or altered on the way.`);
    return explanation;
  }
  if (verified !== undefined) {
    if (verified.dialect !== 'orjson') causes.push(`Valid, but signed in the ${verified.dialect} dialect, not the gateway's default orjson: the sender serializes with ${verified.dialect.startsWith('python') ? "Python's json.dumps" : 'an older orjson'}. A receiver restricted to other dialects rejects it.`);
    else causes.push('Valid: the signature verifies under the orjson dialect.');
    return explanation;
  }
  if (!signature.present) {
    causes.push('The signature header is missing: the request was not signed, or a proxy dropped the header.');
    return explanation;
  }
  if (signature.whitespace) causes.push('The signature header contains whitespace inside the hex: it was wrapped or altered on the way.');
  if (signature.nonHex) causes.push('The signature header contains characters other than hex digits (several headers joined? an encoding applied?).');
  const wanted = [...new Set(keyFindings.map((k) => k.expectedHexDigits))].join(' or ');
  if (!signature.nonHex && !keyFindings.some((k) => k.lengthMatches)) {
    const shorter = keyFindings.every((k) => compact.length < k.expectedHexDigits);
    causes.push(`The signature has ${compact.length} hex digits but the key's modulus needs ${wanted}: ${shorter ? 'it was truncated' : 'it is too long (padded, or made with a larger key)'}.`);
  }

  const rightKey = keyFindings.find((k) => k.wellFormed);
  if (keyFindings.some((k) => k.lengthMatches) && rightKey === undefined) {
    causes.push('No key opens the signature to a well-formed PKCS#1 v1.5 SHA-256 block: it was made with another key (a rotation? check the gateway\'s current public key) or corrupted.');
  }
  if (rightKey !== undefined) {
    // Repair attempt: integers that were floats (1.0 → 1).
    const candidates = floatLikeKeys(text);
    if (candidates.length > 0) {
      try {
        const repairedDoc = parseDocument(withFloats(text, candidates));
        for (const dialect of DIALECTS) {
          if (unrepresentableReason(repairedDoc, dialect) !== undefined) continue;
          const digest = sha256Hex(serializeDocument(repairedDoc, dialect));
          if (sha256Hex(digest) === rightKey.signedHash) {
            explanation.repairedFloats = { keys: candidates, dialect };
            break;
          }
        }
      } catch {
        // the repair is a guess; a failure to parse it says nothing
      }
    }
    const how = explanation.body.prettyPrinted && explanation.body.jsStyleIndent ? 'pretty-printed by JSON.stringify(…, null, 2) (a logger or proxy?)' : 'parsed and serialized again (JSON.parse + JSON.stringify?)';
    if (explanation.repairedFloats !== undefined) {
      causes.push(`The body was ${how}: floats were written as integers (1.0 → 1) at ${explanation.repairedFloats.keys.map((k) => JSON.stringify(k)).join(', ')}. With those restored it verifies (${explanation.repairedFloats.dialect} dialect). Verify the raw bytes as received.`);
    } else {
      causes.push(`Key ${rightKey.index} opens the signature (the key is right), but the signed digest matches no dialect of this body: the body is not the one that was signed.`);
      if (explanation.body.prettyPrinted) causes.push(`The body is pretty-printed: it was ${how}. Whitespace alone does not matter, but re-serializing changes numbers and escapes.`);
      if (explanation.body.escapedNonAscii) causes.push('The body escapes non-ASCII characters as \\uXXXX: if the sender did not, it was re-serialized (ensure_ascii / JSON encoders of proxies).');
      if (explanation.body.zeroFractionFloats === 0) causes.push('The body has no float written with a zero fraction (1.0, 0.0): JSON.parse + JSON.stringify turns those into integers.');
      if (explanation.body.integersBeyond2p53 > 0) causes.push(`The body has ${explanation.body.integersBeyond2p53} integer(s) beyond 2^53, which JavaScript rounds when the body goes through JSON.parse.`);
      if (causes.length === 1 + (signature.whitespace ? 1 : 0)) causes.push('Otherwise the body was changed after signing (tampered, or edited by a middlebox).');
    }
  }
  return explanation;
}

/** Human-readable report of an explanation. */
export function formatExplanation(e: Explanation, keyNames: readonly string[]): string {
  const lines: string[] = [];
  lines.push(e.valid ? 'VALID' : 'INVALID');
  const s = e.signature;
  lines.push(`signature header: ${s.present ? `${s.hexDigits} hex digits${s.uppercase ? ', uppercase' : ''}${s.whitespace ? ', CONTAINS WHITESPACE' : ''}${s.nonHex ? ', CONTAINS NON-HEX CHARACTERS' : ''}` : 'MISSING'}`);
  for (const k of e.keys) {
    const opens = k.wellFormed === undefined ? '' : k.wellFormed ? ', opens the signature (right key)' : ', does not open the signature (wrong key?)';
    lines.push(`key ${k.index} (${keyNames[k.index] ?? 'key'}): RSA ${k.modulusBits}-bit, needs ${k.expectedHexDigits} hex digits: length ${k.lengthMatches ? 'matches' : 'DOES NOT MATCH'}${opens}`);
  }
  if (e.malformed !== undefined) lines.push(`body: NOT STRICT JSON: ${e.malformed}`);
  for (const d of e.dialects) {
    const name = d.dialect.padEnd(13);
    if (d.unrepresentable !== undefined) lines.push(`dialect ${name} cannot represent this body (${d.unrepresentable})`);
    else lines.push(`dialect ${name} sha256 ${d.canonicalSha256}${d.sameAs ? ` (same bytes as ${d.sameAs})` : ''}  ${d.verifiesWith.length ? `VERIFIES with key ${d.verifiesWith.join(', ')}` : 'does not verify'}`);
  }
  const b = e.body;
  lines.push(`body: ${b.prettyPrinted ? 'pretty-printed' : 'compact'}, non-ASCII escaped: ${b.escapedNonAscii ? 'yes' : 'no'}, floats like 1.0: ${b.zeroFractionFloats}, integers beyond 2^53: ${b.integersBeyond2p53}`);
  if (e.expected !== undefined) {
    lines.push(e.expected.identical ? `expected canonical (${e.expected.dialect}): identical` : `expected canonical (${e.expected.dialect}): first difference at byte ${e.expected.offset}\n  ours:     ${e.expected.got}\n  expected: ${e.expected.want}`);
  }
  for (const c of e.causes) lines.push(`CAUSE: ${c}`);
  return lines.join('\n') + '\n';
}
