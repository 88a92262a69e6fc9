/**
 * What a sender chose is bounded (≤ 200 characters) and escaped (C0, C1, bidi) in every
 * log line and answer; an answer never echoes the body.
 */
import { describe, expect, it } from 'vitest';
import { createReceiver } from '../../src/index.js';
import { jobId, payloadText, signed } from '../helpers/deliveries.js';
import { publicPem } from '../helpers/keys.js';
import { recorder } from '../adapters/receiver-table.js';

const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
const hostile = '\u009b31m\u0085\u202e' + 'A'.repeat(12_000);

describe('attacker text in logs and answers', () => {
  it('an unsigned algorithm header of 12,000 characters with C1 and bidi controls: every line and answer short and escaped', async () => {
    const { lines, log } = recorder();
    const receive = createReceiver({ publicKey: publicPem(2048), onEvent: () => undefined, log });
    const d = signed(jobId('alg'));
    const answer = await receive({
      body: d.body,
      headers: { ...d.headers, 'X-Service-Hash-Algorithm': hostile },
    });
    expect(answer.status).toBe(401);
    const all = [...lines.debug, ...lines.info, ...lines.warn, ...lines.error, answer.body];
    expect(all.join('')).toMatch(/ALGORITHM_UNSUPPORTED/);
    for (const line of all) {
      expect(line).not.toMatch(UNSAFE);
      expect(line.length).toBeLessThan(1_000);
    }
    await receive.close();
  });

  it('a signed body with a 10 MB duplicate key: the 400 answer and the log line quote at most 200 characters of it', async () => {
    const { lines, log } = recorder();
    const receive = createReceiver({
      publicKey: publicPem(2048),
      onEvent: () => undefined,
      log,
      maxBodyBytes: 25 * 1024 * 1024,
    });
    const key = '\u202e' + 'k'.repeat(10_000_000);
    const body = payloadText(jobId('dup'), `,"${key}":1,"${key}":2`);
    // A captured signature (it opens) with the hostile body.
    const answer = await receive({ body, headers: signed(jobId('captured')).headers });
    expect(JSON.parse(answer.body).error.code).toBe('BODY_MALFORMED');
    expect(answer.body.length).toBeLessThan(1_000);
    expect(answer.body).not.toMatch(UNSAFE);
    const told = [...lines.debug, ...lines.info, ...lines.warn].filter((l) => l.includes('duplicate key'));
    expect(told.length).toBeGreaterThan(0);
    for (const line of told) {
      expect(line.length).toBeLessThan(1_000);
      expect(line).not.toMatch(UNSAFE);
    }
    await receive.close();
  });
});
