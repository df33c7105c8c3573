import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { RequestKind } from '../api/classify';
import { FailureType } from '../model';
import { RefundReason, ResponseClass, responseClassOf } from './names';

/**
 * What one activity attempt tells about the image service, read from its result or the ApplicationFailure it threw.
 * Each attempt of an image activity sends at most one request to `{base_url}` (the project's rule, see docs/design.md),
 * and the classifier puts the answer's HTTP status and meaning into the failure's type and details, so the
 * attempt is the request. Pure, so that every mapping is tested case by case.
 */

/** The image activities and the request each attempt sends. Other activities send none. */
const API_ACTIVITIES: Readonly<Record<string, RequestKind>> = {
  submitCreation: RequestKind.Submit,
  pollCreation: RequestKind.Poll,
  fetchModels: RequestKind.Models,
};

/** How an attempt ended: its result, or what it threw. */
export type AttemptEnd = { ok: true; result: unknown } | { ok: false; error: unknown };

/** What {@link describeAttempt} found; absent fields did not happen. */
export interface AttemptObservation {
  /** The image-service request of the attempt and how it was answered. */
  request?: { kind: RequestKind; class: ResponseClass };
  /** The request was answered 429, for this reason (`details.reason` of the answer, else its code). */
  tooManyRequests?: string;
  /** A submission was accepted: the account is charged this much (0 when the service did not say). */
  charge?: { usd: number };
  /** A charge came back. */
  refund?: RefundReason;
  /** The attempt failed and Temporal will try again: the failure type (or the error's name). */
  retry?: string;
}

export function describeAttempt(activityType: string, end: AttemptEnd): AttemptObservation {
  const out: AttemptObservation = {};
  if (!end.ok) {
    const retry = retryReason(end.error);
    if (retry !== undefined) out.retry = retry;
  }
  const kind = activityType === 'createImage' ? createImageRequest(end) : API_ACTIVITIES[activityType];
  if (kind === undefined) return out;
  if (activityType === 'createImage' && !end.ok && isAcceptance(end.error)) {
    // The submission was accepted; the activity retries to poll it.
    const progress = end.error instanceof ApplicationFailure ? end.error.details?.[1] : undefined;
    return {
      ...out,
      request: { kind, class: ResponseClass.Success },
      charge: { usd: numberField(progress, 'costUsd') ?? 0 },
    };
  }
  if (end.ok) return { ...out, ...fromResult(kind, end.result) };
  return { ...out, ...fromFailure(kind, end.error) };
}

/**
 * The request an attempt of `createImage` sent: a poll once its creation is known (the key's progress, the second
 * detail of every failure it throws, names it), else the submission. Its results are polls.
 */
function createImageRequest(end: AttemptEnd): RequestKind {
  if (end.ok) return RequestKind.Poll;
  if (!(end.error instanceof ApplicationFailure)) return RequestKind.Submit;
  if (isAcceptance(end.error)) return RequestKind.Submit;
  return typeof stringField(end.error.details?.[1], 'creationId') === 'string' ? RequestKind.Poll : RequestKind.Submit;
}

function isAcceptance(error: unknown): boolean {
  return (
    error instanceof ApplicationFailure &&
    error.type === FailureType.Pending &&
    isRecord(error.details?.[0]) &&
    error.details[0].accepted === true
  );
}

/** Retryable failures: ApplicationFailures not marked non-retryable, and any other error but a cancellation. */
function retryReason(error: unknown): string | undefined {
  if (error instanceof ApplicationFailure) return error.nonRetryable ? undefined : (error.type ?? 'Error');
  if (error instanceof CancelledFailure) return undefined;
  return error instanceof Error ? error.name : 'Error';
}

function fromResult(kind: RequestKind, result: unknown): AttemptObservation {
  const request = { kind, class: ResponseClass.Success };
  switch (kind) {
    case RequestKind.Submit:
      return { request, charge: { usd: numberField(result, 'costUsd') ?? 0 } };
    case RequestKind.Poll: {
      // createImage and pollCreation both return how the creation ended.
      const failed = isRecord(result) && result.outcome === 'failed';
      return failed ? { request, refund: RefundReason.FailedCreation } : { request };
    }
    case RequestKind.Models:
      return { request };
  }
}

function fromFailure(kind: RequestKind, error: unknown): AttemptObservation {
  if (!(error instanceof ApplicationFailure)) return { request: { kind, class: ResponseClass.Unclassified } };
  const details: unknown = error.details?.[0];
  const status = numberField(details, 'httpStatus');
  const byStatus = (fallback: ResponseClass): AttemptObservation => ({
    request: { kind, class: status ? responseClassOf(status) : fallback },
  });
  const type = (Object.values(FailureType) as string[]).includes(error.type ?? '')
    ? (error.type as FailureType)
    : undefined;
  if (type === undefined) return { request: { kind, class: ResponseClass.Unclassified } };
  switch (type) {
    case FailureType.RateLimited: {
      if (isRecord(details) && details.local === true) return { request: { kind, class: ResponseClass.LocalHold } };
      const out = byStatus(ResponseClass.Other);
      if (status !== 429) return out;
      const reason = stringField(details, 'reason') ?? stringField(details, 'code') ?? 'unknown';
      return { ...out, tooManyRequests: reason };
    }
    case FailureType.Ambiguous:
    case FailureType.Unreachable:
    case FailureType.NotSent:
    case FailureType.Malformed:
      return byStatus(ResponseClass.Transport);
    case FailureType.Unknown: {
      // The last try of a key whose outcome stayed unknown: its status survives only in the message it left.
      const last = /^HTTP (\d{3})\b/.exec(stringField(details, 'lastError') ?? '')?.[1];
      return { request: { kind, class: last ? responseClassOf(Number(last)) : ResponseClass.Transport } };
    }
    case FailureType.Refunded:
      return { ...byStatus(ResponseClass.ServerError), refund: RefundReason.RefusedSubmission };
    case FailureType.Rejected:
    case FailureType.BatchStop:
    case FailureType.CreationNotFound:
      return byStatus(ResponseClass.Other);
    case FailureType.Pending:
    case FailureType.DownloadFailed:
      // The poll was answered (in flight, or succeeded and then an image download failed).
      return { request: { kind, class: ResponseClass.Success } };
    case FailureType.Config:
    case FailureType.MaxWait:
      // Stopped before anything was sent.
      return {};
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function numberField(v: unknown, name: string): number | undefined {
  const x = isRecord(v) ? v[name] : undefined;
  return typeof x === 'number' && Number.isFinite(x) ? x : undefined;
}

function stringField(v: unknown, name: string): string | undefined {
  const x = isRecord(v) ? v[name] : undefined;
  return typeof x === 'string' ? x : undefined;
}
