/**
 * What a failure of `createImage` carries in its details (activities/failures.ts puts them there): read here, for the
 * row and reconcile. Plain functions with no Temporal in them. Workflow code imports them: no I/O, no Node built-ins.
 */
import { BatchStopReason, type BatchStopDetails, type KeyProgress, type RejectedDetails } from '../model';

/** The part of an `ApplicationFailure` read here. */
export interface WithDetails {
  readonly details?: readonly unknown[] | null;
}

/** The key's progress, the second detail of every failure of createImage. */
export function keyProgressIn(failure: WithDetails): KeyProgress | undefined {
  const progress: unknown = failure.details?.[1];
  return typeof progress === 'object' && progress !== null ? progress : undefined;
}

/** The first detail: what the failure's type says (its details' shape goes with its type). */
export function firstDetail<T>(failure: WithDetails): T | undefined {
  return (failure.details?.[0] ?? undefined) as T | undefined;
}

/** The service's words for a refusal, with the fields it named. */
export function rejectionText(details: RejectedDetails | undefined, fallback: string): string {
  if (!details) return fallback;
  const fields = details.fieldErrors.map((e) => `${e.field}: ${e.message}`).join('; ');
  return fields ? `${details.message} (${fields})` : details.message;
}

/** A stop that the worker's own configuration caused (e.g. the key's format): fixed on the worker, then resumed. */
export function workerStop(message: string): BatchStopDetails {
  return { reason: BatchStopReason.WorkerConfig, httpStatus: 0, message };
}
