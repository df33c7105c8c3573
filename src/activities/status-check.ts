import type { Dispatcher } from 'undici';
import type { ServiceConfig } from '../api/service-config';
import type { UnjudgedRecord } from '../api/unrecognised-status';
import type { StatusCheck } from '../model';
import { downloadSettings, guardedDownloadDispatcher } from './download';
import { sniffImageAt } from './download-fetch';

/**
 * A record whose status is in no set (success, failed, in flight) judged by the bytes of its URLs (see
 * src/api/unrecognised-status.ts): each fetched through the download guard, without the API key, no further than its
 * first bytes, nothing saved; in order, until one is an image. For `createImage` (create-image/status-check.ts) and
 * doctor's paid test alike.
 */

/** The longest a URL is waited for, redirects and first bytes included (at most the request timeout). */
export const STATUS_CHECK_TIMEOUT_MS = 10_000;

/** Characters of why a URL is no image kept. */
const MAX_WHY_CHARS = 300;

export interface JudgeOptions {
  config: ServiceConfig;
  dispatcher: Dispatcher;
  now: () => number;
  signal?: AbortSignal;
}

/**
 * What `record`, whose status is `status`, holds: the first URL that is an image, else why none is (`unsettled` when a
 * URL gave no answer).
 */
export async function judgeRecord(status: string, record: UnjudgedRecord, options: JudgeOptions): Promise<StatusCheck> {
  const { config } = options;
  const fetch = {
    ...downloadSettings(config),
    requestTimeoutMs: Math.min(config.requestTimeoutMs, STATUS_CHECK_TIMEOUT_MS),
    dispatcher: options.dispatcher,
    outputRoot: '',
    now: options.now,
    ...(options.signal ? { signal: options.signal } : {}),
  };
  const why: string[] = [];
  let unsettled = false;
  for (const { url, at } of record.urls) {
    const judged = await sniffImageAt(url, fetch);
    if ('type' in judged) return { status: wordOf(status), image: { at, type: judged.type } };
    why.push(`${at}: ${judged.why}`);
    unsettled ||= judged.transient === true;
  }
  return {
    status: wordOf(status),
    ...(record.atImagePath === undefined ? {} : { atImagePath: record.atImagePath }),
    ...(why.length > 0 ? { why: why.join('; ').slice(0, MAX_WHY_CHARS) } : {}),
    ...(unsettled ? { unsettled: true as const } : {}),
  };
}

/** A status word as a check keeps it: trimmed, lower case, at most 64 characters. */
export function wordOf(status: string): string {
  return status.trim().toLowerCase().slice(0, 64);
}

/** Doctor's judge: the batches' own, on a guarded dispatcher of its own (closed after), unless one is given. */
export function doctorStatusJudge(deps: { config: ServiceConfig; now: () => number; downloadDispatcher?: Dispatcher }) {
  return async (status: string, record: UnjudgedRecord, signal?: AbortSignal): Promise<StatusCheck> => {
    const dispatcher = deps.downloadDispatcher ?? guardedDownloadDispatcher(deps.config, 2);
    try {
      return await judgeRecord(status, record, {
        config: deps.config,
        dispatcher,
        now: deps.now,
        ...(signal ? { signal } : {}),
      });
    } finally {
      if (!deps.downloadDispatcher) await dispatcher.close();
    }
  };
}
