import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assertDialect } from '../../lib/entries/tools-door.js';
import { DIALECTS } from '../../index.js';
import {
  startGatewaySimulator,
  type DeliveryAttempt,
  type SimulatedDelivery,
} from '../simulator/simulator.js';
import { UsageError, type CliIo } from './io.js';
import { describeAttempt } from './attempt.js';
import { parseFlags, withFlags } from './common.js';
import {
  sendingLabel,
  VARIANT_HELP,
  VARIANT_OPTIONS,
  variantFlags,
  withTwiceValue,
} from './variant-flags.js';

/**
 * The I/O of a command that runs until stopped: `signal` stops it (tests pass one).
 * SIGINT, SIGTERM, SIGHUP and its parent process going away stop it too.
 */
export interface LongRunningIo extends CliIo {
  signal?: AbortSignal;
}

const DEFAULT_RECEIVER = 'http://127.0.0.1:3000/webhooks/gateway';

export const SIMULATE_HELP = `Usage: jobhook simulate [--port N] [--delay-ms N] [--dialect NAME] [--out DIR] [options]

Runs a local stand-in for the gateway's async-job API until Ctrl+C (SIGINT),
SIGTERM or SIGHUP, or until the process that started it (npx, a shell, a test
runner) goes away: POST /v3/universal-ai/async creates a job (Authorization: Bearer TOKEN),
GET /v3/universal-ai/async/ID polls it, and when the job finishes its signed
async_job_completed webhook goes to the job's webhook_receiver, retried as the
gateway does (5xx, timeouts and network errors; up to 3 retries). It signs with a
TEST-ONLY key and writes the public key (PEM) for your receiver to --out.

A job whose input has "simulate": "fail" fails; other jobs succeed. Requests are
taken up to 25 MiB. The flags below send every webhook otherwise than once.

Options:
  --port N          port on 127.0.0.1 (default: a free one)
  --delay-ms N      time from creating a job to its webhook (default 200)
  --dialect NAME    ${DIALECTS.join(' | ')} (default orjson)
  --out DIR         where to write gateway-public.pem (default: a new temporary directory)
  --key FILE        sign with this RSA private key (PEM), e.g. from jobhook keygen, so your
                    receiver keeps one public key across runs (default: a fresh key per run)
  --token T         the bearer token (default: a random one)
  --receiver URL    the webhook_receiver in the printed curl example (default ${DEFAULT_RECEIVER})
${VARIANT_HELP}
  --tampered            change a value of the body after signing (expect 401)
  --replay-after-ms N   send it once more, N ms later

Example:
  jobhook simulate --port 8080 --out ./gateway-key
  jobhook simulate --port 8080 --out ./gateway-key --twice at-once --gzip
`;

function whole(value: string | undefined, flag: string, max?: number): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n > (max ?? Number.MAX_SAFE_INTEGER))
    throw new UsageError(`${flag} must be a whole number ${max === undefined ? '≥ 0' : `from 0 to ${max}`}`);
  return n;
}

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** Signals that stop the simulator cleanly: Ctrl+C, `kill`, the terminal closed. */
const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/** How often the simulator looks whether its parent is still there. */
const PARENT_CHECK_MS = 500;

/**
 * Resolves with the reason when `signal` aborts, the process gets SIGINT, SIGTERM or
 * SIGHUP, or its parent goes away; the listeners are removed then. A wrapper such as
 * `npx` (npm, then a shell) does not pass its SIGTERM on: stopped through its own PID,
 * it leaves the simulator behind, adopted by another process, which is how it is noticed.
 */
function stopRequested(signal: AbortSignal | undefined): Promise<string> {
  return new Promise((resolve) => {
    const parent = process.ppid;
    const handlers = STOP_SIGNALS.map((name) => [name, () => stop(name)] as const);
    const orphaned = setInterval(() => {
      if (process.ppid !== parent) stop(`its parent process ${parent} went away`);
    }, PARENT_CHECK_MS);
    const onAbort = () => stop('abort');
    const stop = (why: string) => {
      clearInterval(orphaned);
      for (const [name, handler] of handlers) process.off(name, handler);
      signal?.removeEventListener('abort', onAbort);
      resolve(why);
    };
    for (const [name, handler] of handlers) process.once(name, handler);
    if (signal?.aborted) return stop('abort');
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function attemptLine(a: DeliveryAttempt, delivery: SimulatedDelivery): string {
  const label = sendingLabel(a.sending, {
    twice: delivery.twice,
    replay: delivery.replayAfterMs !== undefined,
  });
  return `job ${a.jobId} ${label}attempt ${a.attempt} → ${a.url}: ${describeAttempt(a)}\n`;
}

/** The `delivery` option the flags ask for. */
function deliveryFlags(values: {
  gzip?: boolean;
  br?: boolean;
  twice?: string;
  tampered?: boolean;
  'replay-after-ms'?: string;
}): SimulatedDelivery {
  const replayAfterMs = whole(values['replay-after-ms'], '--replay-after-ms', 2 ** 31 - 1);
  return {
    ...variantFlags(values),
    ...(values.tampered === true ? { tampered: true } : {}),
    ...(replayAfterMs === undefined ? {} : { replayAfterMs }),
  };
}

/** `gzip, twice at once`: the delivery in words, for the introduction. */
function deliveryWords(d: SimulatedDelivery): string {
  const words = [
    d.encoding,
    d.twice === undefined ? undefined : `twice ${d.twice.replace(/-/g, ' ')}`,
    d.tampered ? 'tampered' : undefined,
    d.replayAfterMs === undefined ? undefined : `replayed ${d.replayAfterMs} ms later`,
  ];
  const said = words.filter((w) => w !== undefined);
  return said.length === 0 ? 'once, as the gateway' : said.join(', ');
}

export async function simulateCommand(argv: string[], io: LongRunningIo): Promise<number> {
  const { values, positionals } = parseFlags('simulate', {
    args: withTwiceValue(argv),
    allowPositionals: true,
    options: {
      ...VARIANT_OPTIONS,
      tampered: { type: 'boolean' },
      'replay-after-ms': { type: 'string' },
      port: { type: 'string' },
      'delay-ms': { type: 'string' },
      dialect: { type: 'string' },
      out: { type: 'string' },
      key: { type: 'string' },
      token: { type: 'string' },
      receiver: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    io.stdout(SIMULATE_HELP);
    return 0;
  }
  if (positionals.length > 0) throw new UsageError(`simulate takes no FILE (got ${positionals[0]})`);
  const port = whole(values.port, '--port', 65535);
  const delayMs = whole(values['delay-ms'], '--delay-ms');
  const dialect = assertDialect(values.dialect ?? 'orjson', '--dialect');
  const privateKey = values.key === undefined ? undefined : await readFile(values.key, 'utf8');
  const delivery = deliveryFlags(values);
  const out = values.out ?? mkdtempSync(join(tmpdir(), 'jobhook-simulate-'));

  const gateway = await withFlags({ privateKey: '--key' }, () =>
    startGatewaySimulator({
      port,
      delayMs,
      dialect,
      privateKey,
      token: values.token,
      delivery,
      onAttempt: (a) => io.stdout(attemptLine(a, delivery)),
    }),
  );
  try {
    mkdirSync(out, { recursive: true });
    const keyFile = join(out, 'gateway-public.pem');
    writeFileSync(
      keyFile,
      'TEST-ONLY KEY of `jobhook simulate`: for tests of a webhook receiver, never for anything real.\n' +
        gateway.publicKey,
    );
    io.stdout(
      introduction(
        gateway,
        keyFile,
        `${dialect}; jobs finish after ${delayMs ?? 200} ms; webhooks sent ${deliveryWords(delivery)}`,
        values.receiver ?? DEFAULT_RECEIVER,
      ),
    );
    const why = await stopRequested(io.signal);
    io.stdout(`stopping (${why})\n`);
  } finally {
    await gateway.close();
  }
  return 0;
}

function introduction(
  gateway: { url: string; jobsUrl: string; token: string },
  keyFile: string,
  how: string,
  receiver: string,
): string {
  const auth = shellQuote(`Authorization: Bearer ${gateway.token}`);
  const job = JSON.stringify({
    model: 'ocr/ocr_async/amazon',
    input: { file_url: 'https://example.com/invoice.pdf' },
    webhook_receiver: receiver,
    user_webhook_parameters: { order_id: '42' },
  });
  return `jobhook gateway simulator (signs with a TEST-ONLY key)
  URL:         ${gateway.url}
  token:       ${gateway.token}
  public key:  ${keyFile}
  dialect:     ${how}

Create a job whose webhook goes to your receiver (add "simulate":"fail" to input for a failed job):
  curl -sS -X POST ${shellQuote(gateway.jobsUrl)} -H ${auth} -H 'Content-Type: application/json' -d ${shellQuote(job)}
Poll it:
  curl -sS ${shellQuote(gateway.jobsUrl + '/PUBLIC_ID')} -H ${auth}

Ctrl+C stops it.
`;
}
