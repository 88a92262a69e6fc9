import type { DialectName } from '../../index.js';
import { float, writeWire, type WireObject } from '../deliveries/wire.js';
import { jobPayload } from './shapes.js';
import type { Random } from './random.js';

const WORDS = [
  'Rechnung',
  'Grüße',
  'Köln',
  'Total',
  '東京都',
  'invoice',
  'Zoë',
  'café',
  '📄',
  'amount',
  '1 234,50 €',
  'page',
];
const LINES_PER_PAGE = 40;
const PADDING_KEY = 'padding';

/** One OCR line; the first of a page is found with certainty at the left edge (1.0 and 0.0: what naive verifiers lose). */
function line(r: Random, first: boolean): WireObject {
  return {
    text: Array.from({ length: r.int(3, 8) }, () => r.pick(WORDS)).join(' '),
    confidence: float(first ? 1 : r.pick([1, 0.5, 0.96875, r.int(80, 99) / 100])),
    bounding_box: {
      left: float(first ? 0 : r.int(0, 64) / 128),
      top: float(r.int(0, 128) / 128),
      width: float(r.pick([0.5, 0.25, 0])),
      height: float(0.0625),
    },
  };
}

function utf8Length(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

/** `items` (JSON texts) written into the first `[]` after `after` in `text`. */
function splice(text: string, after: string, items: readonly string[], separator: string): string {
  const at = text.indexOf('[]', text.indexOf(after));
  return text.slice(0, at + 1) + items.join(separator) + text.slice(at + 1);
}

function skeleton(jobId: string, pages: number, dialect: DialectName): string {
  return writeWire(
    jobPayload(jobId, {
      status: 'success',
      output: { number_of_pages: pages, pages: [], [PADDING_KEY]: '' },
    }),
    dialect,
  );
}

/** Lines written once and drawn from: writing 25 MB line by line would take seconds. */
const POOL_SIZE = 256;

/** Pages of lines as JSON texts, as many lines as fit in `room` bytes. */
function pages(r: Random, room: number, dialect: DialectName, separator: string): string[] {
  const firsts = Array.from({ length: POOL_SIZE / 4 }, () => writeWire(line(r, true), dialect));
  const others = Array.from({ length: POOL_SIZE }, () => writeWire(line(r, false), dialect));
  const out: string[] = [];
  let used = 0;
  for (let n = 1; ; n++) {
    const wrapper = writeWire({ page: n, lines: [] }, dialect);
    const lines: string[] = [];
    let size = utf8Length(wrapper) + (n > 1 ? separator.length : 0);
    while (lines.length < LINES_PER_PAGE) {
      const next = r.pick(lines.length === 0 ? firsts : others);
      const grown = size + utf8Length(next) + (lines.length > 0 ? separator.length : 0);
      if (used + grown > room) break;
      lines.push(next);
      size = grown;
    }
    if (lines.length > 0) out.push(splice(wrapper, '"lines"', lines, separator));
    if (lines.length < LINES_PER_PAGE) return out;
    used += size;
  }
}

/**
 * A success payload written by the sender of `dialect`, exactly `bytes` long (UTF-8);
 * undefined when even its smallest form is longer.
 */
export function sizedBody(jobId: string, bytes: number, r: Random, dialect: DialectName): string | undefined {
  const separator = dialect === 'python' || dialect === 'python-utf8' ? ', ' : ',';
  const written = pages(r, bytes - utf8Length(skeleton(jobId, 1e9, dialect)), dialect, separator);
  const body = splice(skeleton(jobId, written.length, dialect), '"pages"', written, separator);
  const missing = bytes - utf8Length(body);
  if (missing < 0) return undefined;
  const at = body.indexOf('""', body.lastIndexOf(`"${PADDING_KEY}"`));
  return body.slice(0, at + 1) + ' '.repeat(missing) + body.slice(at + 1);
}
