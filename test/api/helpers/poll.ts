import { classifyResponse, RequestKind, type ClassifyInput, type Outcome } from '../../../src/api/classify';
import { DEFAULT_SUCCESS_STATUSES } from '../../../src/api/contract';
import { DEFAULT_COST_FIELDS, DEFAULT_PRICE_FIELDS } from '../../../src/api/money';

/** A 200 answer to a poll with `body` as its JSON, classified with the default settings unless `extra` says others. */
export function poll(body: unknown, extra: Partial<ClassifyInput> = {}): Outcome {
  return classifyResponse({
    kind: RequestKind.Poll,
    status: 200,
    headers: {},
    body: JSON.stringify(body),
    nowMs: 0,
    successStatuses: DEFAULT_SUCCESS_STATUSES,
    costFields: DEFAULT_COST_FIELDS,
    priceFields: DEFAULT_PRICE_FIELDS,
    defaultRetryAfterMs: 1000,
    ...extra,
  });
}
