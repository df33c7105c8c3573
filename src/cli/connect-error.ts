import { ErrorCode, ImagebatchError } from '../model/errors';

/**
 * Where the CLI found Temporal's address, as a failed connection names it. Any other source is a profile, named as
 * `profile <name> in <file>` (never a secret: a file named by `TEMPORAL_CONFIG_FILE` is named by that variable).
 */
export const AddressSource = {
  /** The `TEMPORAL_ADDRESS` variable. */
  Env: 'TEMPORAL_ADDRESS',
  /** The local server that `imagebatch run` starts when no address is configured. */
  Local: 'local server',
} as const;

/** What a failed `Connection.connect` is turned into a {@link TemporalUnreachableError} from. */
export interface ConnectFailure {
  /** What `Connection.connect` threw. */
  error: unknown;
  /** The address tried, `host:port`. */
  address: string;
  /** Where the address came from: an {@link AddressSource}, or a profile as `profile <name> in <file>`. */
  source: string;
  /**
   * How long the connection waited: a timeout says it.
   * @default not said
   */
  timeoutMs?: number;
}

/** The CLI cannot reach Temporal: one line naming the address, where it came from, why, and what to do. */
export class TemporalUnreachableError extends ImagebatchError {
  readonly code = ErrorCode.TemporalUnreachable;
  constructor(
    /** The address tried. */
    readonly address: string,
    /** Where the address came from (see {@link ConnectFailure.source}). */
    readonly source: string,
    /** Why, in a few words. */
    readonly reason: string,
    /** What to do. */
    readonly advice: string,
    options?: { cause?: unknown },
  ) {
    const from = source === AddressSource.Local ? 'the local server' : `from ${source}`;
    super(`cannot reach Temporal at ${address} (${from}): ${reason}; ${advice}`, options);
  }
}

/** The SDK's error when the server did not answer before `connectTimeout` (no cause: refused, unknown host, TLS). */
const DEADLINE = 'Failed to connect before the deadline';

/** gRPC status codes that mean the server answered and refused who we are. */
const REFUSED: Readonly<Record<number, string>> = { 7: 'PERMISSION_DENIED', 16: 'UNAUTHENTICATED' };

/** Node's network error codes, in words. */
const NETWORK: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused (nothing listens there)',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'unknown host',
  EAI_AGAIN: 'host name lookup failed',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ETIMEDOUT: 'no answer',
};

const TLS_ADVICE = 'check the TLS settings, TEMPORAL_TLS* or the profile (docs/deploying.md#temporal-cloud-and-tls)';
const KEY_ADVICE = 'check TEMPORAL_API_KEY or the TLS client certificate (docs/deploying.md#temporal-cloud-and-tls)';

/**
 * Turns an error of `Connection.connect` into one line that names the address, where it came from, the cause in a
 * few words, and what to do: start Temporal there or correct the setting, run on this machine instead, or check the
 * credentials or TLS when the server refused them.
 */
export function connectError(failure: ConnectFailure): TemporalUnreachableError {
  const { error, address, source } = failure;
  const { reason, advice } = describe(error, source, failure.timeoutMs);
  return new TemporalUnreachableError(address, source, reason, advice, { cause: error });
}

function describe(error: unknown, source: string, timeoutMs: number | undefined): { reason: string; advice: string } {
  const elsewhere = placeAdvice(source);
  const chain = causes(error);
  const refused = chain.find((e) => typeof e.code === 'number' && REFUSED[e.code] !== undefined);
  if (refused) {
    return { reason: `refused (${REFUSED[refused.code as number]}: ${detailsOf(refused)})`, advice: KEY_ADVICE };
  }
  const tls = chain.find((e) => typeof e.code === 'string' && /^ERR_(OSSL|SSL|TLS)_/.test(e.code));
  if (tls) return { reason: `TLS: ${firstLine(tls.message)}`, advice: TLS_ADVICE };
  const network = chain.map((e) => (typeof e.code === 'string' ? NETWORK[e.code] : undefined)).find(Boolean);
  if (network) return { reason: network, advice: elsewhere };
  if (chain.some((e) => e.message === DEADLINE || e.code === 4)) {
    return {
      reason: timeoutMs ? `no answer within ${Math.round(timeoutMs / 1000)} s` : 'no answer',
      advice: elsewhere,
    };
  }
  const grpc = chain.find((e) => typeof e.code === 'number');
  return { reason: grpc ? detailsOf(grpc) : firstLine(chain[0]?.message ?? String(error)), advice: elsewhere };
}

/** What to do when nothing answers at the address, by where the address came from. */
function placeAdvice(source: string): string {
  switch (source) {
    case AddressSource.Env:
      return (
        'start Temporal there, or correct TEMPORAL_ADDRESS (docs/settings.md), or unset it to run on this machine ' +
        '(imagebatch run starts a local server)'
      );
    case AddressSource.Local:
      return (
        'the local server did not start or stopped: its log is in the imagebatch home; or set TEMPORAL_ADDRESS or ' +
        'a profile for another server (docs/settings.md)'
      );
    default:
      return 'start Temporal there, or correct the profile, or choose another with TEMPORAL_PROFILE (docs/settings.md)';
  }
}

interface ErrorLike {
  message: string;
  code?: unknown;
  details?: unknown;
}

/** The error and its causes, outermost first (at most 8). */
function causes(error: unknown): ErrorLike[] {
  const chain: ErrorLike[] = [];
  for (let e: unknown = error; typeof e === 'object' && e !== null && chain.length < 8;) {
    const { message, code, details, cause } = e as Partial<ErrorLike> & { cause?: unknown };
    chain.push({ message: typeof message === 'string' ? message : '', code, details });
    e = cause;
  }
  return chain;
}

/** A gRPC error's own text (`details`), else its message; one short line. */
const detailsOf = (e: ErrorLike) => firstLine(typeof e.details === 'string' && e.details ? e.details : e.message);

/** The first line of a text, at most 160 characters. */
function firstLine(text: string): string {
  const line = (text.split('\n')[0] ?? '').trim();
  return line.length > 160 ? `${line.slice(0, 159)}…` : line || 'unknown error';
}
