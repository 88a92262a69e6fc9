/**
 * Refusals that point at the receiver's setup are loud by default and never a flood:
 * the first of a kind in an interval at warn/error with its cause and fix, the rest
 * counted into one summary line. Real receivers, real signatures.
 */
import { generateKeyPairSync } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Alerts } from '../../src/lib/base/alerts.js';
import { createReceiver } from '../../src/index.js';
import { createReceiver as createWebReceiver } from '../../src/web.js';
import { jobId, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';
import { recorder } from '../adapters/receiver-table.js';

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe('Alerts', () => {
  it('logs the first of a kind at once, counts the rest, and closes the interval with one summary line', () => {
    vi.useFakeTimers();
    const { lines, log } = recorder();
    const alerts = new Alerts(log as never, 60_000);
    let built = 0;
    for (let k = 0; k < 1000; k++)
      alerts.raise(
        'wrong-key',
        'warn',
        'deliveries refused: wrong key',
        () => (built++, 'first: wrong key, fix it'),
      );
    alerts.raise('other', 'error', 'other things', () => 'first: other');
    expect(lines.warn).toEqual(['first: wrong key, fix it']);
    expect(lines.error).toEqual(['first: other']);
    expect(built).toBe(1);
    vi.advanceTimersByTime(60_000);
    expect(lines.warn).toEqual([
      'first: wrong key, fix it',
      'jobhook: 999 more in the last 60 s: deliveries refused: wrong key',
    ]);
    // The next interval starts over; nothing came again for 'other': no summary for it.
    expect(lines.error).toEqual(['first: other']);
    alerts.raise('wrong-key', 'warn', 'deliveries refused: wrong key', () => 'first again');
    expect(lines.warn.at(-1)).toBe('first again');
  });
});

describe('receivers tell what is wrong with their setup', () => {
  it('receiver.close() writes the summary of the repeats counted so far (a process that stops before the minute keeps them)', async () => {
    const { lines, log } = recorder();
    const receive = createReceiver({
      publicKey: publicPem(2048),
      log: log as never,
      onEvent: () => undefined,
    });
    for (let k = 0; k < 5; k++) {
      const d = signed(jobId('unsigned'));
      for (const name of Object.keys(d.headers))
        if (name.toLowerCase() === 'x-service-signature') delete d.headers[name];
      expect((await receive(d)).status).toBe(401);
    }
    const before = lines.warn.length;
    expect(before).toBeGreaterThan(0);
    expect(lines.warn.join('\n')).not.toMatch(/more in the last/);
    await receive.close();
    expect(lines.warn.slice(before).join('\n')).toMatch(/jobhook: 4 more in the last \d+ s: /);
  });

  it('a wrong public key: one warning by default (console), naming publicKey, for many refused deliveries', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    // Another 2048-bit key: the signature has the right length, no key opens it.
    const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({
      type: 'spki',
      format: 'pem',
    }) as string;
    const receive = createReceiver({ publicKey: other, onEvent: () => undefined });
    for (let k = 0; k < 50; k++) {
      const d = signed(jobId('wrong-key'));
      expect((await receive(d)).status).toBe(401);
    }
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0]![0])).toMatch(
      /401 SIGNATURE_INVALID: no configured key opens its signature.*publicKey is not the key the gateway signs with/,
    );
    await receive.close();
  });

  it('a renamed signature header: the warning names the header it found', async () => {
    const { lines, log } = recorder();
    const receive = createWebReceiver({ publicKey: publicPem(2048), onEvent: () => undefined, log });
    const d = signed(jobId('renamed'));
    const headers = new Headers({
      'content-type': 'application/json',
      'x-acme-signature': d.headers['X-Service-Signature']!,
    });
    const answer = await receive(
      new Request('http://127.0.0.1/hook', { method: 'POST', headers, body: d.body }),
    );
    expect(answer.status).toBe(401);
    expect(lines.warn).toHaveLength(1);
    expect(lines.warn[0]).toMatch(
      /SIGNATURE_MISSING: its signature came under the header "x-acme-signature" and opens with publicKey.*signatureHeader: 'x-acme-signature'/,
    );
  });

  it('a body changed on the way (the key opens the signature): a warning that says so and how to find out', async () => {
    const { lines, log } = recorder();
    const receive = createReceiver({ publicKey: publicPem(2048), onEvent: () => undefined, log });
    const d = signed(jobId('changed'));
    const answer = await receive({ body: JSON.stringify(JSON.parse(d.body)), headers: d.headers });
    expect(answer.status).toBe(401);
    expect(lines.warn.join('\n')).toMatch(
      /key opens its signature, but the body is not what was signed.*jobhook explain/,
    );
    await receive.close();
  });

  it('log: false silences it; forged traffic costs no line either way past the first', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    const error = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    const receive = createReceiver({ publicKey: publicPem(3072), onEvent: () => undefined, log: false });
    for (let k = 0; k < 5; k++) expect((await receive(signed(jobId('silent')))).status).toBe(401);
    expect([warn.mock.calls.length, error.mock.calls.length]).toEqual([0, 0]);
    await receive.close();
  });
});

describe('nothing unsigned chooses what the operator is told', () => {
  it("a real rename is named even when an attacker sends more requests with a header of its own; the attacker's header is never recommended", async () => {
    const { lines, log } = recorder();
    const receive = createReceiver({ publicKey: publicPem(2048), onEvent: () => undefined, log });
    for (let k = 0; k < 10; k++) {
      await receive({
        body: '{}',
        headers: { 'content-type': 'application/json', 'X-Gateway-Signature-V2-Use-This': '1' },
      });
      if (k % 3 === 0) {
        const d = signed(jobId('renamed-by-proxy'));
        await receive({
          body: d.body,
          headers: {
            'content-type': 'application/json',
            'x-acme-signature': d.headers['X-Service-Signature']!,
          },
        });
      }
    }
    const all = [...lines.info, ...lines.warn, ...lines.error].join('\n');
    expect(lines.warn.join('\n')).toMatch(
      /came under the header "x-acme-signature".*signatureHeader: 'x-acme-signature'/,
    );
    expect(all).not.toMatch(/signatureHeader: 'X-Gateway-Signature-V2-Use-This'/i);
    await receive.close();
  });

  it('while genuine deliveries verify, forged signatures and unsigned oversized bodies are counted, not told as a wrong key or a limit to raise', async () => {
    const { lines, log } = recorder();
    const receive = createReceiver({
      publicKey: publicPem(2048),
      onEvent: () => undefined,
      log,
      maxBodyBytes: 100_000,
    });
    expect((await receive(signed(jobId('genuine')))).status).toBe(200);
    const forged = signed(jobId('forged'));
    const wrong = { ...forged.headers, 'X-Service-Signature': 'ab'.repeat(256) };
    for (let k = 0; k < 5; k++)
      expect((await receive({ body: forged.body, headers: wrong })).status).toBe(401);
    const big = { body: 'x'.repeat(200_000), headers: { 'content-type': 'application/json' } };
    expect((await receive(big)).status).toBe(413);
    expect(lines.warn.join('\n')).not.toMatch(/publicKey is not the key|raise maxBodyBytes/);
    expect(lines.info.join('\n')).toMatch(/no configured key opens their signature/);
    await receive.close();
  });
});
