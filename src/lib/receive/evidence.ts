/**
 * What a refusal proves about this receiver's setup, beside its code: evidence an
 * unsigned sender cannot forge, noted by the signed-body flow and read by the diagnosis
 * (diagnose.ts). Only such evidence makes the log recommend a change.
 */
import { getHeader, type HeadersInput } from '../core/verify/headers.js';

/** Refusals of requests whose signature opened with a configured key (a body too large, one that stalled…). */
const afterOpened = new WeakSet<object>();
/** SIGNATURE_MISSING refusals whose signature was found, opening with a configured key, under another header: that header's name. */
const foundUnder = new WeakMap<object, string>();

/** Notes that `err` refused a request whose signature opened; gives `err` back. */
export function openedBefore<E>(err: E): E {
  if (typeof err === 'object' && err !== null) afterOpened.add(err);
  return err;
}

/** Whether `err` refused a request whose signature opened with a configured key. */
export function signatureOpened(err: unknown): boolean {
  return typeof err === 'object' && err !== null && afterOpened.has(err);
}

/** Notes that the request `err` refused carried an opening signature under `header`. */
export function signatureFoundUnder(err: object, header: string): void {
  foundUnder.set(err, header);
}

/** The header another name's signature opened under, for a SIGNATURE_MISSING refusal. */
export function renamedHeader(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null ? foundUnder.get(err) : undefined;
}

/** Headers tried as a renamed signature header, per request (each costs one opening). */
const LOOKALIKES_TRIED = 2;
/** A value that may be a signature: hex, 128–2048 digits (1024- to 8192-bit keys). */
const SIGNATURE_LIKE = /^[ \t]*[0-9a-fA-F]{256,2048}[ \t]*$/;

/**
 * Headers other than `signatureHeader` whose name contains "signature" and whose value
 * looks like a signature (at most LOOKALIKES_TRIED): [name, value].
 */
export function lookalikes(headers: HeadersInput, signatureHeader: string): [string, string][] {
  const names: string[] = [];
  const h = headers as { forEach?: (f: (v: string, k: string) => void) => void; get?: unknown };
  if (typeof h.get === 'function') h.forEach?.((_, k) => names.push(k));
  else names.push(...Object.keys(headers));
  const found: [string, string][] = [];
  for (const name of names) {
    if (found.length === LOOKALIKES_TRIED) break;
    if (!/signature/i.test(name) || name.toLowerCase() === signatureHeader) continue;
    const value = getHeader(headers, name.toLowerCase());
    if (value !== undefined && SIGNATURE_LIKE.test(value)) found.push([name, value]);
  }
  return found;
}
