import { ErrorCode, HTTP_STATUS_OF } from '../api/contract';
import { type FieldError } from './validation';

/**
 * A response as data: handlers return it, the idempotency store keeps it, the server writes it. `after`
 * tells the server to do something other than a plain write (a slow write, or a reset connection).
 */
export interface ApiResponse {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

export type Delivery = { kind: 'send' } | { kind: 'slow'; delayMs: number } | { kind: 'reset' };

/** An error in the envelope, with the status the contract gives its code. */
export function errorResponse(
  code: ErrorCode,
  message: string,
  details: Record<string, unknown> = {},
  headers?: Record<string, string>,
): ApiResponse {
  return { status: HTTP_STATUS_OF[code], body: { error: { code, message, details } }, headers };
}

export function invalidRequest(errors: FieldError[], message = 'The request is invalid.'): ApiResponse {
  return errorResponse(ErrorCode.InvalidRequest, message, { errors });
}

export function retryAfter(seconds: number): Record<string, string> {
  return { 'retry-after': String(seconds) };
}
