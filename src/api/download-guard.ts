import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import net from 'node:net';
import { Agent, buildConnector, type Dispatcher } from 'undici';
import { ErrorCode, ImagebatchError } from '../model/errors';

/**
 * Which addresses an image download may connect to. An image service decides the image URLs (and their
 * redirects), so a hostile or compromised one could point the worker at its own loopback, a private network or
 * the cloud metadata address (169.254.169.254). Downloads therefore resolve each host themselves (`dns.lookup`,
 * every address), refuse the host unless every address is public or allowed, and connect to the checked address
 * itself: the DNS answer cannot change between the check and the connection. This is done in the download
 * dispatcher's `connect`, so it holds on every hop of a redirect chain.
 *
 * Allowed besides public addresses:
 * - `IMAGEGEN_DOWNLOAD_ALLOW_HOSTS`: comma-separated host names (exact, case-insensitive), IP addresses and CIDR
 *   blocks (`10.0.0.0/8`, `fd00::/8`). A listed name is trusted whatever it resolves to except link-local,
 *   multicast, unspecified and reserved addresses, which only an address or a CIDR block can allow.
 * - The host of `IMAGEGEN_BASE_URL`, as if it were listed (a literal only when loopback or private): the service
 *   is already trusted with the key at that host, and its own files server usually shares it (the simulator on
 *   127.0.0.1 in the demo and the tests, `simulator` in docker-compose), so those keep working with no setting.
 *   Only that host or address, never the rest of its network (another loopback address, the next private host),
 *   and never a link-local address such as the metadata service.
 */

export const DOWNLOAD_ALLOW_HOSTS_ENV = 'IMAGEGEN_DOWNLOAD_ALLOW_HOSTS';

export type AddressClass =
  'public' | 'loopback' | 'private' | 'link-local' | 'multicast' | 'unspecified' | 'reserved' | 'invalid';

/** Address classes a listed host name may resolve to (the rest need an address or a CIDR block). */
const NAME_MAY_REACH: ReadonlySet<AddressClass> = new Set(['public', 'loopback', 'private']);

/** 16 bytes of an IPv6 address, or 4 of an IPv4 one; undefined when `ip` is not an address. */
export function addressBytes(ip: string): Uint8Array | undefined {
  const bare = ip.startsWith('[') && ip.endsWith(']') ? ip.slice(1, -1) : ip;
  const family = net.isIP(bare);
  if (family === 4) return Uint8Array.from(bare.split('.').map(Number));
  if (family !== 6) return undefined;
  const noZone = bare.split('%')[0] ?? '';
  let text = noZone;
  const tail: number[] = [];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1]) {
    tail.push(...dotted[1].split('.').map(Number));
    text = `${text.slice(0, -dotted[1].length)}0:0`;
  }
  const [head = '', rest] = text.split('::');
  const groups = (s: string) => (s === '' ? [] : s.split(':').map((g) => parseInt(g, 16)));
  const left = groups(head);
  const right = rest === undefined ? [] : groups(rest);
  const words = [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
  const out = new Uint8Array(16);
  words.forEach((w, i) => {
    out[i * 2] = (w >> 8) & 0xff;
    out[i * 2 + 1] = w & 0xff;
  });
  if (tail.length === 4) out.set(tail, 12);
  return out;
}

/** The IPv4 address embedded in an IPv4-mapped, IPv4-translated, IPv4-compatible or NAT64 IPv6 address. */
function embeddedV4(b: Uint8Array): Uint8Array | undefined {
  const zeros = (from: number, to: number) => b.subarray(from, to).every((x) => x === 0);
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return b.slice(12); // ::ffff:a.b.c.d
  if (zeros(0, 8) && b[8] === 0xff && b[9] === 0xff && zeros(10, 12)) return b.slice(12); // ::ffff:0:a.b.c.d (SIIT)
  if (zeros(0, 12) && !zeros(12, 16) && !(zeros(12, 15) && b[15] === 1)) return b.slice(12); // ::a.b.c.d
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12)) return b.slice(12); // 64:ff9b::
  return undefined;
}

/** Normalised bytes: an IPv6 address that carries an IPv4 one is that IPv4 address. */
function canonical(ip: string): Uint8Array | undefined {
  const b = addressBytes(ip);
  if (b?.length === 16) return embeddedV4(b) ?? b;
  return b;
}

/** What kind of address `ip` is (IPv4-mapped and similar IPv6 forms are judged by their IPv4 address). */
export function addressClass(ip: string): AddressClass {
  const b = canonical(ip);
  if (!b) return 'invalid';
  return b.length === 4 ? v4Class(b) : v6Class(b);
}

function v4Class(b: Uint8Array): AddressClass {
  const [a = 0, c = 0] = [b[0], b[1]];
  if (a === 0) return 'unspecified'; // 0.0.0.0/8
  if (a === 127) return 'loopback';
  if (a === 10 || (a === 172 && c >= 16 && c <= 31) || (a === 192 && c === 168)) return 'private';
  if (a === 100 && c >= 64 && c <= 127) return 'private'; // shared address space (carrier-grade NAT)
  if (a === 169 && c === 254) return 'link-local';
  if (a >= 224 && a <= 239) return 'multicast';
  if (a >= 240) return 'reserved'; // 240/4 and the broadcast address
  if (a === 198 && (c === 18 || c === 19)) return 'reserved'; // benchmarking
  if (a === 192 && c === 0 && b[2] === 0) return 'reserved'; // IETF protocol assignments
  return 'public';
}

/** A 16-byte address that carries no IPv4 address in the forms {@link embeddedV4} reads. */
function v6Class(b: Uint8Array): AddressClass {
  const word = (i: number) => ((b[2 * i] ?? 0) << 8) | (b[2 * i + 1] ?? 0);
  if (b.every((x) => x === 0)) return 'unspecified';
  if (b.subarray(0, 15).every((x) => x === 0) && b[15] === 1) return 'loopback';
  // 6to4 (2002::/16, RFC 3056): judged by the IPv4 address in bits 16-47, as a relay would deliver it there.
  if (word(0) === 0x2002) return v4Class(b.slice(2, 6));
  // Local-use NAT64 (64:ff9b:1::/48, RFC 8215): a translator of the local network's own choosing.
  if (word(0) === 0x64 && word(1) === 0xff9b && word(2) === 1) return 'private';
  // Teredo (2001::/32): the host sits behind a NAT at an obfuscated address; never a plain public server.
  if (word(0) === 0x2001 && word(1) === 0) return 'reserved';
  if (word(0) === 0x2001 && word(1) === 0xdb8) return 'reserved'; // documentation (RFC 3849)
  const first = b[0] ?? 0;
  if ((first & 0xfe) === 0xfc) return 'private'; // fc00::/7
  if (first === 0xfe && ((b[1] ?? 0) & 0xc0) === 0x80) return 'link-local'; // fe80::/10
  if (first === 0xfe && ((b[1] ?? 0) & 0xc0) === 0xc0) return 'private'; // fec0::/10, deprecated site-local
  if (first === 0xff) return 'multicast';
  return 'public';
}

interface Cidr {
  bytes: Uint8Array;
  prefix: number;
  text: string;
}

export interface AllowList {
  /** Host names, lower case. */
  readonly names: ReadonlySet<string>;
  readonly cidrs: readonly Cidr[];
}

export const EMPTY_ALLOW_LIST: AllowList = { names: new Set(), cidrs: [] };

const HOST_NAME =
  /^(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$/;

/**
 * Parses the allow-list: comma-separated host names, addresses and CIDR blocks. Returns the entries, or the first
 * problem (naming the entry) as a string.
 */
export function parseAllowList(text: string): AllowList | string {
  const names = new Set<string>();
  const cidrs: Cidr[] = [];
  for (const raw of text.split(',')) {
    const entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    const [addr = '', prefixText, extra] = entry.split('/');
    const bytes = canonical(addr);
    if (bytes) {
      const max = bytes.length * 8;
      const fromV6 = addressBytes(addr)?.length === 16 && bytes.length === 4;
      let prefix = prefixText === undefined ? max : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : NaN;
      // A prefix written for a mapped IPv6 form (::ffff:10.0.0.0/104) counts the 96 bits before the IPv4 address.
      if (fromV6 && prefixText !== undefined) prefix -= 96;
      if (extra !== undefined || !Number.isInteger(prefix) || prefix < 0 || prefix > max) {
        return `${JSON.stringify(raw.trim())} is not a valid CIDR block (such as 10.0.0.0/8 or fd00::/8)`;
      }
      cidrs.push({ bytes, prefix, text: entry });
      continue;
    }
    const name = entry.startsWith('[') ? '' : entry.replace(/\.$/, '');
    if (prefixText !== undefined || !HOST_NAME.test(name)) {
      return `${JSON.stringify(raw.trim())} is neither a host name, an IP address nor a CIDR block`;
    }
    names.add(name);
  }
  return { names, cidrs };
}

function inCidr(b: Uint8Array, cidr: Cidr): boolean {
  if (b.length !== cidr.bytes.length) return false;
  let bits = cidr.prefix;
  for (let i = 0; bits > 0; i += 1, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if (((b[i] ?? 0) & mask) !== ((cidr.bytes[i] ?? 0) & mask)) return false;
  }
  return true;
}

/** A download refused because of the address it would connect to. */
export class DownloadAddressRefusedError extends ImagebatchError {
  readonly code = ErrorCode.DownloadAddressRefused;
  constructor(
    readonly host: string,
    readonly address: string,
    readonly addressKind: AddressClass,
  ) {
    const shown = host === address ? address : `${host} (${address})`;
    super(
      `refused to download from ${shown}: a ${addressKind} address; ` +
        `add the host or its network to ${DOWNLOAD_ALLOW_HOSTS_ENV} if the images really live there`,
    );
  }
}

export type LookupAll = (hostname: string) => Promise<LookupAddress[]>;

const systemLookup: LookupAll = (hostname) =>
  new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });

export interface AddressPolicyOptions {
  allow: AllowList;
  /** `{base_url}`: its host is allowed when loopback or private (see the module comment). */
  baseUrl?: string;
  /** @default dns.lookup with `all: true` */
  lookup?: LookupAll;
}

/** Decides, for one host, which address a download connects to; throws {@link DownloadAddressRefusedError}. */
export class AddressPolicy {
  private readonly names: Set<string>;
  private readonly cidrs: Cidr[];
  private readonly lookup: LookupAll;

  constructor(options: AddressPolicyOptions) {
    this.names = new Set(options.allow.names);
    this.cidrs = [...options.allow.cidrs];
    this.lookup = options.lookup ?? systemLookup;
    if (options.baseUrl && URL.canParse(options.baseUrl)) {
      const host = bareHost(new URL(options.baseUrl).hostname);
      const bytes = canonical(host);
      const kind = addressClass(host);
      if (bytes && (kind === 'loopback' || kind === 'private')) {
        this.cidrs.push({ bytes, prefix: bytes.length * 8, text: host });
      } else if (!bytes) {
        this.names.add(host.toLowerCase().replace(/\.$/, ''));
      }
    }
  }

  /** The address to connect to for `hostname` (a name or a literal, brackets allowed), once every one is checked. */
  async resolve(hostname: string): Promise<{ address: string; family: number }> {
    const host = bareHost(hostname);
    const literal = net.isIP(host);
    const addresses: LookupAddress[] = literal ? [{ address: host, family: literal }] : await this.lookup(host);
    if (addresses.length === 0) throw new Error(`no address found for ${host}`);
    const byName = !literal && this.names.has(host.toLowerCase().replace(/\.$/, ''));
    // Every address must pass: a name answering one public and one private address is refused as a whole.
    for (const { address } of addresses) {
      const kind = addressClass(address);
      if (kind === 'public') continue;
      const b = canonical(address);
      if (b && this.cidrs.some((c) => inCidr(b, c))) continue;
      if (byName && NAME_MAY_REACH.has(kind)) continue;
      throw new DownloadAddressRefusedError(host, address, kind);
    }
    const first = addresses[0] as LookupAddress;
    return { address: first.address, family: first.family };
  }
}

function bareHost(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

export interface GuardedDispatcherOptions {
  policy: AddressPolicy;
  connections: number;
  connectTimeoutMs: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
}

/**
 * An undici Agent for image downloads whose every connection goes through {@link AddressPolicy}: the host is
 * resolved and checked, then the socket is opened to that very address (TLS keeps the host name for SNI and the
 * certificate check). A refused host fails the request with a {@link DownloadAddressRefusedError} as its cause,
 * before any connection is made.
 */
export function createGuardedDownloadDispatcher(options: GuardedDispatcherOptions): Dispatcher {
  const connector = buildConnector({ timeout: options.connectTimeoutMs });
  const connect: buildConnector.connector = (opts, callback) => {
    const hostname = bareHost(opts.hostname);
    options.policy.resolve(hostname).then(
      ({ address }) => {
        const servername = opts.servername ?? (net.isIP(hostname) ? undefined : hostname);
        connector({ ...opts, hostname: address, ...(servername ? { servername } : {}) }, callback);
      },
      (err: unknown) => callback(err instanceof Error ? err : new Error(String(err)), null),
    );
  };
  return new Agent({
    connections: options.connections,
    connect,
    headersTimeout: options.headersTimeoutMs,
    bodyTimeout: options.bodyTimeoutMs,
  });
}

/** The refusal behind a failed request, if that is why it failed. */
export function refusalOf(err: unknown): DownloadAddressRefusedError | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth += 1) {
    if (e instanceof DownloadAddressRefusedError) return e;
  }
  return undefined;
}
