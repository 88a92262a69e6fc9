/**
 * Why a delivery does or does not verify: findings and causes as data. The wording
 * is the CLI's (src/tools/cli/explain-text.ts).
 *
 * Bounded as the verifier is, and in its order: a body over `maxBodyBytes` is not
 * read; the signature is opened first, and when no key opens it the body is not
 * analysed at all (no canonical form of any body could match it); nesting is
 * limited by `maxDepth`; a canonical form larger than `maxCanonicalBytes` is not
 * built; canonical forms are hashed as they are written, never held.
 */
import { createHash } from 'node:crypto';
import { DIALECTS, type DialectName, isWebhookError, type HeadersInput } from '../../index.js';
import {
  provablySame,
  unrepresentableReason,
  importNodeKey,
  sha256OfHex,
  type ImportedNodeKey,
  type NodePublicKeyInput,
  boundedSink,
  parseBody,
  type CanonicalChunk,
  type ParsedBody,
  resolveOptions,
  type ResolvedOptions,
  hexToBytes,
  getHeader,
} from '../../lib/entries/tools-door.js';
import { base64Signature } from './signature-encoding.js';

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
  /**
   * The header is base64, not hex: its length, its decoded length, and the key that opens
   * the decoded bytes (the signature is right, its encoding is not), if one does.
   */
  base64?: { characters: number; bytes: number; opensWithKey?: number };
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
  | { kind: 'body-too-large'; bytes: number; limit: number }
  | { kind: 'malformed'; message: string }
  | { kind: 'canonical-too-large'; limit: number }
  | { kind: 'valid'; dialect: DialectName }
  | { kind: 'valid-but-whitespace'; keyIndex: number; dialect: DialectName }
  | { kind: 'missing' }
  | { kind: 'whitespace' }
  | { kind: 'non-hex' }
  | { kind: 'base64'; characters: number; bytes: number; opensWithKey?: number }
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

/**
 * Why the body's canonical forms were not examined: no key opens the signature (the
 * verifier stops there too: no body could match it), or the body is over a limit of
 * the verifier, which refuses it without building them.
 */
export type Skipped =
  | { reason: 'no-key-opens' }
  | { reason: 'body-too-large'; bytes: number; limit: number }
  | { reason: 'malformed' }
  | { reason: 'canonical-too-large'; limit: number };

export interface Explanation {
  valid: boolean;
  /** The JSON parse error, if the body is not strict JSON (within `maxDepth`). */
  malformed?: string;
  signature: SignatureFinding;
  keys: KeyFinding[];
  /** Set when the canonical forms were not examined, with the reason. */
  skipped?: Skipped;
  /** Per dialect (empty when `skipped`). */
  dialects: DialectFinding[];
  /** Signs of re-serialization, looked for once a key opens the signature (and the body is within `maxBodyBytes`). */
  body?: BodyFinding;
  /** Keys whose integer values, written as floats (1 → 1.0), make the signature verify. */
  repairedFloats?: { keys: string[]; dialect: DialectName };
  /** First difference from an expected canonical text. */
  expected?: {
    dialect: DialectName;
    identical: boolean;
    offset?: number;
    got?: string;
    want?: string;
    unrepresentable?: string;
  };
  causes: Cause[];
}

export interface ExplainOptions {
  signatureHeader?: string;
  /** The canonical text the sender says it signed, to find the first differing byte. */
  expectedCanonical?: Uint8Array;
  /** Dialect to compare `expectedCanonical` with (default: the one that verifies, else orjson). */
  dialect?: DialectName;
  /** The verifier's limits, with its defaults: 25 MiB, 4 × `maxBodyBytes`, 1,000. */
  maxBodyBytes?: number;
  maxCanonicalBytes?: number;
  maxDepth?: number;
}

/** Counts the matches of a global `re` without building them. */
function count(re: RegExp, text: string, accept: (match: string) => boolean = () => true): number {
  re.lastIndex = 0;
  let n = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) if (accept(m[0])) n++;
  return n;
}

const FLOAT_TOKEN_ZERO = /(?<![\w.])-?\d+\.0+(?![\d])/g;
const BIG_INTEGER = /(?<![\w.])-?\d{16,}(?![\d.eE])/g;

function bodyTraits(text: string): BodyFinding {
  return {
    prettyPrinted: /^[{[]\s*\n\s+"/.test(text),
    jsStyleIndent: /^\{\n {2}"/.test(text) || /^\[\n {2}\S/.test(text),
    escapedNonAscii:
      /\\u(?:00[89a-fA-F][0-9a-fA-F]|0[1-9a-fA-F][0-9a-fA-F]{2}|[1-9a-fA-F][0-9a-fA-F]{3})/.test(text),
    zeroFractionFloats: count(FLOAT_TOKEN_ZERO, text),
    integersBeyond2p53: count(BIG_INTEGER, text, (n) => !Number.isSafeInteger(Number(n))),
  };
}

/** A member whose value is a number: the key as written (escapes kept), where the number ends, whether it has a fraction or exponent. */
interface NumberMember {
  key: string;
  end: number;
  float: boolean;
}

/**
 * The members of a JSON text (already parsed, so well formed) whose value is a
 * number, in one pass: strings are skipped whole, so nothing inside them is taken for
 * a member, and no input makes the scan quadratic.
 */
function* numberMembers(text: string): Generator<NumberMember> {
  const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
  const blanks = (i: number) => {
    while (i < text.length && (text[i] === ' ' || text[i] === '\n' || text[i] === '\r' || text[i] === '\t'))
      i++;
    return i;
  };
  let i = 0;
  while (i < text.length) {
    if (text.charCodeAt(i) !== 0x22) {
      i++;
      continue;
    }
    let end = i + 1;
    while (text.charCodeAt(end) !== 0x22) end += text.charCodeAt(end) === 0x5c ? 2 : 1;
    const key = text.slice(i + 1, end);
    i = blanks(end + 1);
    if (text[i] !== ':') continue;
    i = blanks(i + 1);
    if (text[i] !== '-' && !isDigit(text.charCodeAt(i))) continue;
    let j = i + 1;
    while (isDigit(text.charCodeAt(j))) j++;
    const intEnd = j;
    if (text[j] === '.') for (j++; isDigit(text.charCodeAt(j));) j++;
    if (text[j] === 'e' || text[j] === 'E')
      for (j += text[j + 1] === '+' || text[j + 1] === '-' ? 2 : 1; isDigit(text.charCodeAt(j));) j++;
    yield { key, end: j, float: j !== intEnd };
    i = j;
  }
}

/** Keys whose values are floats somewhere in the body and plain integers elsewhere (1.0 → 1 damage). */
function floatLikeKeys(text: string): string[] {
  const floats = new Set<string>();
  const ints = new Set<string>();
  for (const m of numberMembers(text)) (m.float ? floats : ints).add(m.key);
  const common = [
    'confidence',
    'score',
    'probability',
    'x',
    'y',
    'w',
    'h',
    'left',
    'top',
    'width',
    'height',
    'start',
    'end',
    'duration',
  ];
  return [...ints].filter((k) => floats.has(k) || common.includes(k));
}

/** The text with the integer values of `keys` written as floats (1 → 1.0). */
function withFloats(text: string, keys: string[]): string {
  const set = new Set(keys);
  const parts: string[] = [];
  let from = 0;
  for (const m of numberMembers(text)) {
    if (m.float || !set.has(m.key)) continue;
    parts.push(text.slice(from, m.end), '.0');
    from = m.end;
  }
  parts.push(text.slice(from));
  return parts.join('');
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

/** The header read as base64, and the key that opens what it decodes to, when it is base64. */
function base64Finding(compact: string, keys: readonly ImportedNodeKey[]): SignatureFinding['base64'] {
  const found = base64Signature(compact);
  if (found === undefined) return undefined;
  const opens = keys.findIndex(
    (k) => k.modulusBytes === found.bytes.length && k.open(found.bytes) !== undefined,
  );
  return {
    characters: found.characters,
    bytes: found.bytes.length,
    ...(opens < 0 ? {} : { opensWithKey: opens }),
  };
}

/** Per key: the signature's length against the modulus, and whether the key opens it. */
function keyFindings(
  keys: readonly ImportedNodeKey[],
  signature: SignatureFinding,
  compact: string,
  bytes: Uint8Array | undefined,
): KeyFinding[] {
  return keys.map((k, index) => {
    const finding: KeyFinding = {
      index,
      modulusBits: k.modulusBytes * 8,
      expectedHexDigits: k.modulusBytes * 2,
      lengthMatches: compact.length === k.modulusBytes * 2 && !signature.nonHex,
    };
    if (finding.lengthMatches && bytes !== undefined) {
      const hash = k.open(bytes);
      finding.wellFormed = hash !== undefined;
      if (hash !== undefined) finding.signedHash = Buffer.from(hash).toString('hex');
    }
    return finding;
  });
}

/** Raised by a sink that has seen enough: the rest of the canonical form is not written. */
class Enough {}

/** Streams `dialect`'s canonical form (at most `maxCanonicalBytes`) to `take`; CANONICAL_TOO_LARGE past it. */
function writeCanonical(
  parsed: ParsedBody,
  dialect: DialectName,
  o: ResolvedOptions,
  take: (chunk: CanonicalChunk) => void,
): void {
  try {
    parsed.write(
      dialect,
      boundedSink(o.maxCanonicalBytes, (chunk) => take(chunk)),
    );
  } catch (err) {
    if (!(err instanceof Enough)) throw err;
  }
}

/** Lowercase hex SHA-256 of a dialect's canonical form, hashed as it is written. */
function canonicalDigest(parsed: ParsedBody, dialect: DialectName, o: ResolvedOptions): string {
  const hash = createHash('sha256');
  writeCanonical(parsed, dialect, o, (chunk) => hash.update(chunk));
  return hash.digest('hex');
}

function signedHashOf(digest: string): string {
  return Buffer.from(sha256OfHex(digest)).toString('hex');
}

/** Per dialect: the canonical digest, a repeat of an earlier dialect, the keys whose signed hash it has. */
function dialectFindings(
  parsed: ParsedBody,
  keys: readonly KeyFinding[],
  o: ResolvedOptions,
): DialectFinding[] {
  const findings: DialectFinding[] = [];
  for (const dialect of DIALECTS) {
    const reason = unrepresentableReason(parsed.flags, dialect);
    if (reason !== undefined) {
      findings.push({ dialect, unrepresentable: reason, verifiesWith: [] });
      continue;
    }
    // An earlier dialect the parser's flags prove byte-identical is not written again.
    const proven = findings.find(
      (f) =>
        f.canonicalSha256 !== undefined &&
        f.sameAs === undefined &&
        provablySame(parsed.flags, f.dialect, dialect),
    );
    const digest = proven?.canonicalSha256 ?? canonicalDigest(parsed, dialect, o);
    const sameAs =
      proven?.dialect ??
      findings.find((f) => f.canonicalSha256 === digest && f.sameAs === undefined)?.dialect;
    const signed = signedHashOf(digest);
    const verifiesWith = keys.filter((k) => k.signedHash === signed).map((k) => k.index);
    findings.push({ dialect, canonicalSha256: digest, ...(sameAs ? { sameAs } : {}), verifiesWith });
  }
  return findings;
}

const CONTEXT = 24;

/** Where `dialect`'s canonical form first differs from `want`, with 24 bytes of context either side; stops writing soon after. */
function compareExpected(
  parsed: ParsedBody,
  want: Uint8Array,
  dialect: DialectName,
  o: ResolvedOptions,
): NonNullable<Explanation['expected']> {
  let offset = 0;
  let differs = false;
  const after: Uint8Array[] = [];
  let afterBytes = 0;
  writeCanonical(parsed, dialect, o, (chunk) => {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    let k = 0;
    if (!differs) {
      while (k < bytes.length && offset < want.length && bytes[k] === want[offset]) {
        k++;
        offset++;
      }
      if (k === bytes.length) return;
      differs = true;
    }
    after.push(bytes.slice(k, k + CONTEXT - afterBytes)); // a copy: the engine reuses its chunks
    afterBytes += after[after.length - 1]!.length;
    if (afterBytes >= CONTEXT) throw new Enough();
  });
  if (!differs && offset === want.length) return { dialect, identical: true };
  // Up to `offset` both are the same bytes: the context before it is taken from `want`.
  const before = want.subarray(Math.max(0, offset - CONTEXT), offset);
  const text = (b: Uint8Array) => JSON.stringify(Buffer.from(b).toString('utf8'));
  return {
    dialect,
    identical: false,
    offset,
    got: text(Buffer.concat([before, ...after])),
    want: text(want.subarray(Math.max(0, offset - CONTEXT), offset + CONTEXT)),
  };
}

/** The body parsed within the verifier's limits, or why it cannot be. */
function parseWithin(
  body: Uint8Array | string,
  o: ResolvedOptions,
): ParsedBody | { malformed: string } | { tooLarge: number } {
  try {
    return parseBody(body, o);
  } catch (err) {
    if (isWebhookError(err) && err.code === 'CANONICAL_TOO_LARGE') return { tooLarge: err.limit };
    if (isWebhookError(err) && err.code === 'BODY_MALFORMED') return { malformed: err.message };
    throw err;
  }
}

/** Integers that were floats (1.0 → 1): the dialect in which restoring them makes the signed hash appear. */
function repairFloats(text: string, signedHash: string, o: ResolvedOptions): Explanation['repairedFloats'] {
  const candidates = floatLikeKeys(text);
  if (candidates.length === 0) return undefined;
  const parsed = parseWithin(withFloats(text, candidates), o);
  // the repair is a guess; a failure to parse it, or a form over the limit, says nothing
  if (!('flags' in parsed)) return undefined;
  try {
    for (const dialect of DIALECTS) {
      if (unrepresentableReason(parsed.flags, dialect) !== undefined) continue;
      if (signedHashOf(canonicalDigest(parsed, dialect, o)) === signedHash)
        return { keys: candidates, dialect };
    }
  } catch (err) {
    if (!isWebhookError(err) || err.code !== 'CANONICAL_TOO_LARGE') throw err;
  } finally {
    parsed.dispose();
  }
  return undefined;
}

/** What the signature header and the keys say on their own (no body needed). */
function signatureCauses(e: Explanation): Cause[] {
  const s = e.signature;
  if (!s.present) return [{ kind: 'missing' }];
  const causes: Cause[] = [];
  if (s.whitespace) causes.push({ kind: 'whitespace' });
  if (s.base64 !== undefined) causes.push({ kind: 'base64', ...s.base64 });
  else if (s.nonHex) causes.push({ kind: 'non-hex' });
  if (!s.nonHex && !e.keys.some((k) => k.lengthMatches)) {
    causes.push({
      kind: 'length',
      hexDigits: s.hexDigits,
      wanted: [...new Set(e.keys.map((k) => k.expectedHexDigits))],
      truncated: e.keys.every((k) => s.hexDigits < k.expectedHexDigits),
    });
  }
  if (e.keys.some((k) => k.lengthMatches) && !e.keys.some((k) => k.wellFormed))
    causes.push({ kind: 'wrong-key' });
  return causes;
}

/** The causes, most likely first, once a key opened the signature and the dialects were examined. */
function conclude(e: Explanation, text: string, o: ResolvedOptions): Cause[] {
  const verified = e.dialects.find((d) => d.verifiesWith.length > 0);
  if (verified !== undefined) {
    return [
      e.signature.whitespace
        ? { kind: 'valid-but-whitespace', keyIndex: verified.verifiesWith[0]!, dialect: verified.dialect }
        : { kind: 'valid', dialect: verified.dialect },
    ];
  }
  const causes = signatureCauses(e);
  const rightKey = e.keys.find((k) => k.wellFormed)!;
  const body = e.body!;
  const how: ReserializedHow = body.prettyPrinted && body.jsStyleIndent ? 'pretty-printed' : 'reserialized';
  e.repairedFloats = repairFloats(text, rightKey.signedHash!, o);
  if (e.repairedFloats !== undefined) {
    causes.push({
      kind: 'floats-written-as-integers',
      how,
      keys: e.repairedFloats.keys,
      dialect: e.repairedFloats.dialect,
    });
    return causes;
  }
  const before = causes.length;
  causes.push({ kind: 'body-not-signed', keyIndex: rightKey.index });
  if (body.prettyPrinted) causes.push({ kind: 'pretty-printed', how });
  if (body.escapedNonAscii) causes.push({ kind: 'escaped-non-ascii' });
  if (body.zeroFractionFloats === 0) causes.push({ kind: 'no-zero-fraction-floats' });
  if (body.integersBeyond2p53 > 0) causes.push({ kind: 'big-integers', count: body.integersBeyond2p53 });
  if (causes.length === before + 1) causes.push({ kind: 'changed-after-signing' });
  return causes;
}

/**
 * Diagnoses a delivery that fails (or passes) verification: the signature's shape
 * against each key and whether a key opens it at all; then, only if one does, per
 * dialect the canonical digest, signs of re-serialization, and a repair attempt for
 * floats written as integers. Bounded by the verifier's limits (see the module comment).
 */
export function explainDelivery(
  body: Uint8Array,
  headers: HeadersInput,
  publicKeys: readonly NodePublicKeyInput[],
  options: ExplainOptions = {},
): Explanation {
  const o = resolveOptions({
    signatureHeader: options.signatureHeader,
    maxBodyBytes: options.maxBodyBytes,
    maxCanonicalBytes: options.maxCanonicalBytes,
    maxDepth: options.maxDepth,
    maxAgeSeconds: false,
  });
  const keys = publicKeys.map((k) => importNodeKey(k));
  const { finding: signature, compact } = signatureTraits(getHeader(headers, o.signatureHeader) ?? '');
  const bytes = !signature.nonHex && compact.length % 2 === 0 ? hexToBytes(compact) : undefined;
  if (signature.nonHex) signature.base64 = base64Finding(compact, keys);
  const e: Explanation = {
    valid: false,
    signature,
    keys: keyFindings(keys, signature, compact, bytes),
    dialects: [],
    causes: [],
  };
  if (body.byteLength > o.maxBodyBytes) {
    e.skipped = { reason: 'body-too-large', bytes: body.byteLength, limit: o.maxBodyBytes };
    e.causes = [
      { kind: 'body-too-large', bytes: body.byteLength, limit: o.maxBodyBytes },
      ...signatureCauses(e),
    ];
    return e;
  }
  if (!e.keys.some((k) => k.wellFormed)) {
    e.skipped = { reason: 'no-key-opens' };
    e.causes = signatureCauses(e);
    return e;
  }
  const text = new TextDecoder().decode(body);
  e.body = bodyTraits(text);
  const parsed = parseWithin(body, o);
  if ('malformed' in parsed) {
    e.skipped = { reason: 'malformed' };
    e.malformed = parsed.malformed;
    e.causes = [{ kind: 'malformed', message: parsed.malformed }];
    return e;
  }
  if ('tooLarge' in parsed) {
    e.skipped = { reason: 'canonical-too-large', limit: parsed.tooLarge };
    e.causes = [{ kind: 'canonical-too-large', limit: parsed.tooLarge }];
    return e;
  }
  try {
    e.dialects = dialectFindings(parsed, e.keys, o);
    // The verifier takes the header only as clean hex: whitespace inside makes it invalid even if the digits verify.
    e.valid = e.dialects.some((d) => d.verifiesWith.length > 0) && !signature.whitespace && !signature.nonHex;
    if (options.expectedCanonical !== undefined) {
      const dialect =
        options.dialect ?? e.dialects.find((d) => d.verifiesWith.length > 0)?.dialect ?? 'orjson';
      const reason = unrepresentableReason(parsed.flags, dialect);
      e.expected =
        reason === undefined
          ? compareExpected(parsed, options.expectedCanonical, dialect, o)
          : { dialect, identical: false, unrepresentable: reason };
    }
  } finally {
    parsed.dispose();
  }
  e.causes = conclude(e, text, o);
  return e;
}
