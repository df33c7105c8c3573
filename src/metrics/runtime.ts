import { IllegalStateError } from '@temporalio/common';
import { Runtime, type Logger } from '@temporalio/worker';
import { METRICS_ADDRESS_ENV, type MetricsConfig } from '../config/metrics-config';
import { ErrorCode, ImagebatchError } from '../model/errors';

/** Options of {@link installWorkerRuntime}. */
export interface WorkerRuntimeOptions {
  /** The SDK's logger. */
  logger: Logger;
  /**
   * Serve Prometheus metrics here.
   * @default no metrics endpoint
   */
  metrics?: MetricsConfig;
}

/** The metrics endpoint could not be set up. */
export class MetricsSetupError extends ImagebatchError {
  readonly code = ErrorCode.MetricsSetup;
  constructor(
    readonly variable: string,
    readonly problem: string,
  ) {
    super(`${variable}: ${problem}`);
  }
}

/**
 * Installs the process's Temporal Runtime for a worker, with the Prometheus exporter when metrics are asked for.
 * The exporter can only be chosen when the Runtime is created, before the first NativeConnection; a process that
 * already has a Runtime (a test, an embedding program) keeps it, and asking it for metrics is an error.
 */
export function installWorkerRuntime(options: WorkerRuntimeOptions): Runtime {
  const { metrics } = options;
  try {
    return Runtime.install({
      logger: options.logger,
      ...(metrics ? { telemetryOptions: { metrics: { prometheus: { bindAddress: metrics.bindAddress } } } } : {}),
    });
  } catch (err) {
    if (err instanceof IllegalStateError) {
      if (metrics) {
        throw new MetricsSetupError(
          METRICS_ADDRESS_ENV,
          'the Temporal runtime of this process was created without metrics; set it before anything else starts',
        );
      }
      return Runtime.instance();
    }
    if (metrics) {
      const why = err instanceof Error ? err.message : String(err);
      throw new MetricsSetupError(METRICS_ADDRESS_ENV, `cannot serve metrics on ${metrics.bindAddress}: ${why}`);
    }
    throw err;
  }
}
