/** The gateway's validation of `POST /v3/universal-ai/async` bodies. */
import { receiverProblem, type ReceiverGuardOptions } from './receiver-guard.js';
import { isWireObject, type WireObject, type WireValue } from '../deliveries/wire.js';

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

/** `a/b/c`: 1 to `max` segments, none empty. */
function segments(value: string, min: number, max: number): string[] | undefined {
  const parts = value.split('/');
  return parts.length >= min && parts.length <= max && parts.every((p) => p.length > 0) ? parts : undefined;
}

/**
 * The request, or the first field the gateway would refuse, as its async-job interface
 * documents the request: `model` and `input` required, at most 3 `fallbacks`, an https
 * `webhook_receiver` of at most 2,083 characters (checked by `receiver-guard.ts`). Optional fields
 * that allow `null` take it as "not given": `provider_params`, `show_original_response`,
 * `webhook_receiver`, `user_webhook_parameters`. `input` is feature-specific: any object.
 */
export async function validateJobRequest(
  body: WireValue,
  guard: ReceiverGuardOptions,
): Promise<JobRequest | FieldProblem> {
  if (!isWireObject(body)) return problem('body', 'must be a JSON object');
  const {
    model,
    input,
    provider_params: providerParams,
    fallbacks,
    show_original_response: showOriginal,
    webhook_receiver: receiver,
    user_webhook_parameters: userParameters,
  } = body;

  if (typeof model !== 'string')
    return problem('model', 'is required: a string "feature/subfeature/provider[/model]"');
  const parts = segments(model, 3, 4);
  if (parts === undefined)
    return problem(
      'model',
      `must be "feature/subfeature/provider[/model]" with non-empty segments, got ${JSON.stringify(model)}`,
    );
  const [feature, subfeature, provider, modelName] = parts as [string, string, string, string | undefined];

  if (!isWireObject(input)) return problem('input', 'is required and must be an object');
  const simulate = input.simulate;
  if (simulate !== undefined && simulate !== 'success' && simulate !== 'fail')
    return problem('input.simulate', `must be "success" or "fail", got ${JSON.stringify(simulate)}`);

  if (providerParams !== undefined && providerParams !== null && !isWireObject(providerParams))
    return problem('provider_params', 'must be an object or null');

  if (fallbacks !== undefined) {
    if (!Array.isArray(fallbacks) || !fallbacks.every((f) => typeof f === 'string'))
      return problem('fallbacks', 'must be an array of strings');
    if (fallbacks.length > MAX_FALLBACKS)
      return problem('fallbacks', `may hold at most ${MAX_FALLBACKS} entries, got ${fallbacks.length}`);
    const bad = (fallbacks as string[]).findIndex((f) => segments(f, 1, 4) === undefined);
    if (bad !== -1) {
      return problem(
        `fallbacks[${bad}]`,
        `must be "provider", "provider/model" or a model id "feature/subfeature/provider[/model]", got ${JSON.stringify(fallbacks[bad])}`,
      );
    }
  }
  if (showOriginal !== undefined && showOriginal !== null && typeof showOriginal !== 'boolean')
    return problem('show_original_response', 'must be a boolean or null');
  if (receiver !== undefined && receiver !== null) {
    const why = await receiverProblem(receiver, guard);
    if (why !== undefined) return problem('webhook_receiver', why);
  }
  if (userParameters !== undefined && userParameters !== null && !isWireObject(userParameters))
    return problem('user_webhook_parameters', 'must be an object or null');

  return {
    feature,
    subfeature,
    provider,
    model: modelName ?? null,
    input,
    fallbacks: (fallbacks ?? []) as string[],
    showOriginalResponse: showOriginal === true,
    ...(typeof receiver === 'string' ? { webhookReceiver: receiver } : {}),
    ...(isWireObject(userParameters) ? { userWebhookParameters: userParameters } : {}),
    outcome: simulate ?? 'success',
  };
}

export function isFieldProblem(value: JobRequest | FieldProblem): value is FieldProblem {
  return 'field' in value;
}
