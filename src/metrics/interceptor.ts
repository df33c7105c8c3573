import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { describeAttempt, type AttemptEnd } from './attempt';
import type { WorkerMetrics } from './worker-metrics';

/**
 * An activity inbound interceptor that counts every attempt's outcome into {@link WorkerMetrics}. It only looks:
 * results and errors pass through unchanged, and a counting problem never fails an activity.
 */
export function metricsInterceptor(metrics: WorkerMetrics): ActivityInterceptorsFactory {
  return (ctx) => ({
    inbound: {
      async execute(input, next) {
        const activity = ctx.info.activityType;
        const observe = (end: AttemptEnd) => {
          try {
            metrics.record(activity, describeAttempt(activity, end));
          } catch {
            // Metrics are best effort; the activity's outcome is what matters.
          }
        };
        try {
          const result = await next(input);
          observe({ ok: true, result });
          return result;
        } catch (error) {
          observe({ ok: false, error });
          throw error;
        }
      },
    },
  });
}
