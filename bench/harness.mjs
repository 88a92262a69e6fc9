// Benchmark harness: contenders run in interleaved rounds in one process (round r times
// every contender once, in turn, on the same input), so a change of machine load hits
// all of them alike. Reported: the median of the per-round figures, their spread, and
// ratios taken round by round (then their median), never across separate blocks.
import os from 'node:os';

export function machine() {
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  return `${cpu}, ${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${os.platform()} ${os.arch()}`;
}

export const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
export const spread = (xs, digits = 2) =>
  `${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}`;

/**
 * Times `contenders` ({ name: fn }, fn sync or async) in `rounds` interleaved rounds after
 * `warmup` rounds; in each round a contender runs `reps` times, or for at least `minMs`.
 * Returns { name: [ms per operation, one per round] }.
 */
export async function interleaved(contenders, { rounds = 15, warmup = 3, reps, minMs = 100 } = {}) {
  const names = Object.keys(contenders);
  const out = Object.fromEntries(names.map((n) => [n, []]));
  for (let r = 0; r < warmup + rounds; r++) {
    for (const name of names) {
      const fn = contenders[name];
      let n = 0;
      const t0 = performance.now();
      let t = t0;
      do {
        const x = fn();
        if (x instanceof Promise) await x;
        n++;
        t = performance.now();
      } while (reps !== undefined ? n < reps : t - t0 < minMs);
      if (r >= warmup) out[name].push((t - t0) / n);
    }
  }
  return out;
}

/** Table rows: per contender the median time, its spread, throughput, and the median per-round ratio to `baseline`. */
export function summarize(times, baseline, { unit = 'µs', bytes } = {}) {
  const scale = unit === 'µs' ? 1000 : 1;
  return Object.entries(times).map(([name, t]) => {
    const ratios = t.map((x, i) => times[baseline][i] / x);
    const row = {
      contender: name,
      [`median ${unit}/op`]: (median(t) * scale).toFixed(unit === 'µs' ? 1 : 1),
      [`spread ${unit}`]: spread(
        t.map((x) => x * scale),
        1,
      ),
    };
    if (bytes !== undefined) row['MB/s'] = (bytes / 1e6 / (median(t) / 1000)).toFixed(1);
    row[`throughput × ${baseline}`] =
      name === baseline ? '1.00' : `${median(ratios).toFixed(2)} (${spread(ratios)})`;
    return row;
  });
}

export function table(rows, columns = Object.keys(rows[0])) {
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c] ?? '').length)));
  const line = (cells) => `| ${cells.map((c, i) => String(c ?? '').padEnd(widths[i])).join(' | ')} |`;
  return [
    line(columns),
    line(widths.map((w) => '-'.repeat(w))),
    ...rows.map((r) => line(columns.map((c) => r[c]))),
  ].join('\n');
}

/** Load average now, for the report. */
export function load() {
  return os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
}

/** A node:http handler that reads the whole body first (as Fastify, Koa or Lambda do), then asks the agnostic receiver. */
export function bufferingHandler(receive) {
  return (req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const answer = await receive({ body: Buffer.concat(chunks), headers: req.headers });
      res.writeHead(answer.status, answer.headers).end(answer.body);
    });
  };
}
