import type { Request as ExpressRequest } from 'express';
import { describe, expectTypeOf, it } from 'vitest';
import {
  canonicalize,
  createReceiver,
  createVerifier,
  isWebhookError,
  parseJson,
  type AnyWebhookError,
  type DialectName,
  type EventContext,
  type JobCompletedEvent,
  type JsonObjectValue,
  type JsonValue,
  type ReceiverAnswer,
  type VerifiedDelivery,
  type WebhookErrorCode,
} from '../src/index.js';
import express5 from 'express';
import Fastify from 'fastify';
import { createMiddleware, createReceiver as createExpressReceiver } from '../src/express.js';
import { createReceiver as createWebReceiver, createVerifier as createWebVerifier } from '../src/web.js';
import { checkReceiver, type CheckReport, type Verdict } from '../src/testing.js';

describe('public types', () => {
  it('narrows the event on status, and only then', () => {
    const e = {} as JobCompletedEvent;
    // @ts-expect-error output exists only on a success: narrow on status first
    void e.output;
    if (e.status === 'success') expectTypeOf(e.output).toEqualTypeOf<JsonObjectValue>();
    else expectTypeOf(e.error.message).toEqualTypeOf<string>();
    expectTypeOf(e.job_id).toEqualTypeOf<string>();
    expectTypeOf(e.model).toEqualTypeOf<string | null | undefined>();
  });

  it('a typo in a field name does not compile; unknown fields are reached through payload, as JSON', () => {
    const d = {} as VerifiedDelivery;
    // @ts-expect-error no catch-all index: a misspelt field is an error
    void d.event.outptu;
    expectTypeOf(d.payload.some_future_field).toEqualTypeOf<JsonValue | undefined>();
  });

  it('verify is synchronous on Node and async on WebCrypto', () => {
    const v = createVerifier({ publicKey: '' });
    expectTypeOf(v.verify).returns.toEqualTypeOf<VerifiedDelivery>();
    const w = createWebVerifier({ publicKey: '' });
    expectTypeOf(w.verify).returns.toEqualTypeOf<Promise<VerifiedDelivery>>();
    expectTypeOf<VerifiedDelivery['dialect']>().toEqualTypeOf<DialectName>();
  });

  it('publicKey may be a function: sync for the synchronous Node verifier, sync or async for the receivers and jobhook/web', () => {
    createVerifier({ publicKey: () => process.env.KEY! });
    createVerifier({ publicKey: () => ['a', 'b'] });
    // @ts-expect-error createVerifier().verify from 'jobhook' is synchronous: no async key function
    createVerifier({ publicKey: async () => process.env.KEY! });
    createWebVerifier({ publicKey: async () => process.env.KEY! });
    createReceiver({ publicKey: async () => [process.env.KEY!], onEvent: () => undefined });
    createExpressReceiver({ publicKey: async () => process.env.KEY!, onEvent: () => undefined });
    createMiddleware({ publicKey: () => process.env.KEY! });
    createWebReceiver({ publicKey: () => Promise.resolve(process.env.KEY!), onEvent: () => undefined });
  });

  it('the same verbs from every entry, each of its runtime', () => {
    const agnostic = createReceiver({ publicKey: '', onEvent: () => undefined });
    expectTypeOf(agnostic)
      .parameter(0)
      .toEqualTypeOf<{ body: string | Uint8Array; headers: import('../src/index.js').HeadersInput }>();
    expectTypeOf(agnostic).returns.toEqualTypeOf<Promise<ReceiverAnswer>>();
    expectTypeOf<ReceiverAnswer['body']>().toEqualTypeOf<string>();
    expectTypeOf(agnostic.close).returns.toEqualTypeOf<Promise<void>>();
    const web = createWebReceiver({ publicKey: '', onEvent: () => undefined });
    expectTypeOf(web).parameter(0).toEqualTypeOf<Request>();
    expectTypeOf(web).returns.toEqualTypeOf<Promise<Response>>();
    const express = createExpressReceiver({ publicKey: '', onEvent: () => undefined });
    expectTypeOf(express.pending).toBeNumber();
  });

  it('onEvent gets the framework request and a typed context; one handler can serve receivers and the reconciler', () => {
    createWebReceiver({
      publicKey: '',
      onEvent: (_e, ctx) => {
        expectTypeOf(ctx.request).toEqualTypeOf<Request>();
        expectTypeOf(ctx.source).toEqualTypeOf<'webhook'>();
        expectTypeOf(ctx.signal).toEqualTypeOf<AbortSignal>();
      },
    });
    const shared = (_e: JobCompletedEvent, ctx: EventContext) => {
      if (ctx.source === 'webhook') expectTypeOf(ctx.dialect).toEqualTypeOf<DialectName>();
    };
    createReceiver({ publicKey: '', onEvent: shared });
  });

  it('Express requests carry req.webhook once createMiddleware ran', () => {
    const req = {} as ExpressRequest;
    expectTypeOf(req.webhook).toEqualTypeOf<VerifiedDelivery | undefined>();
    createMiddleware({ publicKey: '', errors: 'next' });
    // @ts-expect-error the middleware's choice is errors: 'respond' | 'next'
    createMiddleware({ publicKey: '', errors: 'throw' });
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
        case 'EVENT_FROM_FUTURE':
          return 401;
        case 'STORE_UNAVAILABLE':
        case 'STORE_NOT_MIGRATED':
        case 'RECEIVER_BUSY':
        case 'CLAIM_LOST':
          return 503;
        case 'JOB_SUPERSEDED':
          return 500;
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
    expectTypeOf(parseJson('1', { integers: 'bigint' })).toEqualTypeOf<JsonValue>();
  });

  it('the framework-agnostic receiver is not an Express or Fastify handler; verify() takes raw bytes, not a parsed body', () => {
    const receive = createReceiver({ publicKey: '', onEvent: () => undefined });
    const app = express5();
    // @ts-expect-error { body, headers } in, the answer out: createReceiver from 'jobhook/express' is the Express handler
    app.post('/hook', receive);
    const fastify = Fastify();
    // @ts-expect-error a Fastify route hands the raw body over: receive({ body: req.body, headers: req.headers })
    fastify.post('/hook', receive);
    const verifier = createVerifier({ publicKey: '' });
    const parsed: Record<string, unknown> = { job_id: 'x' };
    // @ts-expect-error a parsed body is not what was signed (at run time: BODY_UNAVAILABLE)
    verifier.verify(parsed, {});
    verifier.verify(new Uint8Array(0), {});
  });

  it('receivers require onEvent, and onError is a callback', () => {
    // @ts-expect-error onEvent is required
    createExpressReceiver({ publicKey: '' });
    // @ts-expect-error onError is the failure callback, not the middleware's 'respond' | 'next'
    createReceiver({ publicKey: '', onEvent: () => undefined, onError: 'next' });
    // A partial logger is fine.
    createReceiver({ publicKey: '', onEvent: () => undefined, log: { error: () => undefined } });
  });

  it('checkReceiver needs a private key, takes effects as a URL or a function, and reports counts per verdict', () => {
    // @ts-expect-error privateKey is required
    void checkReceiver('https://example.com/hook', {});
    // @ts-expect-error a misspelt option does not compile
    void checkReceiver('https://example.com/hook', { privateKey: '', size: [1000] });
    void checkReceiver('https://example.com/hook', {
      privateKey: '',
      effects: 'https://example.com/effects',
    });
    void checkReceiver('https://example.com/hook', {
      privateKey: '',
      effects: async () => ['job-1'],
      sizes: [1000],
      encodings: [],
    });
    expectTypeOf<CheckReport['counts']>().toEqualTypeOf<Record<Verdict, number>>();
    expectTypeOf<CheckReport['ok']>().toEqualTypeOf<boolean>();
  });
});
