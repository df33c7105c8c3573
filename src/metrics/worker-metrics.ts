import type { MetricCounter, MetricMeter } from '@temporalio/common';
import type { AttemptObservation } from './attempt';
import { MetricName, retryReasonLabel, tooManyRequestsLabel } from './names';

/**
 * imagebatch's own counters, created on a Temporal {@link MetricMeter}: given the runtime's meter, they are served
 * by the same Prometheus endpoint as the runtime's `temporal_*` metrics, with the same global labels.
 */
export class WorkerMetrics {
  private readonly requests: MetricCounter;
  private readonly tooMany: MetricCounter;
  private readonly charges: MetricCounter;
  private readonly chargedMicroUsd: MetricCounter;
  private readonly refunds: MetricCounter;
  private readonly retries: MetricCounter;

  constructor(meter: MetricMeter) {
    this.requests = meter.createCounter(MetricName.ApiRequests, 'requests', 'Image-service requests by kind and class');
    this.tooMany = meter.createCounter(MetricName.TooManyRequests, 'answers', 'HTTP 429 answers by kind and reason');
    this.charges = meter.createCounter(MetricName.Charges, 'creations', 'Accepted (charged) submissions');
    this.chargedMicroUsd = meter.createCounter(
      MetricName.ChargedMicroUsd,
      'microUSD',
      'What the accepted submissions cost, in millionths of a USD',
    );
    this.refunds = meter.createCounter(MetricName.Refunds, 'refunds', 'Refunds by reason');
    this.retries = meter.createCounter(
      MetricName.ActivityRetries,
      'attempts',
      'Activity attempts that failed and will be retried, by activity and reason',
    );
  }

  /**
   * Counts what one activity attempt observed. Every label value comes from a fixed set: the service's texts (a
   * 429's reason or code) and error names outside it are counted as `other`.
   */
  record(activity: string, o: AttemptObservation): void {
    if (o.request) this.requests.add(1, { kind: o.request.kind, class: o.request.class });
    if (o.request && o.tooManyRequests !== undefined) {
      this.tooMany.add(1, { kind: o.request.kind, reason: tooManyRequestsLabel(o.tooManyRequests) });
    }
    if (o.charge) {
      this.charges.add(1);
      this.chargedMicroUsd.add(Math.round(o.charge.usd * 1_000_000));
    }
    if (o.refund) this.refunds.add(1, { reason: o.refund });
    if (o.retry !== undefined) this.retries.add(1, { activity, reason: retryReasonLabel(o.retry) });
  }
}
