/**
 * The header names are one list of the library's (core/verify/options.ts): every tool that
 * renames the headers takes all of them, resolves them alike, and `jobhook check` has a
 * flag for each, so a header added to the library reaches the tools without a change there.
 */
import { describe, expect, it } from 'vitest';
import { OptionError } from '../../../src/lib/base/option-error.js';
import { SIGN_OPTIONS } from '../../../src/lib/runtime/sign.js';
import {
  DEFAULT_HEADER_NAMES,
  HEADER_NAME_OPTIONS,
  VERIFY_OPTIONS,
} from '../../../src/lib/core/verify/options.js';
import { resolveHeaderNames } from '../../../src/tools/deliveries/header-names.js';
import { SIGN_PAYLOAD_OPTIONS } from '../../../src/tools/deliveries/sign-payload.js';
import { SIMULATOR_OPTIONS } from '../../../src/tools/simulator/simulator.js';
import { CHECK_OPTIONS } from '../../../src/tools/check/options.js';
import { fixture } from '../../helpers/paths.js';
import { cli } from '../cli/run.js';

const NAMES = Object.keys(DEFAULT_HEADER_NAMES);

describe('the header names', () => {
  it('are the gateway headers, each an option of its own', () => {
    expect(DEFAULT_HEADER_NAMES).toEqual({
      signatureHeader: 'X-Service-Signature',
      algorithmHeader: 'X-Service-Hash-Algorithm',
      webhookHeader: 'X-Service-Webhook',
    });
    expect(Object.keys(HEADER_NAME_OPTIONS)).toEqual(NAMES);
    // The verifier takes the two it reads.
    expect(NAMES.filter((name) => name in VERIFY_OPTIONS)).toEqual(['signatureHeader', 'algorithmHeader']);
  });

  it('are all taken by the signer, signPayload, the simulator and the check', () => {
    for (const [what, list] of Object.entries({
      SIGN_OPTIONS,
      SIGN_PAYLOAD_OPTIONS,
      SIMULATOR_OPTIONS,
      CHECK_OPTIONS,
    }))
      expect(
        NAMES.filter((name) => !(name in list)),
        what,
      ).toEqual([]);
  });

  it('resolve to the defaults, or to the names given, each checked with an error naming its option', () => {
    expect(resolveHeaderNames({})).toEqual(DEFAULT_HEADER_NAMES);
    expect(resolveHeaderNames({ signatureHeader: 'X-Acme-Signature', webhookHeader: undefined })).toEqual({
      ...DEFAULT_HEADER_NAMES,
      signatureHeader: 'X-Acme-Signature',
    });
    for (const name of NAMES) {
      let thrown: unknown;
      try {
        resolveHeaderNames({ [name]: 'X Bad' });
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(OptionError);
      expect(thrown).toMatchObject({
        option: name,
        message: `${name} must be an HTTP header name; got "X Bad"`,
      });
    }
  });

  it('are each a flag of jobhook check, named in its help and in its errors', async () => {
    const { stdout } = await cli(['check', '--help']);
    const key = fixture('keys', 'test-2048-private.pem');
    for (const name of NAMES) {
      const flag = '--' + name.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase());
      expect(stdout).toContain(`${flag} NAME`);
      expect(await cli(['check', 'http://127.0.0.1:9/hook', '--key', key, flag, 'X Bad'])).toEqual({
        code: 2,
        stdout: '',
        stderr: `jobhook check: ${flag} must be an HTTP header name; got "X Bad"\n`,
      });
    }
  });
});
