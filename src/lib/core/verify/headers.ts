/**
 * Request headers as the different runtimes give them: a Fetch `Headers`, Node's
 * `IncomingHttpHeaders` (lower-case names, string or string[] values), or any
 * plain object with names in any case.
 */
export type HeadersInput =
  | { get(name: string): string | null }
  | { readonly [name: string]: string | readonly string[] | number | undefined };

/** Reads one header case-insensitively; several values are joined with ", " as HTTP does. */
export function getHeader(headers: HeadersInput | undefined | null, lowerName: string): string | undefined {
  if (headers === undefined || headers === null) return undefined;
  if (typeof (headers as { get?: unknown }).get === 'function') {
    return (headers as { get(name: string): string | null }).get(lowerName) ?? undefined;
  }
  const record = headers as Record<string, unknown>;
  let value = record[lowerName];
  if (value === undefined) {
    for (const name of Object.keys(record)) {
      if (name.toLowerCase() === lowerName) {
        value = record[name];
        break;
      }
    }
  }
  if (value === undefined || value === null) return undefined;
  if (Array.isArray(value)) return value.length === 0 ? undefined : value.map(String).join(', ');
  return String(value);
}
