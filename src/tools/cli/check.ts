import { readFile } from 'node:fs/promises';
import type { parseArgs } from 'node:util';
import { assertDialect, DEFAULT_HEADER_NAMES, type HeaderNameOptions } from '../../lib/entries/tools-door.js';
import { DIALECTS } from '../../index.js';
import { checkReceiver, type CheckAttempt, type CheckOptions } from '../check/index.js';
import { formatCheckReport } from '../check/report.js';
import { parseBytes } from '../check/units.js';
import { SENT_ENCODINGS, isSentEncoding } from '../deliveries/variants.js';
import { flagOf, numberFlag, parseFlags, withFlags } from './common.js';
import { describeAttempt } from './attempt.js';
import { escapeControls, jsonText, UsageError, type CliIo } from './io.js';
import { RETRY_FLAGS } from './keygen-sign-send.js';

/** The header name options the library lets a tool rename (`signatureHeader`, …), each a flag here. */
const HEADER_NAMES = Object.keys(DEFAULT_HEADER_NAMES) as Array<keyof HeaderNameOptions>;

export const CHECK_HELP = `Usage: jobhook check URL --key PRIVATE.pem [options]

Proves a deployed receiver takes everything the gateway sends, before the gateway
finds out. Signs deliveries as the gateway does with a key the receiver trusts (a
TEST-ONLY pair from jobhook keygen: configure the receiver under test with its
public key), sends them to URL and prints what the gateway would see:
  - genuine deliveries, which must be accepted (2xx): every sender dialect with
    generated floats, big integers, escapes and Unicode; every job status and
    output shape; sizes up to 25 MB; gzip and br (when the receiver takes them);
  - deliveries that must be refused (4xx, never 2xx): tampered, forged, another
    key, signature header missing, renamed or doubled, too old, future-dated;
  - the same delivery twice, twice at once, and after an attempt cut short,
    with the gateway's retry policy;
and a scorecard: passed, lost, accepted forged, ran twice, slow, no answer.
Each attempt is printed on stderr as it ends (the scorecard goes to stdout). When
the first 3 deliveries all fail the same way (nothing answers at URL, every
answer a 5xx), the check stops there with that verdict (within 15 s with the
default retry policy). Each delivery carries X-Jobhook-Check: its case
(refuse/forged, ...) and User-Agent: jobhook-check/VERSION: the receiver logs a
warning for each of the 8 that must be refused; those headers tell them apart.
Plain http:// is refused for hosts other than loopback unless --allow-http.

Options:
  --key FILE             RSA private key (PEM) whose public key the receiver trusts
  --effects URL          where the receiver lists the job ids its handler ran (a JSON
                         array, or one id per line; a job run twice listed twice):
                         "ran twice" and "lost" are then counted from what ran
  --json                 print the report as JSON
  --sizes LIST           sizes of the large deliveries (default 1kB,150kB,1.5MB,7MB,25MB)
  --dialect NAME         generated values in this dialect only (repeatable; default all):
                         ${DIALECTS.join(', ')}
  --encodings LIST       gzip,br (default) or none
  --retries N            retries after the first attempt (default 3)
  --timeout-ms N         per attempt (default 30000): a slower answer is retried
  --backoff-ms N         first delay, doubled each time (default 1000)
  --max-backoff-ms N     cap (default 30000)
  --max-age SECONDS      the receiver's replay window (default 86400)
  --effects-wait-ms N    how long effects may take to show (default 5000)
  --time-limit-ms N      stop the whole check after this long (default 300000)
  --seed N               the seed of the generated values (printed by each run)
  ${HEADER_NAMES.map((name) => `${flagOf(name)} NAME`).join(', ')}
                         header names, for a vendor prefix (X-Service-… by default)
  --allow-http           allow http:// to a host that is not loopback

Exit: 0 nothing lost, accepted forged, run twice or left unanswered (slow answers
are reported, not failed), 1 otherwise, 2 usage error.

Example:
  jobhook keygen --out ./test-keys    # the receiver under test trusts test-only-public.pem
  jobhook check https://staging.example.com/webhooks/gateway --key ./test-keys/test-only-private.pem
`;

const FLAGS = {
  key: { type: 'string' },
  effects: { type: 'string' },
  json: { type: 'boolean' },
  sizes: { type: 'string' },
  dialect: { type: 'string', multiple: true },
  encodings: { type: 'string' },
  ...RETRY_FLAGS,
  'max-age': { type: 'string' },
  'effects-wait-ms': { type: 'string' },
  'time-limit-ms': { type: 'string' },
  seed: { type: 'string' },
  'allow-http': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof FLAGS }>>['values'];

/** `--signature-header NAME`, …: one flag per header name option. */
const HEADER_FLAGS = Object.fromEntries(
  HEADER_NAMES.map((name) => [flagOf(name).slice(2), { type: 'string' } as const]),
);

/** The library's option names as this command's flags. */
const OPTION_FLAGS = {
  privateKey: '--key',
  allowInsecure: '--allow-http',
  url: 'the receiver URL',
  maxAgeSeconds: '--max-age',
  dialects: '--dialect',
} as const;

function sizesFlag(value: string | undefined): number[] | undefined {
  if (value === undefined) return undefined;
  return value.split(',').map((part) => {
    const bytes = parseBytes(part);
    if (bytes === undefined)
      throw new UsageError(`--sizes: ${JSON.stringify(part)} is not a size (e.g. 1kB, 150kB, 1.5MB, 25MB)`);
    return bytes;
  });
}

function encodingsFlag(value: string | undefined): CheckOptions['encodings'] {
  if (value === undefined) return undefined;
  if (value === 'none') return [];
  return value.split(',').map((e) => {
    const coding = e.trim();
    if (!isSentEncoding(coding))
      throw new UsageError(
        `--encodings takes ${SENT_ENCODINGS.join(', ')} or none; got ${JSON.stringify(coding)}`,
      );
    return coding;
  });
}

/** The header names given by their flags; the check resolves them (an error names the flag). */
function headerNames(values: Readonly<Record<string, unknown>>): HeaderNameOptions {
  return Object.fromEntries(HEADER_NAMES.map((name) => [name, values[flagOf(name).slice(2)]]));
}

async function options(values: Values): Promise<CheckOptions> {
  if (values.key === undefined)
    throw new UsageError('--key PRIVATE.pem is required (the key whose public key the receiver trusts)');
  const ms = (
    flag: 'timeout-ms' | 'backoff-ms' | 'max-backoff-ms' | 'effects-wait-ms' | 'time-limit-ms',
    min = 0,
  ) => numberFlag(values[flag], `--${flag}`, { min, integer: true });
  return {
    privateKey: await readFile(values.key, 'utf8'),
    effects: values.effects,
    sizes: sizesFlag(values.sizes),
    dialects: values.dialect?.map((d) => assertDialect(d, '--dialect')),
    encodings: encodingsFlag(values.encodings),
    retries: numberFlag(values.retries, '--retries', { min: 0, max: 10, integer: true }),
    timeoutMs: ms('timeout-ms', 1),
    backoffMs: ms('backoff-ms'),
    maxBackoffMs: ms('max-backoff-ms'),
    maxAgeSeconds: numberFlag(values['max-age'], '--max-age', { integer: true }),
    effectsWaitMs: ms('effects-wait-ms'),
    timeLimitMs: ms('time-limit-ms', 1),
    seed: numberFlag(values.seed, '--seed', { min: 0, max: 2 ** 32 - 1, integer: true }),
    ...headerNames(values),
    allowInsecure: values['allow-http'],
  };
}

/** `[ 3/44] genuine/escapes/orjson: attempt 1: HTTP 200 after 12 ms → processed`, on stderr as each attempt ends. */
function progressLine(a: CheckAttempt): string {
  const at = String(a.index).padStart(String(a.of).length);
  const copy = a.copy > 1 ? `copy ${a.copy}, ` : '';
  return (
    escapeControls(
      `[${at}/${a.of}] ${a.id}: ${copy}attempt ${a.attempt.attempt}: ${describeAttempt(a.attempt)}`,
    ) + '\n'
  );
}

export async function checkCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags('check', {
    args: argv,
    allowPositionals: true,
    options: { ...FLAGS, ...HEADER_FLAGS },
  });
  if (values.help) {
    io.stdout(CHECK_HELP);
    return 0;
  }
  if (positionals.length !== 1)
    throw new UsageError(
      positionals.length === 0 ? 'the URL of the receiver is required' : 'check takes one URL',
    );
  const url = positionals[0]!;
  const opts = { ...(await options(values)), onAttempt: (a: CheckAttempt) => io.stderr(progressLine(a)) };
  const report = await withFlags(OPTION_FLAGS, () => checkReceiver(url, opts));
  io.stdout(values.json ? jsonText(report, 2) + '\n' : formatCheckReport(report));
  return report.ok ? 0 : 1;
}
