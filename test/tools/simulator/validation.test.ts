import { lookup } from 'node:dns/promises';
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blockedCategory, receiverProblem } from '../../../src/tools/simulator/receiver-guard.js';
import { startGatewaySimulator, type GatewaySimulator } from '../../../src/testing.js';
import { privatePem, publicPem } from '../../helpers/keys.js';
import { createJob, getJob, pollUntilDone, scripted } from '../helpers.js';

// Jobs here never complete (delayMs 60 s; close() cancels them), so nothing is sent anywhere.
let sim: GatewaySimulator;
let strict: GatewaySimulator;
beforeAll(async () => {
  sim = await startGatewaySimulator({ delayMs: 60_000, privateKey: privatePem(2048) });
  strict = await startGatewaySimulator({
    delayMs: 60_000,
    privateKey: privatePem(2048),
    allowLoopbackReceivers: false,
  });
});
afterAll(async () => {
  await Promise.all([sim.close(), strict.close()]);
});

const valid = { model: 'ocr/ocr_async/amazon', input: { file_url: 'https://example.com/a.pdf' } };

async function refused(field: string, request: object, on: GatewaySimulator = sim): Promise<string> {
  const r = await createJob(on, request);
  expect({ status: r.status, field: (r.json.error as { field?: string } | undefined)?.field }).toEqual({
    status: 422,
    field,
  });
  const message = (r.json.error as { message: string }).message;
  expect(message.startsWith(field)).toBe(true);
  return message;
}

describe('authentication', () => {
  it('401 JSON without the bearer token or with a wrong one, on both routes', async () => {
    for (const token of [null, 'wrong', '']) {
      const r = await createJob(sim, valid, token);
      expect(r.status).toBe(401);
      expect(r.json).toMatchObject({ error: { message: expect.stringContaining('Bearer') } });
    }
    expect((await getJob(sim, 'x', null)).status).toBe(401);
    expect((await getJob(sim, 'x', 'wrong')).status).toBe(401);
    const basic = await fetch(sim.jobsUrl, {
      method: 'POST',
      headers: { authorization: `Basic ${sim.token}` },
      body: JSON.stringify(valid),
    });
    expect(basic.status).toBe(401);
    expect(basic.headers.get('www-authenticate')).toBe('Bearer');
  });
});

describe('request validation (422 naming the field)', () => {
  it('accepts a valid request: 202, model null without a 4th segment', async () => {
    const r = await createJob(sim, {
      ...valid,
      fallbacks: ['google', 'microsoft', 'mistral'],
      show_original_response: true,
      user_webhook_parameters: { a: 1 },
    });
    expect(r.status).toBe(202);
    expect(r.json).toMatchObject({ status: 'processing', model: null });
    expect((await createJob(sim, { ...valid, model: 'text/chat/openai/gpt-4o' })).json).toMatchObject({
      model: 'gpt-4o',
    });
  });

  it('model must be feature/subfeature/provider[/model] with non-empty segments', async () => {
    for (const model of ['ocr', 'ocr/ocr_async', 'ocr//amazon', 'ocr/ocr_async/amazon/', 'a/b/c/d/e', '', 42])
      await refused('model', { ...valid, model });
    await refused('model', { input: {} });
  });

  it('input must be an object', async () => {
    for (const input of ['scan.pdf', [], null, 3]) await refused('input', { ...valid, input });
    await refused('input', { model: valid.model });
    await refused('input.simulate', { ...valid, input: { simulate: 'explode' } });
  });

  it('fallbacks: at most 3 strings', async () => {
    expect(await refused('fallbacks', { ...valid, fallbacks: ['a', 'b', 'c', 'd'] })).toMatch(/at most 3/);
    await refused('fallbacks', { ...valid, fallbacks: 'google' });
    await refused('fallbacks', { ...valid, fallbacks: [1] });
  });

  it('show_original_response must be a boolean or null', async () => {
    for (const v of ['true', 1, [], {}])
      await refused('show_original_response', { ...valid, show_original_response: v });
  });

  it('user_webhook_parameters must be an object or null', async () => {
    for (const v of ['order-1', [1], 3, true])
      await refused('user_webhook_parameters', { ...valid, user_webhook_parameters: v });
  });

  it('webhook_receiver: 1 to 2,083 characters', async () => {
    const base = 'http://127.0.0.1:9/hook?pad=';
    const exactly = base + 'x'.repeat(2083 - base.length);
    expect(exactly).toHaveLength(2083);
    expect((await createJob(sim, { ...valid, webhook_receiver: exactly })).status).toBe(202);
    expect(await refused('webhook_receiver', { ...valid, webhook_receiver: exactly + 'x' })).toMatch(
      /2083 characters long, got 2084/,
    );
    await refused('webhook_receiver', { ...valid, webhook_receiver: '' });
    await refused('webhook_receiver', { ...valid, webhook_receiver: 'not a url' });
    await refused('webhook_receiver', { ...valid, webhook_receiver: 42 });
    await refused('webhook_receiver', { ...valid, webhook_receiver: 'ftp://example.com/hook' });
  });

  it('webhook_receiver: plain http only to loopback; https to a public address is fine', async () => {
    expect(
      await refused('webhook_receiver', { ...valid, webhook_receiver: 'http://example.com/hook' }),
    ).toMatch(/must use https/);
    expect(
      await refused('webhook_receiver', { ...valid, webhook_receiver: 'http://203.0.113.10/hook' }),
    ).toMatch(/must use https/);
    expect((await createJob(sim, { ...valid, webhook_receiver: 'https://203.0.113.10/hook' })).status).toBe(
      202,
    );
    for (const loopback of [
      'http://127.0.0.1:1/h',
      'http://[::1]:1/h',
      'http://localhost:1/h',
      'https://127.0.0.1/h',
    ]) {
      expect((await createJob(sim, { ...valid, webhook_receiver: loopback })).status, loopback).toBe(202);
    }
  });

  it('webhook_receiver: private, link-local, loopback and metadata addresses are refused', async () => {
    const cases: Array<[string, RegExp]> = [
      ['https://10.0.0.1/hook', /private address \(10\.0\.0\.1\)/],
      ['https://192.168.1.1/hook', /private address/],
      ['https://172.16.5.4/hook', /private address/],
      ['https://100.64.0.1/hook', /private address/],
      ['https://169.254.169.254/latest/meta-data/', /cloud-metadata address/],
      ['https://169.254.10.10/hook', /link-local address/],
      ['https://0.0.0.0/hook', /unspecified address/],
      ['https://[fd12:3456::1]/hook', /private address/],
      ['https://[fe80::1]/hook', /link-local address/],
      ['https://[::ffff:10.0.0.1]/hook', /private address \(::ffff:a00:1\)/],
      ['https://[::ffff:169.254.169.254]/hook', /cloud-metadata/],
      ['https://metadata.google.internal/computeMetadata/v1/', /cloud-metadata host/],
      ['https://0x7f.1/hook', /loopback address \(127\.0\.0\.1\)/], // the URL parser normalizes odd IPv4 forms
    ];
    for (const [url, why] of cases)
      expect(await refused('webhook_receiver', { ...valid, webhook_receiver: url }, strict), url).toMatch(
        why,
      );
  });

  it('webhook_receiver: loopback refused when allowLoopbackReceivers is false', async () => {
    for (const url of [
      'https://[::1]/hook',
      'https://127.0.0.1/hook',
      'https://localhost/hook',
      'https://LOCALHOST./hook',
      'https://app.localhost/hook',
    ]) {
      expect(await refused('webhook_receiver', { ...valid, webhook_receiver: url }, strict), url).toMatch(
        /loopback/,
      );
    }
    expect(
      await refused('webhook_receiver', { ...valid, webhook_receiver: 'http://127.0.0.1:1/h' }, strict),
    ).toMatch(/must use https$/);
  });

  it('webhook_receiver: a hostname that resolves to a blocked address is refused', async ({ skip }) => {
    // The machine's own name resolves through /etc/hosts, without DNS on the network.
    const name = hostname();
    const addresses = await lookup(name, { all: true }).catch(() => []);
    const blocked = addresses.find((a) => blockedCategory(a.address) !== undefined);
    skip(blocked === undefined, `${name} resolves to no blocked address on this machine`);
    const message = await refused(
      'webhook_receiver',
      { ...valid, webhook_receiver: `https://${name}/hook` },
      strict,
    );
    expect(message).toContain(`which ${name} resolves to`);
  });

  it('malformed JSON → 400, a non-object body → 422 body, unknown job → 404, wrong method → 405', async () => {
    const bad = await createJob(sim, '{"model":');
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({ error: { message: expect.stringContaining('not valid JSON') } });
    await refused('body', []);
    const unknown = await getJob(sim, '00000000-0000-4000-8000-000000000000');
    expect(unknown).toMatchObject({
      status: 404,
      json: { error: { message: expect.stringContaining('No job') } },
    });
    const wrongMethod = await fetch(sim.jobsUrl, { headers: { authorization: `Bearer ${sim.token}` } });
    expect([wrongMethod.status, wrongMethod.headers.get('allow')]).toEqual([405, 'POST']);
    expect(
      (await fetch(`${sim.url}/v2/other`, { headers: { authorization: `Bearer ${sim.token}` } })).status,
    ).toBe(404);
  });
});

/** 202 for each request. */
async function accepted(requests: object[], on: GatewaySimulator = sim): Promise<void> {
  for (const request of requests) {
    const r = await createJob(on, request);
    expect(r.status, JSON.stringify(request).slice(0, 200)).toBe(202);
  }
}

describe("the job request's fields, row by row: every allowed value is accepted, the rest refused with 422 naming the field", () => {
  it('model: string, required, feature/subfeature/provider[/model]', async () => {
    await accepted([
      { ...valid, model: 'ocr/ocr_async/amazon' },
      { ...valid, model: 'text/chat/openai/gpt-4o' },
    ]);
    for (const model of [
      'ocr/ocr_async',
      'a/b/c/d/e',
      '/ocr/ocr_async/amazon',
      null,
      3,
      ['ocr', 'ocr_async', 'amazon'],
      { feature: 'ocr' },
    ])
      await refused('model', { ...valid, model });
    await refused('model', { input: {} });
  });

  it('input: object, required, feature-specific (any object)', async () => {
    await accepted([
      { ...valid, input: {} },
      { ...valid, input: { text: 'Hello' } },
      { ...valid, input: { texts: ['a', 'b'], target_language: 'fr' } },
      { ...valid, input: { file_id: 'f-1', language: 'de' } },
      { ...valid, input: { file: 'https://example.com/a.png', resolution: '512x512', dimensions: 256 } },
    ]);
    for (const input of [null, 'x', 1, true, [{}]]) await refused('input', { ...valid, input });
    await refused('input', { model: valid.model });
  });

  it('provider_params: object or null, optional', async () => {
    await accepted([
      { ...valid, provider_params: {} },
      { ...valid, provider_params: { temperature: 0.2, nested: { a: [1] } } },
      { ...valid, provider_params: null },
      valid,
    ]);
    for (const v of ['x', 1, true, [], [{}]])
      expect(await refused('provider_params', { ...valid, provider_params: v })).toMatch(/object or null/);
  });

  it('fallbacks: array of at most 3 strings, each provider, provider/model or a full model id', async () => {
    await accepted([
      { ...valid, fallbacks: [] },
      { ...valid, fallbacks: ['google'] },
      { ...valid, fallbacks: ['google/gemini-1.5-pro'] },
      { ...valid, fallbacks: ['ocr/ocr_async/google'] },
      { ...valid, fallbacks: ['text/chat/openai/gpt-4o'] },
      { ...valid, fallbacks: ['google', 'microsoft/read-v3', 'ocr/ocr_async/mistral'] },
    ]);
    expect(await refused('fallbacks', { ...valid, fallbacks: ['a', 'b', 'c', 'd'] })).toMatch(
      /at most 3, got 4|at most 3 entries, got 4/,
    );
    for (const v of [null, 'google', {}, [1], [null], ['google', 2]])
      await refused('fallbacks', { ...valid, fallbacks: v });
    for (const [list, at] of [
      [[''], 0],
      [['google', 'a//b'], 1],
      [['/google'], 0],
      [['google/'], 0],
      [['a/b/c/d/e'], 0],
    ] as const) {
      expect(await refused(`fallbacks[${at}]`, { ...valid, fallbacks: list })).toMatch(
        /"provider", "provider\/model" or a model id/,
      );
    }
  });

  it('show_original_response: boolean or null, optional', async () => {
    await accepted([true, false, null].map((v) => ({ ...valid, show_original_response: v })));
    for (const v of ['true', 'false', 0, 1, [], {}])
      expect(await refused('show_original_response', { ...valid, show_original_response: v })).toMatch(
        /boolean or null/,
      );
  });

  it('webhook_receiver: URI string of 1 to 2,083 characters or null, optional', async () => {
    await accepted([
      { ...valid, webhook_receiver: null },
      { ...valid, webhook_receiver: 'https://203.0.113.10/hook' },
    ]);
    for (const v of [42, true, {}, ['https://203.0.113.10/hook']])
      expect(await refused('webhook_receiver', { ...valid, webhook_receiver: v })).toMatch(
        /string \(a URI\) or null/,
      );
    await refused('webhook_receiver', { ...valid, webhook_receiver: '' });
    await refused('webhook_receiver', {
      ...valid,
      webhook_receiver: `https://203.0.113.10/${'x'.repeat(2083)}`,
    });
  });

  it('user_webhook_parameters: object or null, optional', async () => {
    await accepted(
      [{}, { order: 'A-17', n: 1.5, tags: ['ü'] }, null].map((v) => ({
        ...valid,
        user_webhook_parameters: v,
      })),
    );
    for (const v of ['order-1', 1, false, [], [{}]])
      expect(await refused('user_webhook_parameters', { ...valid, user_webhook_parameters: v })).toMatch(
        /object or null/,
      );
  });

  it('null means "not given": no webhook, no original_response, no user_parameters', async () => {
    const quick = await startGatewaySimulator({ delayMs: 0, privateKey: privatePem(2048) });
    const target = await scripted([200]);
    try {
      const noHook = await createJob(quick, {
        ...valid,
        webhook_receiver: null,
        show_original_response: null,
        provider_params: null,
      });
      expect(noHook.status).toBe(202);
      const id = noHook.json.public_id as string;
      await expect(quick.waitForDelivery(id)).rejects.toThrow(/has no webhook_receiver/);
      const done = await pollUntilDone(quick, id);
      expect(done.json).toMatchObject({ status: 'success' });
      expect(done.json).not.toHaveProperty('original_response');

      const hooked = await createJob(quick, {
        ...valid,
        webhook_receiver: `${target.url}/hook`,
        show_original_response: null,
        user_webhook_parameters: null,
      });
      const delivery = await quick.waitForDelivery(hooked.json.public_id as string);
      expect(delivery.outcome).toBe('delivered');
      const payload = JSON.parse(target.hits[0]!.body) as Record<string, unknown>;
      expect(payload).toMatchObject({ event: 'async_job_completed', job_id: hooked.json.public_id });
      expect(payload).not.toHaveProperty('user_parameters');
      expect(payload).not.toHaveProperty('original_response');
    } finally {
      await quick.close();
      await target.close();
    }
  });
});

/** The job resource's `cost` pattern, as the gateway's interface publishes it. */
const COST = /^(?!^[-+.]*$)[+-]?0*\d*\.?\d*$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('the job resource: status, cost, ids and times as the gateway writes them', () => {
  it.each([
    ['ocr/ocr_async/amazon', {}],
    ['audio/speech_to_text_async/deepgram', {}],
    ['image/object_detection/google', {}],
    ['video/label_detection_async/google', {}],
    ['translation/document_translation/deepl', { text: 'Welcome' }],
    ['ocr/ocr_async/amazon', { simulate: 'fail' }],
  ])(
    '%s %j: status, cost as a decimal string, provider, feature, subfeature, public_id, created_at; output or error',
    async (model, input) => {
      const quick = await startGatewaySimulator({ delayMs: 0, privateKey: privatePem(2048) });
      try {
        const created = await createJob(quick, { model, input, show_original_response: true });
        const [feature, subfeature, provider] = model.split('/');
        for (const r of [created, await pollUntilDone(quick, created.json.public_id as string)]) {
          const job = r.json;
          expect(job).toMatchObject({
            feature,
            subfeature,
            provider,
            status: expect.stringMatching(/^(processing|success|fail)$/),
          });
          expect(job.public_id).toMatch(UUID);
          expect(typeof job.cost).toBe('string');
          expect(job.cost).toMatch(COST);
          expect(new Date(job.created_at as string).toISOString()).toBe(job.created_at);
        }
        const done = (await pollUntilDone(quick, created.json.public_id as string)).json;
        if (done.status === 'success') {
          expect(done.output).toEqual(expect.any(Object));
          expect(done).not.toHaveProperty('error');
          expect(Number(done.cost)).toBeGreaterThan(0);
        } else {
          expect(done.error).toMatchObject({ message: expect.any(String) });
          expect(done).not.toHaveProperty('output');
          expect(done.cost).toBe('0');
        }
        expect(done).toHaveProperty('original_response');
      } finally {
        await quick.close();
      }
    },
  );
});

describe('the address guard', () => {
  it.each([
    ['10.255.255.255', 'private'],
    ['172.31.255.255', 'private'],
    ['172.32.0.1', undefined],
    ['192.168.0.1', 'private'],
    ['100.127.255.255', 'private'],
    ['100.128.0.1', undefined],
    ['127.8.9.10', 'loopback'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['169.254.169.254', 'cloud-metadata'],
    ['fd00:ec2::254', 'cloud-metadata'],
    ['169.254.0.1', 'link-local'],
    ['fe80::abcd', 'link-local'],
    ['febf::1', 'link-local'],
    ['fec0::1', undefined],
    ['fc00::1', 'private'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['8.8.8.8', undefined],
    ['2606:4700:4700::1111', undefined],
  ])('%s → %s', (address, category) => {
    expect(blockedCategory(address)).toBe(category);
  });

  it('checks every address a name resolves to', async () => {
    const lookup = async () => ['203.0.113.7', '10.1.2.3'];
    expect(await receiverProblem('https://mixed.example/hook', { lookup })).toMatch(
      /private address \(10\.1\.2\.3, which mixed\.example resolves to\)/,
    );
    expect(
      await receiverProblem('https://public.example/hook', { lookup: async () => ['203.0.113.7'] }),
    ).toBeUndefined();
    expect(
      await receiverProblem('https://nowhere.example/hook', {
        lookup: async () => Promise.reject(Object.assign(new Error('x'), { code: 'ENOTFOUND' })),
      }),
    ).toMatch(/could not be resolved \(nowhere\.example: ENOTFOUND\)/);
  });
});

describe('simulator options', () => {
  it('are checked at start, with errors that name the option', async () => {
    await expect(startGatewaySimulator({ delayMs: -1 })).rejects.toMatchObject({
      name: 'OptionError',
      option: 'delayMs',
    });
    await expect(startGatewaySimulator({ attemptTimeoutMs: 0 })).rejects.toMatchObject({
      option: 'attemptTimeoutMs',
    });
    await expect(startGatewaySimulator({ signatureHeader: 'X Bad' })).rejects.toMatchObject({
      option: 'signatureHeader',
    });
    await expect(startGatewaySimulator({ token: 'has space' })).rejects.toMatchObject({ option: 'token' });
    await expect(startGatewaySimulator({ privateKey: publicPem(2048) })).rejects.toMatchObject({
      option: 'privateKey',
    });
    await expect(startGatewaySimulator({ dialect: 'yaml' as never })).rejects.toThrow(TypeError);
  });
});
