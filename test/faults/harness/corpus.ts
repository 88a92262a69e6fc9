/**
 * The load of a fault run: distinct jobs, duplicates sent concurrently with their
 * original or later, spread over the receiver instances, each delivery signed with
 * the TEST-ONLY 2048-bit key. Deterministic for a seed, so runs can be compared.
 */
import { createPrivateKey } from 'node:crypto';
import { signDelivery } from '../../../src/index.js';
import { privatePem } from '../../helpers/keys.js';

export type DeliveryKind = 'original' | 'duplicate-concurrent' | 'duplicate-later';

export interface Delivery {
  /** Position in the sending order. */
  seq: number;
  jobId: string;
  kind: DeliveryKind;
  /** Which receiver instance it goes to (all its attempts, like a fixed URL per delivery). */
  instance: number;
  body: string;
  headers: Record<string, string>;
}

export interface Corpus {
  seed: number;
  /** In sending order. */
  deliveries: Delivery[];
  jobIds: string[];
  /** Handler work per job, 1–20 ms. */
  workMs: Map<string, number>;
  /** Jobs that also have a duplicate sent at the same time as the original (candidates for the slow-handler case). */
  concurrentDuplicateJobs: string[];
}

export interface CorpusOptions {
  deliveries: number;
  /** Share of the deliveries that are duplicates (default 0.2). */
  duplicateShare?: number;
  /** Share of the duplicates sent together with their original; the rest later (default 0.5). */
  concurrentShare?: number;
  /** Receiver instances (default 2). */
  instances?: number;
  seed?: number;
  /** The job ids to use (at least `distinctJobs(options)` of them), e.g. jobs created at a gateway simulator; default: random from the seed. */
  jobIds?: string[];
}

/** How many distinct jobs a corpus of these options has. */
export function distinctJobs(options: Pick<CorpusOptions, 'deliveries' | 'duplicateShare'>): number {
  return options.deliveries - Math.round(options.deliveries * (options.duplicateShare ?? 0.2));
}

/** mulberry32: a small seeded PRNG, enough to make the schedule reproducible. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function uuid(rand: () => number): string {
  const hex = Array.from({ length: 32 }, () => Math.floor(rand() * 16).toString(16));
  hex[12] = '4';
  hex[16] = '89ab'[Math.floor(rand() * 4)]!;
  const h = hex.join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/**
 * A gateway-shaped payload (as test/helpers/deliveries.ts, floats kept as 1.0 and 0.0)
 * finished `now`, so a receiver's replay window (24 h) never refuses it.
 */
export function payload(jobId: string, now: Date): string {
  const finished = now.toISOString();
  const created = new Date(now.getTime() - 5000).toISOString();
  return (
    `{"event":"async_job_completed","job_id":${JSON.stringify(jobId)},"status":"success","feature":"ocr","subfeature":"ocr",` +
    `"provider":"acme","model":null,"created_at":"${created}","finished_at":"${finished}",` +
    `"output":{"text":"Grüße","confidence":1.0,"box":{"x":0.0,"y":0.5}}}`
  );
}

function shuffle<T>(items: T[], rand: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

export function buildCorpus(options: CorpusOptions): Corpus {
  const seed = options.seed ?? 10;
  const rand = prng(seed);
  const total = options.deliveries;
  const instances = options.instances ?? 2;
  const duplicates = Math.round(total * (options.duplicateShare ?? 0.2));
  const distinct = total - duplicates;
  const concurrent = Math.round(duplicates * (options.concurrentShare ?? 0.5));
  const generated = Array.from({ length: distinct }, () => uuid(rand));
  if (options.jobIds !== undefined && options.jobIds.length < distinct)
    throw new Error(`buildCorpus: ${distinct} job ids needed, ${options.jobIds.length} given`);
  const jobIds = options.jobIds?.slice(0, distinct) ?? generated;
  const workMs = new Map(jobIds.map((id) => [id, 1 + Math.floor(rand() * 20)]));

  // Which jobs get a duplicate, and of which kind (a job gets at most one).
  const picked = shuffle(
    Array.from({ length: distinct }, (_, i) => i),
    rand,
  ).slice(0, duplicates);
  const concurrentSet = new Set(picked.slice(0, concurrent));
  const laterSet = new Set(picked.slice(concurrent));

  // Sort keys: the originals at 0, 1, 2…; a concurrent duplicate right after its
  // original (both are picked up by the sender in the same turn); a later one 256
  // to distinct/4 positions further on.
  const planned: Array<{ key: number; jobIndex: number; kind: DeliveryKind; instance: number }> = [];
  const maxGap = Math.max(256, Math.floor(distinct / 4));
  for (let i = 0; i < distinct; i++) {
    const instance = i % instances;
    planned.push({ key: i, jobIndex: i, kind: 'original', instance });
    if (concurrentSet.has(i))
      planned.push({
        key: i + 0.5,
        jobIndex: i,
        kind: 'duplicate-concurrent',
        instance: (instance + 1) % instances,
      });
    if (laterSet.has(i)) {
      const gap = 256 + rand() * (maxGap - 256);
      planned.push({
        key: Math.min(i + gap, distinct - 1 + rand()),
        jobIndex: i,
        kind: 'duplicate-later',
        instance: Math.floor(rand() * instances),
      });
    }
  }
  planned.sort((x, y) => x.key - y.key);

  // One signature per job (RSA signing costs ~1 ms: 16,000 jobs ≈ 18 s, done once per suite).
  const key = createPrivateKey(privatePem(2048));
  const now = new Date();
  const signed = jobIds.map((id) => signDelivery(payload(id, now), key));
  const deliveries = planned.map((p, seq) => {
    const s = signed[p.jobIndex]!;
    return {
      seq,
      jobId: jobIds[p.jobIndex]!,
      kind: p.kind,
      instance: p.instance,
      body: s.body,
      headers: s.headers,
    };
  });
  return {
    seed,
    deliveries,
    jobIds,
    workMs,
    concurrentDuplicateJobs: [...concurrentSet].sort((a, b) => a - b).map((i) => jobIds[i]!),
  };
}
