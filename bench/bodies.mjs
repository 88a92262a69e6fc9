// Deterministic OCR-like delivery bodies of a given size, written as the gateway's
// senders write them (float tokens such as 1.0 and 0.0 kept, non-ASCII text, nested boxes).
function rng(seed) {
  let s = seed >>> 0;
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}

const WORDS = [
  'Invoice',
  'total',
  'Müller',
  'straße',
  'n°',
  '1 250,00',
  '€',
  'Zürich',
  'Date',
  '2026-11-21',
  'Société',
  'Générale',
  'TVA',
  'qty',
  'unit',
  '東京',
  'item',
  'price',
];

function float(r) {
  const k = r();
  if (k < 0.15) return '1.0';
  if (k < 0.25) return '0.0';
  return (Math.round(r() * 1e4) / 1e4).toString().replace(/^(\d+)$/, '$1.0');
}

/** Compact JSON text of about `bytes` bytes (UTF-8). */
export function ocrBody(bytes, seed = 42) {
  const r = rng(seed);
  const words = [];
  let size = 400;
  let text = '';
  while (size < bytes) {
    const w = WORDS[Math.floor(r() * WORDS.length)];
    const item = `{"text":${JSON.stringify(w)},"confidence":${float(r)},"bounding_box":{"left":${float(r)},"top":${float(r)},"width":${float(r)},"height":${float(r)}}}`;
    words.push(item);
    text += w + ' ';
    size += Buffer.byteLength(item) + Buffer.byteLength(w) + 2;
  }
  return (
    `{"event":"async_job_completed","job_id":"3f1c2b9e-6a1d-4e9b-9f1e-2a7c5d8e0b41","status":"success","feature":"ocr","subfeature":"ocr",` +
    `"provider":"acme","model":null,"created_at":"2026-11-21T10:00:00Z","finished_at":"2026-11-21T10:00:05Z",` +
    `"output":{"text":${JSON.stringify(text.trim())},"pages":[{"page":1,"words":[${words.join(',')}]}],"confidence":0.97},` +
    `"user_parameters":{"ref":"A-17"}}`
  );
}

const FILE_NAMES = ['page-1.png', 'page-2.png', 'scan.pdf', 'thumbnail.jpg'];

/**
 * Compact JSON text of about `bytes` bytes whose output holds a few multi-MB base64
 * strings (an OCR delivery that returns its rendered pages), deterministic.
 */
export function base64Body(bytes, seed = 7) {
  const r = rng(seed);
  const files = bytes >= 4e6 ? 3 : 1;
  // Envelope and per-file members take about 700 bytes; the rest is base64 (4 chars per 3 bytes).
  const rawPerFile = Math.max(0, Math.floor(((bytes - 700) / files) * 0.75));
  const entries = [];
  for (let f = 0; f < files; f++) {
    const raw = Buffer.allocUnsafe(rawPerFile);
    for (let i = 0; i < rawPerFile; i++) raw[i] = (r() * 256) | 0;
    entries.push(
      `{"name":${JSON.stringify(FILE_NAMES[f % FILE_NAMES.length])},"mime_type":"image/png","size":${rawPerFile},` +
        `"confidence":${float(r)},"data":"${raw.toString('base64')}"}`,
    );
  }
  return (
    `{"event":"async_job_completed","job_id":"7d3e1a2b-4c5d-4e6f-8a9b-0c1d2e3f4a5b","status":"success","feature":"ocr","subfeature":"render",` +
    `"provider":"acme","model":"render-2","created_at":"2026-11-21T10:00:00Z","finished_at":"2026-11-21T10:00:09Z",` +
    `"output":{"files":[${entries.join(',')}],"pages":${files},"text":"Invoice total 1 250,00 €"},` +
    `"user_parameters":{"ref":"B-42"}}`
  );
}
