/**
 * The `async_job_completed` payloads a check sends: both statuses and every output shape
 * the gateway documents (the simulator's `outputs.ts` writes them per feature), `null`
 * where the gateway may write it (`model`), and the unknown fields it may add (a receiver
 * must keep them).
 */
import { simulatedFailure, simulatedResult } from '../simulator/outputs.js';
import { decimal } from '../simulator/simulator.js';
import { float, type WireObject, type WireValue } from '../deliveries/wire.js';

/** The parts of a payload that vary; the rest is filled in by {@link jobPayload}. */
export interface PayloadParts {
  status: 'success' | 'fail';
  feature?: string;
  subfeature?: string;
  provider?: string;
  /** `null` as the gateway writes it when the caller named no model. */
  model?: string | null;
  output?: WireObject;
  error?: WireObject;
  /** Present only when the caller asked for it; may be `null`. */
  originalResponse?: WireValue;
  userParameters?: WireObject;
  /** Fields the gateway may add one day: a receiver must keep them, never refuse them. */
  extra?: WireObject;
  /** `finished_at` (default: now). */
  finishedAt?: Date;
}

/** Seconds, as the gateway writes times: ISO 8601 in UTC. */
function iso(at: Date): string {
  return at.toISOString();
}

/** The payload, fields in the order the gateway writes them. */
export function jobPayload(jobId: string, p: PayloadParts): WireObject {
  const finished = p.finishedAt ?? new Date();
  return {
    event: 'async_job_completed',
    job_id: jobId,
    status: p.status,
    feature: p.feature ?? 'ocr',
    subfeature: p.subfeature ?? 'ocr_async',
    provider: p.provider ?? 'amazon',
    model: p.model === undefined ? null : p.model,
    created_at: iso(new Date(finished.getTime() - 4_000)),
    finished_at: iso(finished),
    output: p.status === 'success' ? (p.output ?? {}) : undefined,
    error: p.status === 'fail' ? (p.error ?? { message: 'failed' }) : undefined,
    original_response: p.originalResponse,
    user_parameters: p.userParameters,
    ...p.extra,
  };
}

/** One documented shape: a title for the report and its parts. */
export interface Shape {
  title: string;
  parts: PayloadParts;
}

const FEATURES: ReadonlyArray<readonly [string, string, string, string]> = [
  ['ocr', 'ocr_async', 'amazon', 'OCR'],
  ['audio', 'speech_to_text_async', 'deepgram', 'speech to text'],
  ['image', 'object_detection', 'google', 'image'],
  ['video', 'label_detection_async', 'google', 'video'],
  ['translation', 'document_translation', 'deepl', 'translation'],
];

/** A failed job of the baseline: ASCII, no float, no optional field. */
export function baselineShape(): PayloadParts {
  return {
    status: 'fail',
    feature: 'ocr',
    provider: 'amazon',
    model: 'textract',
    error: { message: 'amazon: the provider could not process the input' },
  };
}

/**
 * A success as plain as the baseline (ASCII, integers, no float), for the deliveries
 * that test one thing else: a refusal or a retry is then not blurred by a verifier
 * that loses floats.
 */
export function plainSuccessShape(finishedAt?: Date): PayloadParts {
  return {
    status: 'success',
    feature: 'ocr',
    provider: 'amazon',
    model: 'textract',
    output: { text: 'Invoice 42, total 1234 EUR', number_of_pages: 1 },
    finishedAt,
  };
}

function successShapes(): Shape[] {
  return FEATURES.map(([feature, subfeature, provider, name]) => ({
    title: `success, ${name} output`,
    parts: {
      status: 'success',
      feature,
      subfeature,
      provider,
      output: simulatedResult(feature, { text: 'Welcome to Tokyo' }).output,
    },
  }));
}

/** Every documented status and output shape, optional fields and nulls included. */
export function documentedShapes(): Shape[] {
  const ocr = simulatedResult('ocr', {});
  const failure = simulatedFailure('amazon');
  const params = {
    order_id: '42',
    tenant: null,
    retries: 0,
    weight: float(1),
    tags: ['a', 'ü'],
    nested: { empty: {}, list: [] },
  };
  return [
    ...successShapes(),
    { title: 'success, empty output {}', parts: { status: 'success', output: {} } },
    { title: 'success, model null', parts: { status: 'success', model: null, output: ocr.output } },
    {
      title: 'success, original_response and user_parameters (nulls, a float)',
      parts: {
        status: 'success',
        model: 'textract',
        output: ocr.output,
        originalResponse: ocr.originalResponse,
        userParameters: params,
      },
    },
    {
      title: 'success, original_response null',
      parts: { status: 'success', output: ocr.output, originalResponse: null },
    },
    {
      title: 'fail, error.message',
      parts: { status: 'fail', model: null, error: { message: failure.message } },
    },
    {
      title: 'fail, original_response and user_parameters',
      parts: {
        status: 'fail',
        error: { message: failure.message },
        originalResponse: failure.originalResponse,
        userParameters: { order_id: '43' },
      },
    },
    {
      title: 'success, fields the gateway may add (cost, public_id, nested unknown)',
      parts: {
        status: 'success',
        output: ocr.output,
        extra: {
          cost: decimal(ocr.cost),
          public_id: 'p-1',
          webhook_version: 2,
          usage: { pages: 1, seconds: float(0.25), region: null },
        },
      },
    },
  ];
}
