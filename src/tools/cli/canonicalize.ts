import { createHash } from 'node:crypto';
import {
  DEFAULT_CANONICAL_EXPANSION,
  DEFAULT_MAX_BODY_BYTES,
  DIALECTS,
  isWebhookError,
} from '../../index.js';
import {
  assertDialect,
  DEFAULT_MAX_DEPTH,
  boundedSink,
  parseBody,
  resolveOptions,
} from '../../lib/entries/tools-door.js';
import { numberFlag, parseFlags } from './common.js';
import { readInput, type CliIo } from './io.js';

export const CANONICALIZE_HELP = `Usage: jobhook canonicalize [--dialect NAME] [--digest] [FILE|-]

Prints the canonical JSON the gateway signs for a body (sorted keys, 2-space
indent), or with --digest the lowercase hex SHA-256 of it. Bounded as the
verifier is: a body over --max-body-bytes, nesting deeper than --max-depth, or a
canonical form over --max-canonical-bytes is refused before it is built. Exit 0,
1 when the dialect cannot write this body (e.g. a number orjson cannot read), 2
when the body is not JSON or passes a limit.

Options:
  --dialect NAME             ${DIALECTS.join(' | ')} (default orjson)
  --digest                   print the SHA-256 hex digest instead of the text
  --max-body-bytes N         largest body read (default ${DEFAULT_MAX_BODY_BYTES}, as the verifier's)
  --max-depth N              deepest nesting parsed (default ${DEFAULT_MAX_DEPTH})
  --max-canonical-bytes N    largest canonical form written (default ${DEFAULT_CANONICAL_EXPANSION} × the body's limit)
  -h, --help                 show this help

Example:
  jobhook canonicalize --dialect python body.json
  curl -s ... | jobhook canonicalize --digest -
`;

export async function canonicalizeCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags('canonicalize', {
    args: argv,
    allowPositionals: true,
    options: {
      dialect: { type: 'string' },
      digest: { type: 'boolean' },
      'max-body-bytes': { type: 'string' },
      'max-depth': { type: 'string' },
      'max-canonical-bytes': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    io.stdout(CANONICALIZE_HELP);
    return 0;
  }
  if (positionals.length > 1) throw new TypeError('canonicalize takes one FILE (or - for standard input)');
  const dialect = assertDialect(values.dialect ?? 'orjson', '--dialect');
  const maxBodyBytes =
    numberFlag(values['max-body-bytes'], '--max-body-bytes', { integer: true }) ?? DEFAULT_MAX_BODY_BYTES;
  const o = resolveOptions({
    dialects: [dialect],
    maxBodyBytes,
    maxDepth: numberFlag(values['max-depth'], '--max-depth', { integer: true }),
    maxCanonicalBytes: numberFlag(values['max-canonical-bytes'], '--max-canonical-bytes', { integer: true }),
    maxAgeSeconds: false,
  });
  const parsed = parseBody(await readInput(positionals[0], io, maxBodyBytes), o);
  try {
    // Written as it is made (text, or hashed for --digest): never held whole.
    const hash = values.digest ? createHash('sha256') : undefined;
    const decoder = new TextDecoder();
    parsed.write(
      dialect,
      boundedSink(o.maxCanonicalBytes, (chunk) => {
        if (hash !== undefined) hash.update(chunk);
        else io.stdout(typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true }));
      }),
    );
    io.stdout(hash === undefined ? decoder.decode() + '\n' : hash.digest('hex') + '\n');
  } catch (err) {
    // The body is JSON, but this dialect's serializer cannot write it (orjson fails on it too).
    if (!isWebhookError(err) || err.code !== 'CANONICAL_UNREPRESENTABLE') throw err;
    io.stderr(`jobhook canonicalize: ${err.code}: ${err.message}\n`);
    return 1;
  } finally {
    parsed.dispose();
  }
  return 0;
}
