/**
 * Why a delivery does or does not verify: findings and causes as data. The wording
 * is the CLI's (src/lib/cli/explain-text.ts).
 */
import { DIALECTS, type DialectName } from './canonical/dialects.js';
import { parseDocument } from './canonical/parse.js';
import { serializeDocument, unrepresentableReason } from './canonical/serialize.js';
import { isWebhookError } from './errors.js';
import { importNodeKey, sha256Hex, sha256OfHex, type ImportedNodeKey, type NodePublicKeyInput } from './crypto/node.js';
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
  /** Indexes of the keys whose signed hash this dialect's canonical form has. */
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

export interface SignatureFinding {
  present: boolean;
  hexDigits: number;
  whitespace: boolean;
  nonHex: boolean;
  uppercase: boolean;
}

export interface BodyFinding {
  prettyPrinted: boolean;
  jsStyleIndent: boolean;
  escapedNonAscii: boolean;
  zeroFractionFloats: number;
  integersBeyond2p53: number;
}

/** A conclusion, most likely first; the CLI words each kind. */
export type Cause =
  | { kind: 'malformed'; message: string }
  | { kind: 'valid'; dialect: DialectName }
  | { kind: 'valid-but-whitespace'; keyIndex: number; dialect: DialectName }
  | { kind: 'missing' }
  | { kind: 'whitespace' }
  | { kind: 'non-hex' }
  | { kind: 'length'; hexDigits: number; wanted: number[]; truncated: boolean }
  | { kind: 'wrong-key' }
  | { kind: 'floats-written-as-integers'; how: ReserializedHow; keys: string[]; dialect: DialectName }
  | { kind: 'body-not-signed'; keyIndex: number }
  | { kind: 'pretty-printed'; how: ReserializedHow }
  | { kind: 'escaped-non-ascii' }
  | { kind: 'no-zero-fraction-floats' }
  | { kind: 'big-integers'; count: number }
  | { kind: 'changed-after-signing' };

/** How a re-serialized body was probably written. */
export type ReserializedHow = 'pretty-printed' | 'reserialized';

export interface Explanation {
  valid: boolean;
  /** The JSON parse error, if the body is not strict JSON. */
  malformed?: string;
  signature: SignatureFinding;
  keys: KeyFinding[];
  dialects: DialectFinding[];
  body: BodyFinding;
  /** Keys whose integer values, written as floats (1 → 1.0), make the signature verify. */
  repairedFloats?: { keys: string[]; dialect: DialectName };
  /** First difference from an expected canonical text. */
  expected?: { dialect: DialectName; identical: boolean; offset?: number; got?: string; want?: string };
  causes: Cause[];
}

export interface ExplainOptions {
  signatureHeader?: string;
  /** The canonical text the sender says it signed, to find the first differing byte. */
  expectedCanonical?: Uint8Array;
  /** Dialect to compare `expectedCanonical` with (default: the one that verifies, else orjson). */
  dialect?: DialectName;
}

const FLOAT_TOKEN_ZERO = /(?<![\w.])-?\d+\.0+(?![\d])/g;

function bodyTraits(text: string): BodyFinding {
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

function signatureTraits(raw: string): { finding: SignatureFinding; compact: string } {
  const trimmed = raw.replace(/^[ \t]+|[ \t]+$/g, '');
  const compact = trimmed.replace(/\s+/g, '');
  return {
    compact,
    finding: {
      present: trimmed.length > 0,
      hexDigits: compact.replace(/[^0-9a-fA-F]/g, '').length,
      whitespace: /\s/.test(trimmed),
      nonHex: /[^0-9a-fA-F\s]/.test(trimmed),
      uppercase: /[A-F]/.test(trimmed),
    },
  };
}

/** Per key: the signature's length against the modulus, and whether the key opens it. */
function keyFindings(keys: readonly ImportedNodeKey[], signature: SignatureFinding, compact: string, bytes: Uint8Array | undefined): KeyFinding[] {
  return keys.map((k, index) => {
    const finding: KeyFinding = { index, modulusBits: k.modulusBytes * 8, expectedHexDigits: k.modulusBytes * 2, lengthMatches: compact.length === k.modulusBytes * 2 && !signature.nonHex };
    if (finding.lengthMatches && bytes !== undefined) {
      const hash = k.open(bytes);
      finding.wellFormed = hash !== undefined;
      if (hash !== undefined) finding.signedHash = Buffer.from(hash).toString('hex');
    }
    return finding;
  });
}

/** Per dialect: the canonical digest, a repeat of an earlier dialect, the keys whose signed hash it has. */
function dialectFindings(doc: ReturnType<typeof parseDocument>, keys: readonly KeyFinding[]): { findings: DialectFinding[]; canonicals: Map<DialectName, string> } {
  const seen = new Map<string, DialectName>();
  const canonicals = new Map<DialectName, string>();
  const findings = DIALECTS.map((dialect): DialectFinding => {
    const reason = unrepresentableReason(doc, dialect);
    if (reason !== undefined) return { dialect, unrepresentable: reason, verifiesWith: [] };
    const canonical = serializeDocument(doc, dialect);
    canonicals.set(dialect, canonical);
    const digest = sha256Hex(canonical);
    const sameAs = seen.get(canonical);
    if (sameAs === undefined) seen.set(canonical, dialect);
    const signed = Buffer.from(sha256OfHex(digest)).toString('hex');
    const verifiesWith = keys.filter((k) => k.signedHash === signed).map((k) => k.index);
    return { dialect, canonicalSha256: digest, ...(sameAs ? { sameAs } : {}), verifiesWith };
  });
  return { findings, canonicals };
}

function compareExpected(canonical: string, expectedCanonical: Uint8Array, dialect: DialectName): NonNullable<Explanation['expected']> {
  const got = Buffer.from(canonical, 'utf8');
  const want = Buffer.from(expectedCanonical);
  let offset = 0;
  while (offset < got.length && offset < want.length && got[offset] === want[offset]) offset++;
  if (offset === got.length && offset === want.length) return { dialect, identical: true };
  const context = (b: Buffer) => JSON.stringify(b.subarray(Math.max(0, offset - 24), offset + 24).toString('utf8'));
  return { dialect, identical: false, offset, got: context(got), want: context(want) };
}

/** Integers that were floats (1.0 → 1): the dialect in which restoring them makes the signed hash appear. */
function repairFloats(text: string, signedHash: string): Explanation['repairedFloats'] {
  const candidates = floatLikeKeys(text);
  if (candidates.length === 0) return undefined;
  try {
    const doc = parseDocument(withFloats(text, candidates));
    for (const dialect of DIALECTS) {
      if (unrepresentableReason(doc, dialect) !== undefined) continue;
      if (Buffer.from(sha256OfHex(sha256Hex(serializeDocument(doc, dialect)))).toString('hex') === signedHash) return { keys: candidates, dialect };
    }
  } catch {
    // the repair is a guess; a failure to parse it says nothing
  }
  return undefined;
}

/** The causes, most likely first, from the findings. */
function conclude(e: Explanation, text: string): Cause[] {
  const causes: Cause[] = [];
  const s = e.signature;
  const verified = e.dialects.find((d) => d.verifiesWith.length > 0);
  if (verified !== undefined) {
    causes.push(s.whitespace ? { kind: 'valid-but-whitespace', keyIndex: verified.verifiesWith[0]!, dialect: verified.dialect } : { kind: 'valid', dialect: verified.dialect });
    return causes;
  }
  if (!s.present) return [{ kind: 'missing' }];
  if (s.whitespace) causes.push({ kind: 'whitespace' });
  if (s.nonHex) causes.push({ kind: 'non-hex' });
  if (!s.nonHex && !e.keys.some((k) => k.lengthMatches)) {
    causes.push({ kind: 'length', hexDigits: s.hexDigits, wanted: [...new Set(e.keys.map((k) => k.expectedHexDigits))], truncated: e.keys.every((k) => s.hexDigits < k.expectedHexDigits) });
  }
  const rightKey = e.keys.find((k) => k.wellFormed);
  if (e.keys.some((k) => k.lengthMatches) && rightKey === undefined) causes.push({ kind: 'wrong-key' });
  if (rightKey === undefined) return causes;
  const how: ReserializedHow = e.body.prettyPrinted && e.body.jsStyleIndent ? 'pretty-printed' : 'reserialized';
  e.repairedFloats = repairFloats(text, rightKey.signedHash!);
  if (e.repairedFloats !== undefined) {
    causes.push({ kind: 'floats-written-as-integers', how, keys: e.repairedFloats.keys, dialect: e.repairedFloats.dialect });
    return causes;
  }
  const before = causes.length;
  causes.push({ kind: 'body-not-signed', keyIndex: rightKey.index });
  if (e.body.prettyPrinted) causes.push({ kind: 'pretty-printed', how });
  if (e.body.escapedNonAscii) causes.push({ kind: 'escaped-non-ascii' });
  if (e.body.zeroFractionFloats === 0) causes.push({ kind: 'no-zero-fraction-floats' });
  if (e.body.integersBeyond2p53 > 0) causes.push({ kind: 'big-integers', count: e.body.integersBeyond2p53 });
  if (causes.length === before + 1) causes.push({ kind: 'changed-after-signing' });
  return causes;
}

/**
 * Diagnoses a delivery that fails (or passes) verification: per-dialect digests,
 * signature shape against each key, whether the key opens the signature at all,
 * signs of re-serialization, and a repair attempt for floats written as integers.
 */
export function explainDelivery(body: Uint8Array, headers: HeadersInput, publicKeys: readonly NodePublicKeyInput[], options: ExplainOptions = {}): Explanation {
  const keys = publicKeys.map((k) => importNodeKey(k));
  const text = new TextDecoder().decode(body);
  const { finding: signature, compact } = signatureTraits(getHeader(headers, (options.signatureHeader ?? DEFAULT_SIGNATURE_HEADER).toLowerCase()) ?? '');
  const bytes = !signature.nonHex && compact.length % 2 === 0 ? hexToBytes(compact) : undefined;
  const e: Explanation = { valid: false, signature, keys: keyFindings(keys, signature, compact, bytes), dialects: [], body: bodyTraits(text), causes: [] };
  let doc;
  try {
    doc = parseDocument(body);
  } catch (err) {
    if (!isWebhookError(err)) throw err;
    e.malformed = err.message;
    e.causes = [{ kind: 'malformed', message: err.message }];
    return e;
  }
  const { findings, canonicals } = dialectFindings(doc, e.keys);
  e.dialects = findings;
  // The verifier takes the header only as clean hex: whitespace inside makes it invalid even if the digits verify.
  e.valid = findings.some((d) => d.verifiesWith.length > 0) && !signature.whitespace && !signature.nonHex;
  if (options.expectedCanonical !== undefined) {
    const dialect = options.dialect ?? findings.find((d) => d.verifiesWith.length > 0)?.dialect ?? 'orjson';
    e.expected = compareExpected(canonicals.get(dialect) ?? '', options.expectedCanonical, dialect);
  }
  e.causes = conclude(e, text);
  return e;
}
