/**
 * What the receiver ran, read from where it shows it: a URL that answers the job ids
 * its handler processed (a JSON array, or one id per line; a job run twice listed
 * twice), or a function. Counting from there catches what the answers hide: a 200
 * for a job that never ran, a duplicate that ran again.
 */
import { readBounded } from '../deliveries/send.js';
import type { EffectsSource } from './options.js';

/**
 * Largest effects answer taken (a few hundred thousand job ids): a larger declared
 * Content-Length is refused unread, and an answer without one (chunked, or delimited by
 * the connection's close) is read as it comes, up to this many bytes and no further.
 */
const MAX_EFFECTS_BYTES = 16 * 1024 * 1024;

/** Job ids from an effects answer: a JSON array of strings, `{ "jobs": [...] }`, or lines. */
export function parseEffects(text: string): string[] {
  const trimmed = text.trim();
  if (trimmed.startsWith('[') || trimmed.startsWith('{')) {
    const value: unknown = JSON.parse(trimmed);
    const list = Array.isArray(value) ? value : (value as { jobs?: unknown }).jobs;
    if (!Array.isArray(list) || list.some((id) => typeof id !== 'string'))
      throw new TypeError('the effects answer is JSON but not an array of job ids (nor { "jobs": [...] })');
    return list as string[];
  }
  return trimmed === ''
    ? []
    : trimmed
        .split(/\r?\n/)
        .map((l) => l.trim())
        .filter((l) => l !== '');
}

async function fetchEffects(url: string, signal: AbortSignal): Promise<string[]> {
  const res = await fetch(url, {
    headers: { accept: 'application/json, text/plain' },
    redirect: 'manual',
    signal,
  });
  const declared = Number(res.headers.get('content-length') ?? '0');
  if (!res.ok || declared > MAX_EFFECTS_BYTES) {
    await res.body?.cancel();
    throw new Error(
      res.ok
        ? `the effects answer is larger than ${MAX_EFFECTS_BYTES} bytes`
        : `the effects URL answered HTTP ${res.status}`,
    );
  }
  const body = await readBounded(res, MAX_EFFECTS_BYTES);
  if (body === undefined) throw new Error(`the effects answer is larger than ${MAX_EFFECTS_BYTES} bytes`);
  return parseEffects(new TextDecoder().decode(body));
}

/** How many times each job id ran, as the source says now. */
export async function readEffects(source: EffectsSource, signal: AbortSignal): Promise<Map<string, number>> {
  const ids = typeof source === 'function' ? await source() : await fetchEffects(String(source), signal);
  const runs = new Map<string, number>();
  for (const id of ids) runs.set(id, (runs.get(id) ?? 0) + 1);
  return runs;
}

/**
 * The runs once every job id of `expected` shows in them, or when `waitMs` have passed
 * (a receiver may run a job after answering: a queue, a background task).
 */
export async function settledEffects(
  source: EffectsSource,
  expected: readonly string[],
  waitMs: number,
  signal: AbortSignal,
): Promise<Map<string, number>> {
  const until = Date.now() + waitMs;
  for (;;) {
    const runs = await readEffects(source, signal);
    if (expected.every((id) => runs.has(id)) || Date.now() >= until) return runs;
    await new Promise((resolve) => setTimeout(resolve, Math.min(200, Math.max(0, until - Date.now()))));
  }
}
