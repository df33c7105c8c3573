import { gotValue } from './redact';
import { ConfigError } from './service-config';

/** The environment variable that turns the worker's Prometheus endpoint on. */
export const METRICS_ADDRESS_ENV = 'IMAGEBATCH_METRICS_ADDRESS';

/** Where the worker serves its metrics (Temporal's runtime metrics and imagebatch's own counters). */
export interface MetricsConfig {
  /**
   * `host:port` the Prometheus exporter binds to; scraped at `http://<host>:<port>/metrics`.
   * `IMAGEBATCH_METRICS_ADDRESS`, e.g. `0.0.0.0:9464`.
   */
  bindAddress: string;
}

const HOST_PORT = /^(?:[^\s/:[\]]+|\[[0-9a-fA-F:]+\]):(\d{1,5})$/;

/**
 * Reads the metrics setting: undefined when it is absent or empty (metrics off). A value that is not `host:port`
 * with a port from 1 to 65535 throws a ConfigError naming the variable, so a typo stops the worker at start
 * instead of leaving it silently unobserved.
 */
export function loadMetricsConfig(env: Readonly<Record<string, string | undefined>>): MetricsConfig | undefined {
  const raw = env[METRICS_ADDRESS_ENV]?.trim();
  if (raw === undefined || raw === '') return undefined;
  const port = HOST_PORT.exec(raw)?.[1];
  if (port === undefined) {
    throw new ConfigError(
      METRICS_ADDRESS_ENV,
      `must be host:port, such as 0.0.0.0:9464${gotValue(METRICS_ADDRESS_ENV, raw)}`,
    );
  }
  const n = Number(port);
  if (n < 1 || n > 65535) {
    throw new ConfigError(METRICS_ADDRESS_ENV, `the port must be from 1 to 65535${gotValue(METRICS_ADDRESS_ENV, raw)}`);
  }
  return { bindAddress: raw };
}
