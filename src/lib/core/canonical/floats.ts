import type { DialectName } from './dialects.js';

/**
 * Writes a binary64 value the way the sender's serializer does (docs/protocol.md, "Canonical JSON").
 * Returns undefined when the dialect cannot write it (±Infinity under orjson,
 * whose parser rejects it, so such a body cannot carry an orjson signature).
 */
export function formatFloat(v: number, dialect: DialectName): string | undefined {
  const python = dialect === 'python' || dialect === 'python-utf8';
  if (!Number.isFinite(v)) {
    if (!python) return undefined;
    return Number.isNaN(v) ? 'NaN' : v > 0 ? 'Infinity' : '-Infinity';
  }
  if (v === 0) return Object.is(v, -0) ? '-0.0' : '0.0';
  // String(v) has the shortest round-trip digits; it uses fixed layout for 1e-7 <= |v| < 1e21,
  // which covers both fixed ranges below, so only the exponent decides.
  const s = String(v);
  const e = decimalExponent(s, v);
  const fixed = python ? e >= -4 && e < 16 : e >= -5 && e <= 15;
  if (fixed) return s.includes('.') ? s : s + '.0';
  const t = v.toExponential();
  const at = t.indexOf('e');
  const mantissa = t.slice(0, at);
  const exp = Number(t.slice(at + 1));
  if (python) {
    const digits = String(Math.abs(exp)).padStart(2, '0');
    return `${mantissa}e${exp < 0 ? '-' : '+'}${digits}`;
  }
  if (exp < 0) return `${mantissa}e${exp}`;
  return dialect === 'orjson' ? `${mantissa}e+${exp}` : `${mantissa}e${exp}`;
}

/** Decimal exponent of the first significant digit of `s` (= String(v), v finite and non-zero). */
function decimalExponent(s: string, v: number): number {
  const at = s.indexOf('e');
  if (at >= 0) return Number(s.slice(at + 1));
  const a = v < 0 ? 1 : 0;
  if (Math.abs(v) >= 1) {
    const dot = s.indexOf('.');
    return (dot < 0 ? s.length : dot) - a - 1;
  }
  // 0.000ddd: count zeros after the point.
  let k = a + 2;
  while (s.charCodeAt(k) === 0x30) k++;
  return -(k - a - 1);
}
