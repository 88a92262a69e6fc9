import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkTarget } from '../../src/tools/deliveries/send.js';
import { signDelivery } from '../../src/lib/runtime/sign.js';
import { writeTestKeyPair } from '../../src/tools/deliveries/keys.js';
import { OptionError } from '../../src/lib/base/option-error.js';
import { fixture, ROOT } from '../helpers/paths.js';

function thrown(fn: () => unknown): OptionError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(OptionError);
    expect(err).toBeInstanceOf(TypeError);
    return err as OptionError;
  }
  throw new Error('expected an OptionError');
}

describe('the tooling modules speak the library language', () => {
  it('send names url and allowInsecure, never flags', () => {
    expect(thrown(() => checkTarget('nowhere'))).toMatchObject({
      option: 'url',
      code: 'ERR_JOBHOOK_OPTION',
      message: 'url is not a URL: nowhere',
    });
    expect(thrown(() => checkTarget('ftp://example.com/')).message).toBe(
      'url must be an http:// or https:// URL, got ftp:',
    );
    const insecure = thrown(() => checkTarget('http://example.com/hook'));
    expect(insecure.message).toBe(
      'refusing to send over plain http:// to example.com (not loopback); use https:// or allowInsecure: true',
    );
    expect(insecure.describe((m) => `<${m.option}${m.enable ? '!' : ''}>`)).toBe(
      'refusing to send over plain http:// to example.com (not loopback); use https:// or <allowInsecure!>',
    );
    expect(checkTarget('http://example.com/hook', true).hostname).toBe('example.com');
  });

  it('key files name bits and force', () => {
    const dir = mkdtempSync(join(tmpdir(), 'jobhook-wording-'));
    expect(thrown(() => writeTestKeyPair(dir, { bits: 1024 }))).toMatchObject({
      option: 'bits',
      message: 'bits must be 2048, 3072 or 4096, got 1024',
    });
    writeTestKeyPair(dir);
    expect(thrown(() => writeTestKeyPair(dir))).toMatchObject({
      option: 'force',
      message: `${join(dir, 'test-only-private.pem')} exists; pass force: true to overwrite`,
    });
  });

  it('signing names privateKey', () => {
    const publicPem = readFileSync(fixture('keys', 'test-2048-public.pem'), 'utf8');
    expect(thrown(() => signDelivery('{}', publicPem))).toMatchObject({
      option: 'privateKey',
      message: 'privateKey is not a private key (expected a PEM such as BEGIN PRIVATE KEY)',
    });
  });

  it('no message in the tooling modules names a CLI flag', () => {
    const files = [
      'src/lib/runtime/sign.ts',
      'src/lib/base/option-error.ts',
      // Every module of the tools but the command's own (src/tools/cli/).
      ...readdirSync(join(ROOT, 'src/tools'), { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.ts') && !f.startsWith('cli/'))
        .map((f) => `src/tools/${f}`),
    ];
    expect(files.length).toBeGreaterThan(20);
    const code = (f: string) =>
      readFileSync(join(ROOT, f), 'utf8')
        .replace(/\/\*[\s\S]*?\*\//g, '')
        .replace(/^\s*\/\/.*$/gm, '');
    for (const f of files) expect(code(f), f).not.toMatch(/['"`(\s]--[a-z]/);
  });
});
