import type { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { backoffCeilingMs } from '../../api/creation-steps';
import { KeyCheckResult, type KeyCheck, type KeyProgress, type StatusCheck } from '../../model';
import { failureWith } from '../failures';
import { currentDetails, heartbeat } from '../heartbeat';
import { asRecord } from '../../api/outcome-text';
import type { ImageRun } from './run';

/**
 * What an attempt of a key knows and hands to the next one: its {@link KeyProgress}, in the heartbeat details (see
 * heartbeat.ts), and in the details of every failure it throws, so that the row's record keeps it.
 */

/** Exponential backoff with jitter (half to full), for the n-th consecutive unknown outcome. */
export function backoffMs(run: ImageRun, n: number): number {
  const ceiling = backoffCeilingMs(n, run.deps.config);
  return Math.round(ceiling / 2 + (run.deps.random() * ceiling) / 2);
}

/** Consecutive transient failures so far, from this attempt's or the previous attempts' heartbeat details. */
export function priorTries(ctx: Context): number {
  return countOf(asRecord(currentDetails(ctx)).ambiguousTries);
}

/** Heartbeats the details so far with `patch` over them: each field is kept until something changes it. */
export function note(ctx: Context, patch: Partial<KeyProgress>): void {
  heartbeat(ctx, { ...asRecord(currentDetails(ctx)), ...patch });
}

export function countOf(value: unknown): number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : 0;
}

/** The fields of {@link KeyProgress} found in heartbeat details (anything else there is ignored). */
export function keyProgressOf(details: unknown): KeyProgress {
  const d = asRecord(details);
  const out: KeyProgress = {};
  if (typeof d.creationId === 'string' && d.creationId) out.creationId = d.creationId;
  for (const field of ['acceptedAtMs', 'costUsd', 'lastPollAtMs', 'reuseWaitSinceMs', 'notFoundSinceMs'] as const) {
    const v = d[field];
    if (typeof v === 'number' && Number.isFinite(v)) out[field] = v;
  }
  for (const field of ['ambiguousTries', 'unrecognizedNotFound', 'notFoundPolls', 'notFoundRun'] as const) {
    if (d[field] !== undefined) out[field] = countOf(d[field]);
  }
  if (d.generated === true) out.generated = true;
  if (d.mayBeSent === true) out.mayBeSent = true;
  if (typeof d.pollExplore === 'boolean') out.pollExplore = d.pollExplore;
  if (Array.isArray(d.statusChecks)) out.statusChecks = d.statusChecks.flatMap(statusCheckOf);
  const check = keyCheckOf(d.keyCheck);
  if (check) out.keyCheck = check;
  const replay = asRecord(d.notFoundReplay);
  if (
    (replay.state === 'due' || replay.state === 'same' || replay.state === 'other') &&
    typeof replay.tried === 'string'
  ) {
    out.notFoundReplay = {
      state: replay.state,
      tried: replay.tried,
      ...(typeof replay.creationId === 'string' ? { creationId: replay.creationId } : {}),
      ...(typeof replay.costUsd === 'number' && Number.isFinite(replay.costUsd) ? { costUsd: replay.costUsd } : {}),
      ...(typeof replay.message === 'string' ? { message: replay.message } : {}),
    };
  }
  return out;
}

/** A {@link KeyCheck} read back from heartbeat details (anything else there is ignored). */
function keyCheckOf(value: unknown): KeyCheck | undefined {
  const c = asRecord(value);
  const results: readonly unknown[] = Object.values(KeyCheckResult);
  if (!results.includes(c.result) || typeof c.carrier !== 'string' || typeof c.message !== 'string') return undefined;
  const d = asRecord(c.duplicate);
  const cost = typeof d.costUsd === 'number' && Number.isFinite(d.costUsd) ? { costUsd: d.costUsd } : {};
  return {
    result: c.result as KeyCheckResult,
    carrier: c.carrier,
    message: c.message,
    ...(typeof c.advice === 'string' ? { advice: c.advice } : {}),
    ...(typeof d.creationId === 'string' ? { duplicate: { creationId: d.creationId, ...cost } } : {}),
  };
}

/** A {@link StatusCheck} found in heartbeat details (as a list of at most one), its fields checked. */
function statusCheckOf(value: unknown): StatusCheck[] {
  const c = asRecord(value);
  if (typeof c.status !== 'string') return [];
  const image = asRecord(c.image);
  const text = (v: unknown) => (typeof v === 'string' ? v : undefined);
  const at = text(image.at);
  const type = text(image.type);
  const out: StatusCheck = { status: c.status };
  if (at !== undefined && type !== undefined) out.image = { at, type };
  for (const field of ['why', 'atImagePath', 'of'] as const) {
    const v = text(c[field]);
    if (v !== undefined) out[field] = v;
  }
  if (c.unsettled === true) out.unsettled = true;
  if (countOf(c.judged) > 1) out.judged = countOf(c.judged);
  return [out];
}

/** The same failure with the key's progress as its second detail (a cancellation or another error as it is). */
export function withProgress(err: unknown, progress: KeyProgress): unknown {
  if (!(err instanceof ApplicationFailure)) return err;
  return failureWith(err, { details: [err.details?.[0] ?? null, progress] });
}
