/** The flags of `send` and `simulate` that send a delivery otherwise than once: --gzip, --br, --twice [at-once]. */
import {
  encodedDelivery,
  SENT_ENCODINGS,
  TWICE,
  type SentEncoding,
  type Twice,
  type WireDelivery,
} from '../deliveries/variants.js';
import { UsageError } from './io.js';

/** parseArgs options shared by `send` and `simulate`. */
export const VARIANT_OPTIONS = {
  gzip: { type: 'boolean' },
  br: { type: 'boolean' },
  twice: { type: 'string' },
} as const;

export const VARIANT_HELP = `  --gzip, --br          compress the body (Content-Encoding)
  --twice [at-once]     send it twice: in a row, or at once (a retry racing a slow attempt)`;

/**
 * argv with `--twice` given its value: `--twice at-once` and `--twice in-a-row` as
 * written, a bare `--twice` as `--twice=in-a-row` (parseArgs has no optional values).
 */
export function withTwiceValue(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let k = 0; k < argv.length; k++) {
    const arg = argv[k]!;
    if (arg === '--') {
      out.push(...argv.slice(k));
      break;
    }
    if (arg !== '--twice') out.push(arg);
    else if ((TWICE as readonly string[]).includes(argv[k + 1] ?? '')) out.push(`--twice=${argv[++k]!}`);
    else out.push('--twice=in-a-row');
  }
  return out;
}

/** What the flags ask for, checked. */
export function variantFlags(values: { gzip?: boolean; br?: boolean; twice?: string }): {
  encoding?: SentEncoding;
  twice?: Twice;
} {
  if (values.gzip === true && values.br === true) throw new UsageError('give --gzip or --br, not both');
  const encoding = SENT_ENCODINGS.find((coding) => values[coding] === true);
  const { twice } = values;
  if (twice !== undefined && !(TWICE as readonly string[]).includes(twice))
    throw new UsageError(
      `--twice takes at-once or in-a-row (or nothing: in a row), got ${JSON.stringify(twice)}`,
    );
  return {
    ...(encoding === undefined ? {} : { encoding }),
    ...(twice === undefined ? {} : { twice: twice as Twice }),
  };
}

/** The delivery compressed for sending; a capture that already says how its body is encoded is refused. */
export function compressedForSending(delivery: WireDelivery, coding: SentEncoding): WireDelivery {
  const declared = Object.entries(delivery.headers).find(
    ([name]) => name.toLowerCase() === 'content-encoding',
  );
  if (declared !== undefined)
    throw new UsageError(
      `the capture already has Content-Encoding: ${declared[1]}; send it as it is, without --${coding}`,
    );
  return encodedDelivery(delivery, coding);
}

/** How `send` and `simulate` name a sending in their attempt lines: `copy 2, `, `replay, `; nothing when there is one. */
export function sendingLabel(sending: number, plan: { twice?: Twice; replay?: boolean }): string {
  const count = 1 + (plan.twice === undefined ? 0 : 1) + (plan.replay === true ? 1 : 0);
  if (count === 1) return '';
  if (plan.replay === true && sending === count) return 'replay, ';
  return `copy ${sending}, `;
}
