import { ApplicationFailure } from '@temporalio/common';
import type { ApiKeyProvider } from '../api/api-key';
import { redactJsonValue, redactRawText } from '../api/redact';
import { failureWith } from './failures';

/**
 * `err` with the API key removed from its message and details, in every form redact.ts knows: what an image host
 * says of itself (a content type, a redirect's location, a body's first bytes) is kept in a failure, and a failure
 * goes into history, the row's record and the ledger store. Anything else is returned as it is.
 */
export function redactedFailure(err: unknown, apiKey: ApiKeyProvider): unknown {
  if (!(err instanceof ApplicationFailure)) return err;
  let key: string | undefined;
  try {
    key = apiKey();
  } catch {
    return err; // no key loaded: none can be in the text
  }
  const message = redactRawText(err.message, key);
  const details = err.details ? redactJsonValue([...err.details], key) : undefined;
  if (message === err.message && JSON.stringify(details) === JSON.stringify(err.details)) return err;
  return failureWith(err, { message, ...(details ? { details } : {}) });
}
