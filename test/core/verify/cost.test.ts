/**
 * Where a verification runs is decided from the parsed layout, not the raw size: a
 * small body whose canonical work is large goes to a worker; a genuine delivery stays.
 */
import { describe, expect, it } from 'vitest';
import {
  canonicalWork,
  countFloats,
  LOCAL_WORK_BYTES,
  onWorker,
  placement,
} from '../../../src/lib/core/verify/cost.js';
import { resolveOptions } from '../../../src/lib/core/verify/options.js';
import { payloadText } from '../../helpers/deliveries.js';

const o = resolveOptions({});
const MiB = 1024 * 1024;

describe('verification cost', () => {
  it('counts the float tokens outside strings', () => {
    expect(countFloats('{"a":1.0,"b":[2,3e5,-4.5E-3,"6.5",7],"c\\"8.5":0.0}')).toBe(4);
    expect(countFloats(new TextEncoder().encode('[1,2,"1.5\\\\",2.5]'))).toBe(1);
  });

  it('a genuine delivery stays on the calling thread; small nested or float-heavy bodies go to a worker', () => {
    const genuine = payloadText('job-1');
    expect(canonicalWork(genuine, o)).toBeLessThan(LOCAL_WORK_BYTES / 10);
    expect(onWorker(genuine, o, MiB)).toBe(false);
    const deep = payloadText(
      'job-2',
      `,"deep":[${Array(10)
        .fill('['.repeat(400) + '1.5' + ']'.repeat(400))
        .join(',')}]`,
    );
    expect(deep.length).toBeLessThan(20_000);
    expect(onWorker(deep, o, MiB)).toBe(true);
    const floats = payloadText(
      'job-3',
      `,"v":[${Array.from({ length: 5_000 }, (_, k) => `${k}.25e-9`).join(',')}]`,
    );
    expect(floats.length).toBeLessThan(100_000);
    expect(onWorker(floats, o, MiB)).toBe(true);
    // The same count of floats every dialect writes alike costs one dialect's bytes only.
    const plain = payloadText(
      'job-4',
      `,"v":[${Array.from({ length: 5_000 }, (_, k) => `${k}.25`).join(',')}]`,
    );
    expect(onWorker(plain, o, MiB)).toBe(false);
  });

  it('by size at the threshold, never past maxBodyBytes or with workers off; a body that does not parse stays', () => {
    const big = new Uint8Array(MiB);
    expect(onWorker(big, o, MiB)).toBe(true);
    expect(onWorker(big, o, Infinity)).toBe(false);
    expect(onWorker(new Uint8Array(o.maxBodyBytes + 1), o, MiB)).toBe(false);
    expect(onWorker('['.repeat(5000), o, MiB)).toBe(false);
  });

  it('a body the estimate cannot parse comes back with its error, so it is refused without being parsed again', () => {
    const body = `{"job_id":"x","values":[${'1.5,'.repeat(20_000)}`;
    const where = placement(body, o, MiB);
    expect(where.worker).toBe(false);
    expect(where).toMatchObject({
      refused: expect.objectContaining({ code: 'BODY_MALFORMED', offset: body.length }),
    });
    expect(placement(payloadText('job-5'), o, MiB)).toMatchObject({
      worker: false,
      parsed: expect.anything(),
    });
  });
});
