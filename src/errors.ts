/**
 * jobhook's errors: every `WebhookError` subclass (one per `code`), the gateway client's
 * `GatewayError`s, the guards and the table of HTTP statuses. Runtime-neutral. (The base
 * class, the guard and the code union are in `jobhook` too.)
 * @packageDocumentation
 */
export * from './lib/base/errors.js';
export type { ReceiverErrorCode } from './lib/receive/answers.js';
