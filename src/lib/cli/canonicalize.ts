import { sha256Hex } from '../runtime/crypto/node.js';
import { parseArgs } from 'node:util';
import { canonicalizeText } from '../core/canonical/index.js';
import { assertDialect, DIALECTS } from '../core/canonical/dialects.js';
import { readInput, type CliIo } from './io.js';
import { CanonicalUnrepresentableError } from '../base/errors.js';

export const CANONICALIZE_HELP = `Usage: jobhook canonicalize [--dialect NAME] [--digest] [FILE|-]

Prints the canonical JSON the gateway signs for a body (sorted keys, 2-space
indent), or with --digest the lowercase hex SHA-256 of it. Exit 0, 1 when the
dialect cannot write this body (e.g. a number orjson cannot read), 2 when the
body is not JSON.

Options:
  --dialect NAME  ${DIALECTS.join(' | ')} (default orjson)
  --digest        print the SHA-256 hex digest instead of the text
  -h, --help      show this help

Example:
  jobhook canonicalize --dialect python body.json
  curl -s ... | jobhook canonicalize --digest -
`;

export async function canonicalizeCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { dialect: { type: 'string' }, digest: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    io.stdout(CANONICALIZE_HELP);
    return 0;
  }
  if (positionals.length > 1) throw new TypeError('canonicalize takes one FILE (or - for standard input)');
  const dialect = assertDialect(values.dialect ?? 'orjson', '--dialect');
  const body = await readInput(positionals[0], io);
  let text: string;
  try {
    text = canonicalizeText(body, { dialect });
  } catch (err) {
    // The body is JSON, but this dialect's serializer cannot write it (orjson fails on it too).
    if (!(err instanceof CanonicalUnrepresentableError)) throw err;
    io.stderr(`jobhook canonicalize: ${err.code}: ${err.message}\n`);
    return 1;
  }
  io.stdout(values.digest ? sha256Hex(text) + '\n' : text + '\n');
  return 0;
}
