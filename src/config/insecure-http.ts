import { describeValue } from './redact';

/**
 * Plain `http://` to the image service sends the API key in clear. It is allowed to a loopback host (the
 * simulator, an SSH tunnel, a local TLS-terminating proxy) and otherwise only when `IMAGEGEN_ALLOW_INSECURE_HTTP`
 * says the network in between is trusted (e.g. a simulator on a private Docker network): `1` for any host, or the
 * names of the hosts it trusts.
 */

export const ALLOW_INSECURE_HTTP_ENV = 'IMAGEGEN_ALLOW_INSECURE_HTTP';
const BASE_URL_ENV = 'IMAGEGEN_BASE_URL';

/** Whether `hostname` (as `URL.hostname` spells it) is loopback: 127.0.0.0/8, ::1 (or ::ffff:127.x.y.z), localhost. */
export function isLoopbackHost(hostname: string): boolean {
  const h = hostname.toLowerCase();
  return (
    h === 'localhost' ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) ||
    h === '[::1]' ||
    /^\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\]$/.test(h)
  );
}

/** What is wrong, as a ConfigError's variable and problem; undefined when nothing is. */
export interface PlainHttpProblem {
  variable: string;
  problem: string;
}

const YES = ['1', 'true', 'yes'];
const NO = ['', '0', 'false', 'no'];
const HOST = /^(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*|\[[0-9a-f:.]+\])$/;

/**
 * Reads `IMAGEGEN_ALLOW_INSECURE_HTTP`, `1`/`true`/`yes` (any host) or `0`/`false`/`no` (none; unset or empty
 * too), or a comma-separated list of the host names that may be reached over plain http (e.g. `simulator`), and
 * checks the (validated) base URL against it.
 */
export function plainHttpProblem(baseUrl: string, allowRaw: string | undefined): PlainHttpProblem | undefined {
  const allow = (allowRaw ?? '').trim().toLowerCase();
  const hosts = allow.split(',').map((h) => h.trim());
  if (!YES.includes(allow) && !NO.includes(allow) && !hosts.every((h) => HOST.test(h))) {
    return {
      variable: ALLOW_INSECURE_HTTP_ENV,
      problem:
        'must be 1 or 0 (or true/false, yes/no), or a comma-separated list of host names ' +
        `(got ${describeValue(ALLOW_INSECURE_HTTP_ENV, allowRaw)})`,
    };
  }
  const url = new URL(baseUrl);
  if (url.protocol !== 'http:' || isLoopbackHost(url.hostname)) return undefined;
  if (YES.includes(allow) || (!NO.includes(allow) && hosts.includes(url.hostname.toLowerCase()))) return undefined;
  return {
    variable: BASE_URL_ENV,
    problem:
      `uses plain http to ${describeValue(BASE_URL_ENV, url.hostname)}, which is not a loopback host: the API key ` +
      `would cross the network in clear. Use https, or set ${ALLOW_INSECURE_HTTP_ENV}=1 (or to that host name) if ` +
      'the network to that host is trusted (e.g. a simulator on a private Docker network)',
  };
}
