import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { assertDialect, checkNumber } from '../../lib/entries/tools-door.js';
import { sizedBody } from '../check/large.js';
import { MAX_SIZE, MIN_SIZE } from '../check/options.js';
import { newSeed, Random } from '../check/random.js';
import { parseBytes } from '../check/units.js';
import { DEFAULT_MAX_BODY_BYTES, DIALECTS, signDelivery } from '../../index.js';
import type { SendOptions } from '../deliveries/send.js';
import { sendCopies } from '../deliveries/variants.js';
import { describeAttempt } from './attempt.js';
import { writeTestKeyPair } from '../deliveries/keys.js';
import { examplePayload } from '../deliveries/payload.js';
import { captureOf, scanDocument, type CapturedRequest } from './capture-object.js';
import { maxCaptureBytes } from './captures.js';
import { JsonScanError } from './json-scan.js';
import { inFlagTerms, parseFlags, withFlags } from './common.js';
import { readInput, UsageError, type CliIo } from './io.js';
import {
  compressedForSending,
  sendingLabel,
  VARIANT_HELP,
  VARIANT_OPTIONS,
  variantFlags,
  withTwiceValue,
} from './variant-flags.js';

const KEY_FLAGS = { privateKey: '--key' } as const;

export const KEYGEN_HELP = `Usage: jobhook keygen --out DIR [--bits 2048|3072|4096] [--force]

Writes a TEST-ONLY RSA key pair for testing a receiver: test-only-private.pem,
test-only-public.pem (SPKI) and test-only-public-pkcs1.pem ("RSA PUBLIC KEY").
Never use these keys for anything real.

Example:
  jobhook keygen --out ./test-keys
`;

export async function keygenCommand(argv: string[], io: CliIo): Promise<number> {
  const { values } = parseFlags('keygen', {
    args: argv,
    options: {
      out: { type: 'string' },
      bits: { type: 'string' },
      force: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    io.stdout(KEYGEN_HELP);
    return 0;
  }
  if (values.out === undefined) throw new UsageError('--out DIR is required');
  const out = values.out;
  const bits = values.bits === undefined ? 2048 : Number(values.bits);
  const files = await withFlags({}, async () => writeTestKeyPair(out, { bits, force: values.force }));
  io.stdout(
    `wrote TEST-ONLY keys:\n  ${files.privateKey}\n  ${files.publicKey}\n  ${files.publicKeyPkcs1}\n`,
  );
  return 0;
}

const PAYLOAD_OPTIONS = {
  key: { type: 'string' },
  dialect: { type: 'string' },
  status: { type: 'string' },
  'job-id': { type: 'string' },
  size: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

type PayloadValues = { key?: string; dialect?: string; status?: string; 'job-id'?: string; size?: string };

/** The largest FILE `sign` and `send` read. */
const FILE_LIMIT = maxCaptureBytes(DEFAULT_MAX_BODY_BYTES);

/** The body to sign: a FILE (or -), or a generated payload. */
async function payload(
  values: PayloadValues,
  file: string | undefined,
  io: CliIo,
): Promise<Uint8Array | string> {
  const generate = values.status !== undefined || values['job-id'] !== undefined || values.size !== undefined;
  if (file !== undefined && generate)
    throw new UsageError('give a FILE or --status/--job-id/--size, not both');
  if (values.status !== undefined && values.status !== 'success' && values.status !== 'fail')
    throw new UsageError('--status must be success or fail');
  if (file !== undefined)
    return readInput(
      file,
      io,
      FILE_LIMIT,
      'more than a capture of a body the verifier takes: 6 × 25 MiB + 1 MiB',
    );
  if (values.size !== undefined) return sizedPayload(values.size, values);
  return examplePayload({ status: values.status as 'success' | 'fail' | undefined, jobId: values['job-id'] });
}

/** A successful OCR job's payload of `size` bytes (`150kB`, `25MB`), written as the dialect's sender writes it. */
function sizedPayload(size: string, values: PayloadValues): string {
  const bytes = parseBytes(size);
  if (bytes === undefined)
    throw new UsageError(`--size: ${JSON.stringify(size)} is not a size (e.g. 150kB, 1.5MB, 25MB)`);
  if (values.status === 'fail')
    throw new UsageError(
      "--size makes a successful job's payload (an OCR result), not one with --status fail",
    );
  checkNumber(bytes, '--size', { min: MIN_SIZE, max: MAX_SIZE, integer: true });
  const dialect = assertDialect(values.dialect ?? 'orjson', '--dialect');
  return sizedBody(values['job-id'] ?? randomUUID(), bytes, new Random(newSeed()), dialect)!;
}

async function signed(values: PayloadValues, body: Uint8Array | string) {
  if (values.key === undefined) throw new UsageError('--key PRIVATE.pem is required');
  const dialect = assertDialect(values.dialect ?? 'orjson', '--dialect');
  const key = await readFile(values.key, 'utf8');
  return withFlags(KEY_FLAGS, async () => signDelivery(body, key, { dialect }));
}

export const SIGN_HELP = `Usage: jobhook sign --key PRIVATE.pem [--dialect NAME] [FILE | - | --status success|fail --job-id ID --size N]

Signs a payload as the gateway does and prints a capture object
{"headers":{...},"body":"..."} on one line (append it to a .jsonl file, or give it
to verify, explain or send). Without FILE, a payload is generated.

Options:
  --key FILE        RSA private key (PEM), e.g. from jobhook keygen
  --dialect NAME    ${DIALECTS.join(' | ')} (default orjson)
  --status S        generated payload: success (default) or fail
  --job-id ID       generated payload: the job id (default a random UUID)
  --size N          generated payload: a successful OCR result of N bytes (1kB to 100MB:
                    150kB, 1.5MB, 25MB), floats such as 1.0 and non-ASCII text in it

Example:
  jobhook sign --key test-keys/test-only-private.pem --status fail --job-id job-1 > delivery.json
  jobhook sign --key test-keys/test-only-private.pem --size 25MB > large.json
`;

export async function signCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags('sign', {
    args: argv,
    allowPositionals: true,
    options: PAYLOAD_OPTIONS,
  });
  if (values.help) {
    io.stdout(SIGN_HELP);
    return 0;
  }
  if (positionals.length > 1) throw new UsageError('sign takes one FILE');
  const delivery = await signed(values, await payload(values, positionals[0], io));
  io.stdout(JSON.stringify(delivery) + '\n');
  return 0;
}

export const SEND_HELP = `Usage: jobhook send --to URL --key PRIVATE.pem [options] [FILE]

POSTs a signed delivery to a receiver with the gateway's retry policy: retries on
5xx, timeouts and network errors (not on 4xx), up to 3 retries with exponential
backoff capped at 30 s, 30 s timeout per attempt. FILE may be a capture object
(sent as it is) or a payload (signed with --key); without FILE a payload is generated.
Plain http:// is refused for hosts other than loopback unless --allow-insecure.

Options:
  --to URL              the receiver
  --key FILE            RSA private key (PEM) to sign with
  --dialect NAME        ${DIALECTS.join(' | ')} (default orjson)
  --status S, --job-id ID, --size N   for a generated payload (as sign makes it)
  --retries N           retries after the first attempt (default 3)
  --timeout-ms N        per attempt (default 30000)
  --backoff-ms N        first delay, doubled each time (default 1000)
  --max-backoff-ms N    cap (default 30000)
  --allow-insecure      allow http:// to a non-loopback host
${VARIANT_HELP}

Exit: 0 delivered (2xx; with --twice, both copies), 1 not delivered, 2 usage error.

Example:
  jobhook send --to http://127.0.0.1:3000/webhooks/gateway --key test-keys/test-only-private.pem
  jobhook send --to http://127.0.0.1:3000/webhooks/gateway --key test-keys/test-only-private.pem --gzip --twice at-once
`;

function count(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`${name} must be a whole number ≥ 0`);
  return n;
}

/** parseArgs options of the gateway's retry policy, shared by `send` and `check`. */
export const RETRY_FLAGS = {
  retries: { type: 'string' },
  'timeout-ms': { type: 'string' },
  'backoff-ms': { type: 'string' },
  'max-backoff-ms': { type: 'string' },
} as const;

const SEND_OPTIONS = {
  ...PAYLOAD_OPTIONS,
  ...VARIANT_OPTIONS,
  ...RETRY_FLAGS,
  to: { type: 'string' },
  'allow-insecure': { type: 'boolean' },
} as const;

type SendValues = {
  retries?: string;
  'timeout-ms'?: string;
  'backoff-ms'?: string;
  'max-backoff-ms'?: string;
  'allow-insecure'?: boolean;
};

/** The gateway's retry policy, as the flags change it. */
function sendPolicy(
  values: SendValues,
): Pick<SendOptions, 'retries' | 'timeoutMs' | 'backoffMs' | 'maxBackoffMs' | 'allowInsecure'> {
  return {
    retries: count(values.retries, '--retries', 3),
    timeoutMs: count(values['timeout-ms'], '--timeout-ms', 30_000),
    backoffMs: count(values['backoff-ms'], '--backoff-ms', 1000),
    maxBackoffMs: count(values['max-backoff-ms'], '--max-backoff-ms', 30_000),
    allowInsecure: values['allow-insecure'],
  };
}

export async function sendCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags('send', {
    args: withTwiceValue(argv),
    allowPositionals: true,
    options: SEND_OPTIONS,
  });
  if (values.help) {
    io.stdout(SEND_HELP);
    return 0;
  }
  if (values.to === undefined) throw new UsageError('--to URL is required');
  if (positionals.length > 1) throw new UsageError('send takes one FILE');
  const { encoding, twice } = variantFlags(values);
  const policy = sendPolicy(values);
  const body = await payload(values, positionals[0], io);
  const capture = typeof body === 'string' ? undefined : parseCapture(body, positionals[0]!);
  const signedDelivery = capture ?? (await signed(values, body));
  const delivery = encoding === undefined ? signedDelivery : compressedForSending(signedDelivery, encoding);
  const to = values.to;
  const print = (a: Parameters<typeof describeAttempt>[0], copy: number) =>
    io.stdout(`${sendingLabel(copy, { twice })}attempt ${a.attempt}: ${describeAttempt(a)}\n`);
  const results = await withFlags({ ...KEY_FLAGS, url: '--to' }, () =>
    sendCopies({ url: to, headers: delivery.headers, body: delivery.body, ...policy }, twice, print),
  );
  return results.every((r) => r.delivered) ? 0 : 1;
}

/** A FILE that already is a capture object is sent as it is. */
function parseCapture(bytes: Uint8Array, source: string): CapturedRequest | undefined {
  let document: ReturnType<typeof scanDocument>;
  try {
    document = scanDocument(bytes);
  } catch (err) {
    if (!(err instanceof JsonScanError)) throw err;
    return undefined; // not JSON: sent as a payload, and the receiver will say why it is malformed
  }
  return document.kind === 'capture' ? captureOf(document, source) : undefined;
}
