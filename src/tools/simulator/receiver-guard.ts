/**
 * The gateway's server-side request forgery guard for `webhook_receiver`: a job may
 * not make the gateway call into its own network. A receiver is refused when its
 * host is, or resolves to, a private, shared (CGNAT), link-local, loopback,
 * unspecified or cloud-metadata address; every resolved address is checked.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/** The longest URL the gateway accepts (the classic browser limit). */
export const MAX_RECEIVER_URL_LENGTH = 2083;

type Category = 'cloud-metadata' | 'loopback' | 'unspecified' | 'link-local' | 'private';

// Checked in this order, so 169.254.169.254 is named "cloud-metadata", not "link-local".
const RANGES: ReadonlyArray<readonly [Category, ReadonlyArray<readonly [string, number, 'ipv4' | 'ipv6']>]> =
  [
    [
      'cloud-metadata',
      [
        ['169.254.169.254', 32, 'ipv4'], // AWS, GCP, Azure, OpenStack…
        ['100.100.100.200', 32, 'ipv4'], // Alibaba Cloud
        ['fd00:ec2::254', 128, 'ipv6'], // AWS over IPv6
      ],
    ],
    [
      'loopback',
      [
        ['127.0.0.0', 8, 'ipv4'],
        ['::1', 128, 'ipv6'],
      ],
    ],
    [
      'unspecified',
      [
        ['0.0.0.0', 8, 'ipv4'],
        ['::', 128, 'ipv6'],
      ],
    ],
    [
      'link-local',
      [
        ['169.254.0.0', 16, 'ipv4'],
        ['fe80::', 10, 'ipv6'],
      ],
    ],
    [
      'private',
      [
        ['10.0.0.0', 8, 'ipv4'],
        ['172.16.0.0', 12, 'ipv4'],
        ['192.168.0.0', 16, 'ipv4'],
        ['100.64.0.0', 10, 'ipv4'], // shared address space (carrier-grade NAT)
        ['fc00::', 7, 'ipv6'], // unique local
      ],
    ],
  ];

// node's BlockList also matches IPv4-mapped IPv6 addresses (::ffff:10.0.0.1) against IPv4 rules.
const LISTS: ReadonlyArray<readonly [Category, BlockList]> = RANGES.map(([category, subnets]) => {
  const list = new BlockList();
  for (const [net, prefix, family] of subnets) list.addSubnet(net, prefix, family);
  return [category, list] as const;
});

/** The category of a blocked IP address, or undefined for a public one. */
export function blockedCategory(address: string): Category | undefined {
  const family = isIP(address);
  if (family === 0) return undefined;
  const type = family === 4 ? 'ipv4' : 'ipv6';
  for (const [category, list] of LISTS) if (list.check(address, type)) return category;
  return undefined;
}

const METADATA_NAMES = new Set(['metadata.google.internal', 'metadata.goog', 'metadata']);

/** Hostnames that always stand for loopback, whatever a resolver says (RFC 6761). */
function isLoopbackName(host: string): boolean {
  return host === 'localhost' || host.endsWith('.localhost');
}

/** Resolves a hostname to all its addresses. */
export type HostLookup = (hostname: string) => Promise<string[]>;

const LOOKUP_TIMEOUT_MS = 5_000;

async function systemLookup(hostname: string): Promise<string[]> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no answer within ${LOOKUP_TIMEOUT_MS} ms`)),
      LOOKUP_TIMEOUT_MS,
    );
  });
  try {
    const found = await Promise.race([dnsLookup(hostname, { all: true, verbatim: true }), timeout]);
    return found.map((a) => a.address);
  } finally {
    clearTimeout(timer);
  }
}

export interface ReceiverGuardOptions {
  /** Accept loopback receivers, over plain http too when the host is written as 127.x.x.x, [::1] or localhost (default true). */
  allowLoopback?: boolean;
  lookup?: HostLookup;
}

/** Why `value` is refused as a `webhook_receiver`, or undefined when it is accepted. */
export async function receiverProblem(
  value: unknown,
  options: ReceiverGuardOptions = {},
): Promise<string | undefined> {
  const allowLoopback = options.allowLoopback ?? true;
  if (typeof value !== 'string') return 'must be a string (a URI) or null';
  if (value.length === 0 || value.length > MAX_RECEIVER_URL_LENGTH)
    return `must be 1 to ${MAX_RECEIVER_URL_LENGTH} characters long, got ${value.length}`;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'is not a valid URI';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    return `must be an https URL, got ${url.protocol}`;
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname.replace(/\.$/, '');
  const literalLoopback = isLoopbackName(host) || blockedCategory(host) === 'loopback';
  if (url.protocol === 'http:' && !(allowLoopback && literalLoopback)) {
    return allowLoopback
      ? 'must use https (plain http is accepted only for loopback receivers: 127.0.0.1, [::1], localhost)'
      : 'must use https';
  }
  if (METADATA_NAMES.has(host)) return `names a cloud-metadata host (${host})`;
  if (isLoopbackName(host)) return allowLoopback ? undefined : `names a loopback host (${host})`;
  let addresses: string[];
  if (isIP(host) !== 0) {
    addresses = [host];
  } else {
    try {
      addresses = await (options.lookup ?? systemLookup)(host);
    } catch (err) {
      return `has a host that could not be resolved (${host}: ${(err as { code?: string }).code ?? (err as Error).message})`;
    }
    if (addresses.length === 0) return `has a host that could not be resolved (${host})`;
  }
  for (const address of addresses) {
    const category = blockedCategory(address);
    if (category === undefined || (category === 'loopback' && allowLoopback)) continue;
    const via = address === host ? '' : `, which ${host} resolves to`;
    return `names a ${category} address (${address}${via}); receivers on private, link-local, loopback or cloud-metadata addresses are refused`;
  }
  return undefined;
}
