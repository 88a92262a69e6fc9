/** Sizes as people write and read them, in decimal units as the gateway's limits are given. */

const UNITS: Record<string, number> = { b: 1, k: 1e3, kb: 1e3, m: 1e6, mb: 1e6, kib: 1024, mib: 1024 * 1024 };

/** `1 kB`, `150 kB`, `1.5 MB`. */
export function formatBytes(bytes: number): string {
  const [value, unit] =
    bytes >= 1e6 ? [bytes / 1e6, 'MB'] : bytes >= 1e3 ? [bytes / 1e3, 'kB'] : [bytes, 'B'];
  return `${Number(value.toPrecision(3))} ${unit}`;
}

/** `150kB` → 150000, `1.5MB` → 1500000, `25MiB` → 26214400, `1000` → 1000; undefined for anything else. */
export function parseBytes(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(text.trim());
  const unit = m === null ? undefined : UNITS[m[2]!.toLowerCase() || 'b'];
  return unit === undefined ? undefined : Math.round(Number(m![1]) * unit);
}
