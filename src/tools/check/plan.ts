/**
 * The deliveries of a check, signed as the gateway signs them: genuine ones that must
 * be accepted, ones that must be refused, and the retries and duplicates the gateway
 * makes. Everything is built before the first one is sent, but the large deliveries,
 * written and signed as their turn comes (`deferred`).
 */
import { randomBytes, randomUUID, type KeyObject } from 'node:crypto';
import { type DialectName, signDelivery, type SignedDelivery } from '../../index.js';
import { VERSION } from '../../lib/entries/tools-door.js';
import { generateTestKeyObjects } from '../deliveries/keys.js';
import { encodedDelivery, tamperedPayload } from '../deliveries/variants.js';
import { WireFloat, isWireObject, writeWire, type WireValue } from '../deliveries/wire.js';
import type { CheckSettings } from './options.js';
import { Random } from './random.js';
import { sizedBody } from './large.js';
import { formatBytes } from './units.js';
import {
  baselineShape,
  documentedShapes,
  jobPayload,
  plainSuccessShape,
  type PayloadParts,
} from './shapes.js';
import type { CaseTag, PlannedCase, SendMode } from './types.js';
import { generatedValues, VALUE_KINDS, type ValueKind } from './values.js';

/** The `User-Agent` of a check's deliveries. */
export const CHECK_USER_AGENT = `jobhook-check/${VERSION}`;
/**
 * The header that names each delivery's case (`refuse/forged`, `genuine/baseline`…): the
 * receiver's logs can tell the deliveries that must be refused, and the warnings they
 * raise, from the gateway's. Like any header it can be forged: it explains, never excuses.
 */
export const CHECK_HEADER = 'X-Jobhook-Check';
/** Decoded size of the Content-Encoding deliveries: past body-parser's 100 kB default. */
const ENCODED_BYTES = 150_000;

const KIND_TITLES: Record<ValueKind, string> = {
  floats: 'generated floats (1.0, -0.0, layout boundaries, subnormals)',
  'big-integers': 'generated integers beyond 2^53',
  escapes: 'generated string escapes (controls, quotes, U+2028, U+007F)',
  unicode: 'generated Unicode text and keys (astral, private use, NFC/NFD)',
};

interface Planner {
  s: CheckSettings;
  r: Random;
}

function sign(p: Planner, body: string, dialect: DialectName, key: KeyObject = p.s.key): SignedDelivery {
  return signDelivery(body, key, { dialect, ...p.s.headers, userAgent: CHECK_USER_AGENT });
}

function hasFloat(v: WireValue | undefined): boolean {
  if (v instanceof WireFloat) return true;
  if (Array.isArray(v)) return v.some(hasFloat);
  return isWireObject(v) && Object.values(v).some(hasFloat);
}

interface CaseSpec {
  id: string;
  group: PlannedCase['group'];
  title: string;
  tags: readonly CaseTag[];
  dialect?: DialectName;
  mode?: SendMode;
}

interface Delivery {
  headers: Record<string, string>;
  body: string | Uint8Array;
}

/** A case that sends `delivery` as `spec.mode` says (with the gateway's retries by default). */
function planned(spec: CaseSpec, jobId: string, delivery: Delivery, decodedBytes?: number): PlannedCase {
  const bytes =
    typeof delivery.body === 'string' ? Buffer.byteLength(delivery.body, 'utf8') : delivery.body.byteLength;
  return {
    ...spec,
    jobId,
    dialect: spec.dialect ?? 'orjson',
    bytes,
    decodedBytes: decodedBytes ?? bytes,
    headers: { ...delivery.headers, [CHECK_HEADER]: spec.id },
    body: delivery.body,
    mode: spec.mode ?? 'policy',
  };
}

/** A genuine delivery of `parts`, written and signed by the sender of `dialect`. */
function genuine(p: Planner, spec: CaseSpec, parts: PayloadParts): PlannedCase {
  const jobId = randomUUID();
  const dialect = spec.dialect ?? 'orjson';
  const body = writeWire(jobPayload(jobId, parts), dialect);
  return planned(spec, jobId, sign(p, body, dialect));
}

function generatedCases(p: Planner): PlannedCase[] {
  const out: PlannedCase[] = [];
  for (const dialect of p.s.dialects) {
    for (const kind of VALUE_KINDS) {
      const spec = {
        id: `genuine/${kind}/${dialect}`,
        group: 'genuine' as const,
        title: `${KIND_TITLES[kind]}, ${dialect}`,
        tags: [kind],
        dialect,
      };
      out.push(genuine(p, spec, { status: 'success', output: generatedValues(kind, p.r, dialect) }));
    }
  }
  return out;
}

function shapeCases(p: Planner): PlannedCase[] {
  return documentedShapes().map((shape, k) => {
    const tags: CaseTag[] = ['shape'];
    if (hasFloat(jobPayload('', shape.parts))) tags.push('floats');
    if (shape.parts.extra !== undefined) tags.push('unknown-fields');
    return genuine(
      p,
      { id: `genuine/shape-${k + 1}`, group: 'genuine', title: shape.title, tags },
      shape.parts,
    );
  });
}

/**
 * A case whose delivery is written and signed when it is first wanted, that is when it
 * is sent: a 25 MB one takes seconds, which a check that stops after its first
 * deliveries never spends. `bytes` is known before (the sizes are exact).
 */
function deferred(spec: CaseSpec, jobId: string, bytes: number, build: () => Delivery): PlannedCase {
  let delivery: Delivery | undefined;
  const built = () => (delivery ??= build());
  const known = {
    ...spec,
    jobId,
    dialect: spec.dialect ?? 'orjson',
    bytes,
    decodedBytes: bytes,
    mode: spec.mode ?? 'policy',
  };
  return Object.defineProperties(known, {
    headers: { enumerable: true, get: () => ({ ...built().headers, [CHECK_HEADER]: spec.id }) },
    body: { enumerable: true, get: () => built().body },
  }) as PlannedCase;
}

/**
 * Writes and signs the deferred deliveries now, all of them: once the check goes past its
 * first deliveries. Written one by one as each is sent, a 25 MB one left the connection
 * of the delivery before it idle for seconds, past the receiver's keep-alive timeout (5 s
 * on Node): its first attempt then met a connection the receiver was closing (EPIPE or
 * ECONNRESET under load), which says nothing about the receiver.
 */
export function buildDeferred(cases: readonly PlannedCase[]): void {
  for (const c of cases) void c.body;
}

function sizeCases(p: Planner): PlannedCase[] {
  return p.s.sizes.map((bytes) => {
    const jobId = randomUUID();
    // Its own generator, seeded now: the values do not depend on when it is written.
    const seed = p.r.uint32();
    const spec: CaseSpec = {
      id: `genuine/size-${bytes}`,
      group: 'genuine',
      title: `${formatBytes(bytes)} OCR result`,
      tags: ['large', 'floats'],
    };
    return deferred(spec, jobId, bytes, () => {
      const body = sizedBody(jobId, bytes, new Random(seed), 'orjson');
      if (body === undefined) throw new RangeError(`no delivery of ${bytes} bytes can be written`); // sizes are checked ≥ 1 kB
      return sign(p, body, 'orjson');
    });
  });
}

function encodedCases(p: Planner): PlannedCase[] {
  return p.s.encodings.map((coding) => {
    const jobId = randomUUID();
    const body = sizedBody(jobId, ENCODED_BYTES, p.r, 'orjson')!;
    const delivery = encodedDelivery(sign(p, body, 'orjson'), coding);
    const title = `${formatBytes(ENCODED_BYTES)} OCR result, Content-Encoding: ${coding}`;
    return planned(
      { id: `genuine/${coding}`, group: 'genuine', title, tags: [coding, 'floats'] },
      jobId,
      delivery,
      ENCODED_BYTES,
    );
  });
}

function withoutHeader(headers: Record<string, string>, name: string): Record<string, string> {
  const rest = { ...headers };
  delete rest[name];
  return rest;
}

/** `X-Service-Signature` → `X-Original-Service-Signature`, as some proxies rename what they pass on. */
function renamed(name: string): string {
  return `X-Original-${name.replace(/^x-/i, '')}`;
}

function refuseCases(p: Planner): PlannedCase[] {
  const { s } = p;
  const name = s.headers.signatureHeader;
  const refuse = (id: string, title: string, jobId: string, delivery: Delivery) =>
    planned({ id: `refuse/${id}`, group: 'refuse', title, tags: [], mode: 'single' }, jobId, delivery);
  const fresh = (finishedAt?: Date) => {
    const jobId = randomUUID();
    const payload = jobPayload(jobId, plainSuccessShape(finishedAt));
    return { jobId, payload, signed: sign(p, writeWire(payload, 'orjson'), 'orjson') };
  };
  const modulusBytes = (s.key.asymmetricKeyDetails?.modulusLength ?? 2048) / 8;
  const other = generateTestKeyObjects({ bits: modulusBytes * 8 }).privateKey;
  const hour = 3_600_000;
  const cases: PlannedCase[] = [];
  const t = fresh();
  const changed = writeWire(tamperedPayload(t.payload), 'orjson');
  cases.push(
    refuse('tampered', 'tampered body (a field changed after signing)', t.jobId, {
      headers: t.signed.headers,
      body: changed,
    }),
  );
  const f = fresh();
  cases.push(
    refuse('forged', 'forged signature (random, of the right length)', f.jobId, {
      ...f.signed,
      headers: { ...f.signed.headers, [name]: randomBytes(modulusBytes).toString('hex') },
    }),
  );
  const o = fresh();
  cases.push(
    refuse('other-key', 'signed with another key', o.jobId, sign(p, o.signed.body, 'orjson', other)),
  );
  const m = fresh();
  cases.push(
    refuse('header-missing', `${name} missing`, m.jobId, {
      ...m.signed,
      headers: withoutHeader(m.signed.headers, name),
    }),
  );
  const n = fresh();
  const moved = { ...withoutHeader(n.signed.headers, name), [renamed(name)]: n.signed.headers[name]! };
  cases.push(
    refuse('header-renamed', `${name} renamed ${renamed(name)}`, n.jobId, { ...n.signed, headers: moved }),
  );
  const d = fresh();
  const twice = `${d.signed.headers[name]!}, ${d.signed.headers[name]!}`;
  cases.push(
    refuse('header-doubled', `${name} twice (merged as "a, b", as proxies and Node do)`, d.jobId, {
      ...d.signed,
      headers: { ...d.signed.headers, [name]: twice },
    }),
  );
  const old = fresh(new Date(Date.now() - s.maxAgeSeconds * 1000 - hour));
  cases.push(
    refuse(
      'too-old',
      `finished ${Math.round(s.maxAgeSeconds / 3600) + 1} h ago (past the replay window)`,
      old.jobId,
      old.signed,
    ),
  );
  const future = fresh(new Date(Date.now() + hour));
  cases.push(refuse('future', 'finished 1 h in the future', future.jobId, future.signed));
  return cases;
}

const RETRY_CASES: ReadonlyArray<readonly [SendMode, string, string]> = [
  ['twice', 'retry/twice', 'the same delivery twice, one after the other'],
  ['concurrent', 'retry/concurrent', 'the same delivery twice at once (a retry racing a slow attempt)'],
  ['dropped', 'retry/dropped', 'an attempt cut once its body was sent (a timeout, a 5xx), then the retries'],
];

function retryCases(p: Planner): PlannedCase[] {
  return RETRY_CASES.map(([mode, id, title]) =>
    genuine(p, { id, group: 'retry', title, tags: [], mode }, plainSuccessShape()),
  );
}

/** Every delivery of a check, in the order they are sent. */
export function planCheck(s: CheckSettings): PlannedCase[] {
  const p: Planner = { s, r: new Random(s.seed) };
  const baseline = genuine(
    p,
    {
      id: 'genuine/baseline',
      group: 'genuine',
      title: 'baseline: a failed job, ASCII, no float',
      tags: ['baseline'],
    },
    baselineShape(),
  );
  return [
    baseline,
    ...generatedCases(p),
    ...shapeCases(p),
    ...sizeCases(p),
    ...encodedCases(p),
    ...refuseCases(p),
    ...retryCases(p),
  ];
}
