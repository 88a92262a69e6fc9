import { describe, expectTypeOf, it } from 'vitest';
import {
  canonicalize,
  createVerifier,
  isWebhookError,
  parseJson,
  type AnyWebhookError,
  type DialectName,
  type JobCompletedEvent,
  type VerifiedDelivery,
  type WebhookErrorCode,
} from '../src/index.js';
import { webhookReceiver } from '../src/express.js';
import { createWebhookHandler, createWebVerifier } from '../src/web.js';

describe('public types', () => {
  it('narrows the event on status', () => {
    const e = {} as JobCompletedEvent;
    if (e.status === 'success') expectTypeOf(e.output).toEqualTypeOf<import('../src/lib/event.js').JsonObjectValue>();
    else expectTypeOf(e.error.message).toEqualTypeOf<string>();
    expectTypeOf(e.job_id).toEqualTypeOf<string>();
    expectTypeOf(e.model).toEqualTypeOf<string | null | undefined>();
  });

  it('verify is synchronous on Node and async on WebCrypto', () => {
    const v = createVerifier({ publicKey: '' });
    expectTypeOf(v.verify).returns.toEqualTypeOf<VerifiedDelivery>();
    const w = createWebVerifier({ publicKey: '' });
    expectTypeOf(w.verify).returns.toEqualTypeOf<Promise<VerifiedDelivery>>();
    expectTypeOf<VerifiedDelivery['dialect']>().toEqualTypeOf<DialectName>();
  });

  it('error codes switch exhaustively', () => {
    const err = {} as AnyWebhookError;
    const status = (code: WebhookErrorCode): number => {
      switch (code) {
        case 'BODY_TOO_LARGE':
        case 'CANONICAL_TOO_LARGE':
          return 413;
        case 'BODY_TIMEOUT':
          return 408;
        case 'ENCODING_UNSUPPORTED':
          return 415;
        case 'BODY_MALFORMED':
        case 'CANONICAL_UNREPRESENTABLE':
        case 'PAYLOAD_INVALID':
          return 400;
        case 'BODY_UNAVAILABLE':
          return 500;
        case 'SIGNATURE_MISSING':
        case 'SIGNATURE_MALFORMED':
        case 'ALGORITHM_UNSUPPORTED':
        case 'SIGNATURE_INVALID':
        case 'EVENT_TOO_OLD':
          return 401;
        case 'STORE_UNAVAILABLE':
          return 503;
        default: {
          const never: never = code;
          return never;
        }
      }
    };
    expectTypeOf(status(err.code)).toBeNumber();
    const u: unknown = err;
    if (isWebhookError(u)) expectTypeOf(u.code).toEqualTypeOf<WebhookErrorCode>();
  });

  it('takes bytes or text, never a parsed object or a Buffer-only type', () => {
    expectTypeOf(canonicalize).parameter(0).toEqualTypeOf<string | Uint8Array>();
    // @ts-expect-error a parsed object is not a body
    canonicalize({ a: 1 });
    // @ts-expect-error unknown dialect
    canonicalize('{}', { dialect: 'json5' });
    expectTypeOf(parseJson('1', { integers: 'bigint' })).toEqualTypeOf<import('../src/index.js').JsonValue>();
  });

  it('receivers require onEvent', () => {
    // @ts-expect-error onEvent is required
    webhookReceiver({ publicKey: '' });
    expectTypeOf(createWebhookHandler({ publicKey: '', onEvent: () => undefined })).toEqualTypeOf<(request: Request) => Promise<Response>>();
  });
});
