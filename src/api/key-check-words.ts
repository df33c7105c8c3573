import { formatWait, KeyCheckResult, type KeyCheck } from '../model';
import { describeKeyCarrier } from './key-carrier';
import type { ServiceConfig } from './service-config';

/**
 * The words of each result of a check that the service honours the key (the canary's, doctor's paid test), for the key
 * where `config` carries it: one sentence naming the carrier, and what to do when it was not proven honoured.
 */
export function keyCheckWords(config: Pick<ServiceConfig, 'idempotencyHeader' | 'idempotencyField'>) {
  const carrier = describeKeyCarrier(config);
  const unproven = `the idempotency key at ${carrier} could not be proven honoured`;
  const notHonoured = `the service did not honour the idempotency key at ${carrier}: every retry may pay twice`;
  const fix =
    'set IMAGEGEN_IDEMPOTENCY_HEADER or IMAGEGEN_IDEMPOTENCY_FIELD to where the service reads the key, ' +
    'restart the worker, then resume: the next row is sent alone and proves the key again';
  const retry = 'resume to send the next row alone and try again';
  const make = (result: KeyCheckResult, message: string, advice?: string): KeyCheck => ({
    result,
    carrier,
    message,
    ...(advice ? { advice } : {}),
  });
  return {
    honoured: (creationId: string) =>
      make(KeyCheckResult.Honoured, `the key at ${carrier} was honoured: the same creation came back (${creationId})`),
    duplicate: (duplicate: { creationId: string; costUsd?: number }) => ({
      ...make(
        KeyCheckResult.NotHonoured,
        `${notHonoured}; the check paid a second creation ${duplicate.creationId}`,
        fix,
      ),
      duplicate,
    }),
    foundBefore: (by: { batchId?: string; rowId?: string }) =>
      make(
        KeyCheckResult.NotHonoured,
        `${notHonoured}; a check under these same settings found so before` +
          `${by.batchId ? ` (batch ${by.batchId}${by.rowId ? `, row ${by.rowId}` : ''})` : ''}, so none is sent again`,
        `${fix}; if the service changed, prove it with imagebatch doctor --spend-one`,
      ),
    judgedAnew: (answer: string) =>
      make(KeyCheckResult.NotHonoured, `${notHonoured}; sent again, it was judged anew (${answer}): nothing held`, fix),
    refused: (answer: string) =>
      make(
        KeyCheckResult.Unclear,
        `${unproven}: sent again, it was answered ${answer}, not its creation, so a retry after a lost answer ` +
          'could not find it; nothing was charged by it',
        retry,
      ),
    noAnswer: (lastError: string) =>
      make(
        KeyCheckResult.Unclear,
        `${unproven}: its second send got no answer that can be read (${lastError}); a second charge may have been ` +
          'made, and it is not sent again',
        retry,
      ),
    neverLeft: (lastError: string) =>
      make(
        KeyCheckResult.Unclear,
        `${unproven}: its second send never left (${lastError}); nothing was charged`,
        retry,
      ),
    cutOff: () =>
      make(
        KeyCheckResult.Unclear,
        `${unproven}: its second send left and its answer is not known (the worker stopped); a second charge may ` +
          'have been made, and it is not sent again',
        retry,
      ),
    tooOld: (windowMs: number) =>
      make(
        KeyCheckResult.Unclear,
        `${unproven}: the key was first sent longer ago than the service remembers keys (${formatWait(windowMs)}, ` +
          'IMAGEGEN_IDEMPOTENCY_WINDOW_MS), so it is not sent again',
        retry,
      ),
  };
}

export type KeyCheckWords = ReturnType<typeof keyCheckWords>;

/**
 * Why a batch stops when a creation not found for a whole window had its key sent again, and a new creation came
 * back: the service did not keep the key (`tried`: `answered 404 ERR_NOT_FOUND for 90 s (14 polls)`).
 */
export function keyNotKeptText(
  config: Pick<ServiceConfig, 'idempotencyHeader' | 'idempotencyField'>,
  lost: { creationId: string; tried: string },
  second: { creationId: string; costUsd?: number },
): string {
  const cost = second.costUsd === undefined ? '' : ` ($${second.costUsd})`;
  return (
    `the service did not keep the idempotency key at ${describeKeyCarrier(config)}: creation ${lost.creationId} ` +
    `${lost.tried}, and the key sent again made a new creation ${second.creationId}${cost}: every retry may pay ` +
    `twice. Creation ${lost.creationId} is lost; ask the service how it reads and keeps keys ` +
    '(IMAGEGEN_IDEMPOTENCY_HEADER, IMAGEGEN_IDEMPOTENCY_FIELD), then resume: the row ends lost'
  );
}

/** A service's answer in a check's words: `HTTP 402 insufficient_balance: top up`. */
export function answerText(details: { httpStatus: number; code?: string; message: string }): string {
  return `HTTP ${details.httpStatus}${details.code ? ` ${details.code}` : ''}: ${details.message}`;
}
