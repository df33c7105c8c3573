/** The worker's metrics: Temporal's runtime metrics and imagebatch's own counters on one Prometheus endpoint. */
export { describeAttempt, type AttemptEnd, type AttemptObservation } from './attempt';
export { metricsInterceptor } from './interceptor';
export {
  MetricName,
  OTHER_LABEL,
  RefundReason,
  ResponseClass,
  responseClassOf,
  retryReasonLabel,
  TOO_MANY_REQUESTS_REASONS,
  tooManyRequestsLabel,
} from './names';
export { installWorkerRuntime, MetricsSetupError, type WorkerRuntimeOptions } from './runtime';
export { WorkerMetrics } from './worker-metrics';
