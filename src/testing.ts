/**
 * jobhook test tooling: a local gateway simulator, TEST-ONLY keys and signed
 * payloads, to test a webhook receiver without the real gateway. Node only.
 * @packageDocumentation
 */

export type {
  DeliveryAttempt,
  DeliveryResult,
  DeliverySending,
  GatewaySimulator,
  GatewaySimulatorOptions,
  SimulatedDelivery,
  SimulatedJob,
} from './tools/simulator/simulator.js';
export { SIMULATOR_USER_AGENT } from './tools/simulator/simulator.js';
export type { TestKeyOptions, TestKeyPair } from './tools/deliveries/keys.js';
export type { PayloadInput, SignPayloadOptions } from './tools/deliveries/sign-payload.js';
export type {
  CaseResult,
  CheckAttempt,
  CheckGroup,
  CheckOptions,
  CheckReport,
  EffectsSource,
  SendReport,
  Verdict,
  VerdictCounts,
} from './tools/check/index.js';
export type { AttemptReport } from './tools/deliveries/send.js';

export { startGatewaySimulator } from './tools/simulator/simulator.js';
export { generateTestKeys } from './tools/deliveries/keys.js';
export { signPayload } from './tools/deliveries/sign-payload.js';
export { checkReceiver } from './tools/check/index.js';
export { formatCheckReport } from './tools/check/report.js';
