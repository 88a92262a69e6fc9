/**
 * Made-up but realistic job results, per feature, shaped like the providers' own:
 * floats that are integral (`1.0` confidences, `0.0` box edges), non-ASCII text
 * (including a character outside the BMP), nesting. Exactly what breaks a receiver
 * that verifies `JSON.stringify(JSON.parse(body))`.
 */
import { float, type WireObject, type WireValue } from '../deliveries/wire.js';

export interface SimulatedResult {
  output: WireObject;
  /** What the provider itself answered (sent when `show_original_response` is true). */
  originalResponse: WireValue;
  /** Price of the job in USD. */
  cost: number;
}

const OCR_LINES = [
  {
    text: 'Rechnung Nr. 42 — Grüße aus Köln',
    confidence: float(1),
    percent: float(100),
    box: [0, 0, 0.5, 0.0625],
  },
  {
    text: '東京都千代田区 📄 Total: 1 234,50 €',
    confidence: float(0.97),
    percent: float(97),
    box: [0.125, 0.5, 0.75, 0.0625],
  },
] as const;

function box([left, top, width, height]: readonly number[]): WireObject {
  return { left: float(left!), top: float(top!), width: float(width!), height: float(height!) };
}

function ocr(): SimulatedResult {
  return {
    output: {
      text: OCR_LINES.map((l) => l.text).join('\n'),
      number_of_pages: 1,
      confidence: float(1),
      pages: [
        {
          page: 1,
          lines: OCR_LINES.map((l) => ({ text: l.text, confidence: l.confidence, bounding_box: box(l.box) })),
        },
      ],
    },
    originalResponse: {
      DocumentMetadata: { Pages: 1 },
      Blocks: OCR_LINES.map((l, k) => ({
        BlockType: 'LINE',
        Id: `line-${k + 1}`,
        Text: l.text,
        Confidence: l.percent,
        Geometry: { BoundingBox: box(l.box) },
      })),
    },
    cost: 0.0015,
  };
}

function speech(): SimulatedResult {
  const entries = [
    {
      segment: 'Bonjour, ici Zoë.',
      speaker: 1,
      start_time: float(0),
      end_time: float(1.5),
      confidence: float(1),
    },
    {
      segment: 'Grüß Gott — 你好!',
      speaker: 2,
      start_time: float(1.5),
      end_time: float(3),
      confidence: float(0.875),
    },
  ];
  return {
    output: { text: entries.map((e) => e.segment).join(' '), diarization: { total_speakers: 2, entries } },
    originalResponse: {
      results: {
        channels: [
          {
            alternatives: [
              { transcript: entries.map((e) => e.segment).join(' '), confidence: float(0.9375) },
            ],
          },
        ],
      },
      metadata: { duration: float(3) },
    },
    cost: 0.012,
  };
}

function image(): SimulatedResult {
  const items = [
    {
      label: 'Straße',
      confidence: float(1),
      x_min: float(0),
      y_min: float(0),
      x_max: float(0.5),
      y_max: float(1),
    },
    {
      label: 'café ☕',
      confidence: float(0.75),
      x_min: float(0.5),
      y_min: float(0.25),
      x_max: float(1),
      y_max: float(0.75),
    },
  ];
  return {
    output: { items },
    originalResponse: {
      Labels: items.map((i) => ({ Name: i.label, Confidence: float(i.confidence.value * 100) })),
    },
    cost: 0.001,
  };
}

function video(): SimulatedResult {
  const labels = [
    { name: 'Zürich tram 🚋', confidence: float(1), timestamps: [{ start: float(0), end: float(2.5) }] },
  ];
  return {
    output: { labels },
    originalResponse: { annotationResults: [{ segmentLabelAnnotations: labels }] },
    cost: 0.1,
  };
}

function text(input: WireObject): SimulatedResult {
  const source = typeof input.text === 'string' ? input.text : 'Welcome to Tokyo';
  return {
    output: { text: `「${source}」 — traduit: Bienvenue à Tōkyō 🗼`, score: float(1) },
    originalResponse: {
      translations: [{ detected_source_language: 'EN', text: 'Bienvenue à Tōkyō 🗼' }],
      usage: { characters: source.length },
    },
    cost: 0.00002,
  };
}

/** The successful result of a job of `feature`, shaped like the gateway's for that feature. */
export function simulatedResult(feature: string, input: WireObject): SimulatedResult {
  switch (feature) {
    case 'ocr':
      return ocr();
    case 'audio':
      return speech();
    case 'image':
      return image();
    case 'video':
      return video();
    default:
      return text(input);
  }
}

/** The provider's error answer for a failed job. */
export function simulatedFailure(provider: string): { message: string; originalResponse: WireValue } {
  const message = `${provider}: the provider could not process the input (simulated failure: input.simulate is "fail")`;
  return {
    message,
    originalResponse: { error: { code: 'InvalidParameterException', message, retryable: false } },
  };
}
