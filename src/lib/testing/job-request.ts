/** The gateway's validation of `POST /v3/universal-ai/async` bodies. */
import { receiverProblem, type ReceiverGuardOptions } from './receiver-guard.js';
import { isWireObject, type WireObject, type WireValue } from './wire.js';

/** How a job ends: `input.simulate` chooses (default `success`). */
export type SimulatedOutcome = 'success' | 'fail';

export interface JobRequest {
  feature: string;
  subfeature: string;
  provider: string;
  model: string | null;
  input: WireObject;
  fallbacks: string[];
  showOriginalResponse: boolean;
  webhookReceiver?: string;
  userWebhookParameters?: WireObject;
  outcome: SimulatedOutcome;
}

/** A 422: the request field at fault and why. */
export interface FieldProblem {
  field: string;
  message: string;
}

export const MAX_FALLBACKS = 3;

function problem(field: string, message: string): FieldProblem {
  return { field, message: `${field} ${message}` };
}

/** The request, or the first field the gateway would refuse. */
export async function validateJobRequest(body: WireValue, guard: ReceiverGuardOptions): Promise<JobRequest | FieldProblem> {
  if (!isWireObject(body)) return problem('body', 'must be a JSON object');
  const { model, input, fallbacks, show_original_response: showOriginal, webhook_receiver: receiver, user_webhook_parameters: userParameters } = body;

  if (typeof model !== 'string') return problem('model', 'is required: a string "feature/subfeature/provider[/model]"');
  const segments = model.split('/');
  if (segments.length < 3 || segments.length > 4 || segments.some((s) => s.length === 0)) {
    return problem('model', `must be "feature/subfeature/provider[/model]" with non-empty segments, got ${JSON.stringify(model)}`);
  }
  const [feature, subfeature, provider, modelName] = segments as [string, string, string, string | undefined];

  if (!isWireObject(input)) return problem('input', 'is required and must be an object');
  const simulate = input.simulate;
  if (simulate !== undefined && simulate !== 'success' && simulate !== 'fail') return problem('input.simulate', `must be "success" or "fail", got ${JSON.stringify(simulate)}`);

  if (fallbacks !== undefined) {
    if (!Array.isArray(fallbacks) || !fallbacks.every((f) => typeof f === 'string')) return problem('fallbacks', 'must be an array of strings');
    if (fallbacks.length > MAX_FALLBACKS) return problem('fallbacks', `may hold at most ${MAX_FALLBACKS} entries, got ${fallbacks.length}`);
  }
  if (showOriginal !== undefined && typeof showOriginal !== 'boolean') return problem('show_original_response', 'must be a boolean');
  if (receiver !== undefined) {
    const why = await receiverProblem(receiver, guard);
    if (why !== undefined) return problem('webhook_receiver', why);
  }
  if (userParameters !== undefined && !isWireObject(userParameters)) return problem('user_webhook_parameters', 'must be an object');

  return {
    feature,
    subfeature,
    provider,
    model: modelName ?? null,
    input,
    fallbacks: (fallbacks ?? []) as string[],
    showOriginalResponse: showOriginal === true,
    ...(receiver !== undefined ? { webhookReceiver: receiver as string } : {}),
    ...(userParameters !== undefined ? { userWebhookParameters: userParameters } : {}),
    outcome: simulate ?? 'success',
  };
}

export function isFieldProblem(value: JobRequest | FieldProblem): value is FieldProblem {
  return 'field' in value;
}
