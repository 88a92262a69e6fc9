/**
 * Lazy keys: `publicKey` given as a function (sync or async) is called at the first
 * delivery, not at construction, and its result kept. A call that fails fails that
 * delivery with a 5xx (the gateway retries) and a log line, and is made again next time.
 */
import express from 'express';
import supertest from 'supertest';
import { describe, expect, it } from 'vitest';
import {
  createReceiver as createAgnosticReceiver,
  createVerifier,
  verifyWebhook,
} from '../../../src/index.js';
import { createMiddleware, createReceiver as createExpressReceiver } from '../../../src/express.js';
import {
  createReceiver as createWebReceiver,
  createVerifier as createWebVerifier,
} from '../../../src/web.js';
import { jobId, signed } from '../../helpers/deliveries.js';
import { publicPem } from '../../helpers/keys.js';
import { recorder } from '../../adapters/receiver-table.js';

type Answer = { status: number; body: { status?: string; error?: { code: string } } };
type Post = (d: { body: string; headers: Record<string, string> }) => Promise<Answer>;
type KeyFn = () => unknown;
interface Made {
  post: Post;
  close: () => Promise<void>;
}

const pem = publicPem(2048);
const other = publicPem(3072);

/** One receiver per entry, built with `publicKey` as given and a recording logger. */
const receivers: Array<[string, (publicKey: KeyFn, log: object, extra?: object) => Made]> = [
  [
    'jobhook createReceiver',
    (publicKey, log, extra) => {
      const r = createAgnosticReceiver({
        publicKey: publicKey as () => string,
        onEvent: () => undefined,
        log,
        ...extra,
      });
      return {
        post: async (d) => {
          const a = await r(d);
          return { status: a.status, body: JSON.parse(a.body) as Answer['body'] };
        },
        close: () => r.close(),
      };
    },
  ],
  [
    'jobhook/express createReceiver',
    (publicKey, log, extra) => {
      const r = createExpressReceiver({
        publicKey: publicKey as () => string,
        onEvent: () => undefined,
        log,
        ...extra,
      });
      const app = express().post('/hook', r);
      return { post: (d) => postTo(app, d), close: () => r.close() };
    },
  ],
  [
    'jobhook/express createMiddleware',
    (publicKey, log) => {
      const app = express().post(
        '/hook',
        createMiddleware({ publicKey: publicKey as () => string, log }),
        (req, res) => void res.json({ status: 'processed', job_id: req.webhook!.jobId }),
      );
      return { post: (d) => postTo(app, d), close: async () => undefined };
    },
  ],
  [
    'jobhook/web createReceiver',
    (publicKey, log) => {
      const r = createWebReceiver({ publicKey: publicKey as () => string, onEvent: () => undefined, log });
      return {
        post: async (d) => {
          const res = await r(
            new Request('http://127.0.0.1/hook', { method: 'POST', headers: d.headers, body: d.body }),
          );
          return { status: res.status, body: (await res.json()) as Answer['body'] };
        },
        close: () => r.close(),
      };
    },
  ],
];

async function postTo(
  app: express.Express,
  d: { body: string; headers: Record<string, string> },
): Promise<Answer> {
  const r = await supertest(app)
    .post('/hook')
    .set(d.headers)
    .serialize((x: unknown) => x as string)
    .send(d.body);
  return { status: r.status, body: r.body as Answer['body'] };
}

describe.each(receivers)('%s: publicKey as a function', (_name, make) => {
  it.each([
    ['a sync function', (key: unknown) => () => key],
    ['an async function', (key: unknown) => async () => key],
    ['a function returning a list (rotation)', (key: unknown) => () => [other, key]],
  ])(
    '%s: not called at construction, called once at the first delivery, its keys kept',
    async (_label, wrap) => {
      let calls = 0;
      const inner = wrap(pem);
      const made = make(() => (calls++, inner()), {});
      expect(calls).toBe(0);
      const d = signed(jobId('lazy'));
      // Concurrent first deliveries share one call.
      const [first, second] = await Promise.all([made.post(d), made.post(signed(jobId('lazy')))]);
      expect([first.status, second.status]).toEqual([200, 200]);
      expect(first.body.status).toBe('processed');
      const again = await made.post(d);
      expect(again.status).toBe(200);
      if (_name !== 'jobhook/express createMiddleware') expect(again.body.status).toBe('duplicate');
      const tampered = await made.post({ ...d, body: d.body.replace('Grüße', 'Grüsse') });
      expect({ status: tampered.status, code: tampered.body.error?.code }).toEqual({
        status: 401,
        code: 'SIGNATURE_INVALID',
      });
      expect(calls).toBe(1);
      await made.close();
    },
  );

  const failures: Array<[string, (attempt: number) => unknown, RegExp]> = [
    [
      'throws',
      () => {
        throw new Error('vault sealed');
      },
      /vault sealed/,
    ],
    ['rejects', () => Promise.reject(new Error('secret manager timed out')), /secret manager timed out/],
    ['gives nothing', () => undefined, /publicKey is required/],
    ['gives an unusable key', () => 'not a key', /publicKey\[0\]: publicKey is a string starting/],
  ];
  it.each(failures)(
    'a key function that %s: that delivery is answered 500 and logged; the next one calls it again',
    async (_label, failing, reason) => {
      let calls = 0;
      const { lines, log } = recorder();
      const made = make(() => (++calls === 1 ? failing(calls) : pem), log);
      const d = signed(jobId('lazy-fail'));
      const failed = await made.post(d);
      // 5xx: the gateway retries; nothing about the key in the answer.
      expect(failed.status).toBe(500);
      expect(JSON.stringify(failed.body)).not.toMatch(reason);
      const logged = lines.error.join('\n');
      expect(logged).toMatch(/the publicKey function did not give a usable key/);
      expect(logged).toMatch(reason);
      // Asked again, and kept once it works.
      const retried = await made.post(d);
      expect(retried.status).toBe(200);
      expect(retried.body.status).toBe('processed');
      expect((await made.post(signed(jobId('lazy-fail')))).status).toBe(200);
      expect(calls).toBe(2);
      await made.close();
    },
  );
});

describe('the verification workers get the resolved key', () => {
  it.each([
    ['jobhook createReceiver', receivers[0]![1]],
    ['jobhook/express createReceiver', receivers[1]![1]],
  ])('%s: a large delivery with an async key function verifies on a worker', async (_name, make) => {
    const made = make(async () => pem, {}, { workerThresholdBytes: 1024 });
    const d = signed(jobId('lazy-worker'), `,"blob":"${'x'.repeat(64 * 1024)}"`);
    const first = await made.post(d);
    expect(first).toMatchObject({ status: 200, body: { status: 'processed' } });
    expect((await made.post(d)).body.status).toBe('duplicate');
    await made.close();
  });
});

describe("createVerifier from 'jobhook' (synchronous verify)", () => {
  it('takes a sync key function, called at the first verify and kept', () => {
    let calls = 0;
    const verifier = createVerifier({ publicKey: () => (calls++, pem) });
    expect(calls).toBe(0);
    const d = signed(jobId('sync'));
    expect(verifier.verify(d.body, d.headers).jobId).toBe(JSON.parse(d.body).job_id);
    expect(verifier.verify(d.body, d.headers).dialect).toBe('orjson');
    expect(calls).toBe(1);
    const options = { publicKey: () => pem };
    expect(verifyWebhook(d.body, d.headers, options).jobId).toBe(JSON.parse(d.body).job_id);
  });

  it('refuses an async key function at construction with a TypeError that names the alternatives', () => {
    const make = () => createVerifier({ publicKey: (async () => pem) as unknown as () => string });
    expect(make).toThrow(TypeError);
    expect(make).toThrow(
      /publicKey is an async function, but createVerifier\(\)\.verify from 'jobhook' is synchronous.*createReceiver.*'jobhook\/web'/,
    );
  });

  it('refuses a key function that returns a promise at its first call, and asks again next time', () => {
    let calls = 0;
    const verifier = createVerifier({
      publicKey: (() => (++calls === 1 ? Promise.resolve(pem) : pem)) as () => string,
    });
    const d = signed(jobId('sync'));
    expect(() => verifier.verify(d.body, d.headers)).toThrow(TypeError);
    expect(() =>
      createVerifier({ publicKey: (() => Promise.resolve(pem)) as unknown as () => string }).verify(
        d.body,
        d.headers,
      ),
    ).toThrow(/publicKey returned a promise, but createVerifier\(\)\.verify from 'jobhook' is synchronous/);
    expect(verifier.verify(d.body, d.headers).dialect).toBe('orjson');
    expect(calls).toBe(2);
  });

  it('a throwing key function fails that verify with an error that is not a WebhookError, and is called again', () => {
    let calls = 0;
    const verifier = createVerifier({
      publicKey: () => {
        if (++calls === 1) throw new Error('no key yet');
        return pem;
      },
    });
    const d = signed(jobId('sync'));
    expect(() => verifier.verify(d.body, d.headers)).toThrow(
      /the publicKey function did not give a usable key: no key yet/,
    );
    expect(verifier.verify(d.body, d.headers).dialect).toBe('orjson');
  });

  it('keys that are not functions are still checked at construction', () => {
    expect(() => createVerifier({ publicKey: 'hello' })).toThrow(
      /publicKey\[0\]: publicKey is a string starting "hello"|publicKey is a string starting "hello"/,
    );
    expect(() =>
      createAgnosticReceiver({ publicKey: undefined as unknown as string, onEvent: () => undefined }),
    ).toThrow(/publicKey is required/);
    expect(() => createWebReceiver({ publicKey: [], onEvent: () => undefined })).toThrow(/at least one key/);
  });
});

describe("createVerifier from 'jobhook/web'", () => {
  it('takes an async key function, called once at the first verify', async () => {
    let calls = 0;
    const verifier = createWebVerifier({ publicKey: async () => (calls++, pem) });
    expect(calls).toBe(0);
    const d = signed(jobId('web'));
    const [a, b] = await Promise.all([
      verifier.verify(d.body, d.headers),
      verifier.verify(d.body, d.headers),
    ]);
    expect([a.dialect, b.dialect]).toEqual(['orjson', 'orjson']);
    expect(calls).toBe(1);
  });

  it('a rejecting key function rejects that verify (not a WebhookError) and is called again', async () => {
    let calls = 0;
    const verifier = createWebVerifier({
      publicKey: async () => (++calls === 1 ? Promise.reject(new Error('not yet')) : pem),
    });
    const d = signed(jobId('web'));
    await expect(verifier.verify(d.body, d.headers)).rejects.toThrow(
      /the publicKey function did not give a usable key: not yet/,
    );
    expect((await verifier.verify(d.body, d.headers)).dialect).toBe('orjson');
    expect(calls).toBe(2);
  });
});
