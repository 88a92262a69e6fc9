// Tiny benchmark harness: warm up, then timed samples; report the median.
import os from 'node:os';

export function machine() {
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  return `${cpu}, ${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${os.platform()} ${os.arch()}`;
}

/** Runs fn repeatedly; returns { median, samples } in operations per second. */
export function measure(fn, { samples = 9, minSampleMs = 200, warmupMs = 300 } = {}) {
  const until = performance.now() + warmupMs;
  while (performance.now() < until) fn();
  const rates = [];
  for (let s = 0; s < samples; s++) {
    let n = 0;
    const t0 = performance.now();
    let t = t0;
    while (t - t0 < minSampleMs) {
      fn();
      n++;
      t = performance.now();
    }
    rates.push((n * 1000) / (t - t0));
  }
  rates.sort((a, b) => a - b);
  return { median: rates[Math.floor(rates.length / 2)], samples: rates };
}

export async function measureAsync(fn, { samples = 9, minSampleMs = 200, warmupMs = 300 } = {}) {
  const until = performance.now() + warmupMs;
  while (performance.now() < until) await fn();
  const rates = [];
  for (let s = 0; s < samples; s++) {
    let n = 0;
    const t0 = performance.now();
    let t = t0;
    while (t - t0 < minSampleMs) {
      await fn();
      n++;
      t = performance.now();
    }
    rates.push((n * 1000) / (t - t0));
  }
  rates.sort((a, b) => a - b);
  return { median: rates[Math.floor(rates.length / 2)], samples: rates };
}

export function table(rows, columns) {
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c]).length)));
  const line = (cells) => `| ${cells.map((c, i) => String(c).padEnd(widths[i])).join(' | ')} |`;
  return [line(columns), line(widths.map((w) => '-'.repeat(w))), ...rows.map((r) => line(columns.map((c) => r[c])))].join('\n');
}
