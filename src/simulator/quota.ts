import { ErrorCode } from '../api/contract';
import { retryAfterSeconds } from './clock';
import { earliestFinish, type CreationStore } from './creations';
import { errorResponse, retryAfter, type ApiResponse } from './responses';
import { type ParsedBody } from './submit-body';

/** The quota limits of the config: creations in flight per account and per model (null = off). */
export interface QuotaLimits {
  accountConcurrency: number | null;
  modelCapacity: number | null;
}

/** The 429 of a submission over the account's or the model's quota of creations in flight, if it is. */
export function quotaRefusal(
  creations: CreationStore,
  limits: QuotaLimits,
  accountId: string,
  parsed: ParsedBody,
  now: number,
): ApiResponse | undefined {
  const { accountConcurrency, modelCapacity } = limits;
  const ofAccount = creations.inFlightOfAccount(accountId);
  if (accountConcurrency !== null && ofAccount.size >= accountConcurrency) {
    return errorResponse(
      ErrorCode.QuotaExceeded,
      'Too many creations in flight for this account.',
      { scope: 'account', reason: 'concurrency_limit', limit: accountConcurrency },
      retryAfter(retryAfterSeconds(earliestFinish(ofAccount) - now)),
    );
  }
  const model = parsed.ok ? (parsed.value as { model?: unknown } | null)?.model : undefined;
  if (modelCapacity !== null && typeof model === 'string') {
    const ofModel = creations.inFlightOfModel(model);
    if (ofModel.size >= modelCapacity) {
      return errorResponse(
        ErrorCode.QuotaExceeded,
        'The model is at capacity.',
        { scope: 'model', reason: 'capacity', limit: modelCapacity, model },
        retryAfter(retryAfterSeconds(earliestFinish(ofModel) - now)),
      );
    }
  }
  return undefined;
}
