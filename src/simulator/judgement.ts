import { ErrorCode } from '../api/contract';
import { type ChargeRefusal } from './billing';
import { FaultKind, type Fault } from './faults';
import { errorResponse, type ApiResponse, type Delivery } from './responses';

/** A judged submission: what to answer, what the idempotency store keeps, and how to send the answer. */
export interface Judged {
  response: ApiResponse;
  /** What the idempotency store keeps under the key (depends on the variant), if anything. */
  store: ApiResponse | undefined;
  delivery: Delivery;
}

/** A plain write of the response. */
export const SEND: Delivery = { kind: 'send' };

/** The 402 of a charge the wallet or the key's monthly budget cannot cover. */
export function chargeRefusalResponse(refusal: ChargeRefusal, topUpUrl: string): ApiResponse {
  return refusal.reason === 'wallet'
    ? errorResponse(ErrorCode.InsufficientBalance, 'The wallet cannot cover this request.', {
        required: refusal.requiredUsd,
        balance: refusal.balanceUsd,
        top_up_url: topUpUrl,
      })
    : errorResponse(ErrorCode.InsufficientBalance, 'The monthly budget of this API key is exhausted.', {
        reason: 'monthly_budget_exceeded',
        monthly_cap_usd: refusal.capUsd,
        required: refusal.requiredUsd,
        top_up_url: topUpUrl,
      });
}

/**
 * How an accepted (charged) submission is answered under its fault: a 500 after the charge, a reset connection,
 * a slow answer (`slowDelayMs` unless the fault names its own), or the 202 itself.
 */
export function acceptedDelivery(fault: Fault, accepted: ApiResponse, allJudged: boolean, slowDelayMs: number): Judged {
  switch (fault.kind) {
    case FaultKind.InternalAfterCharge: {
      const failed = errorResponse(ErrorCode.Internal, 'Internal error.');
      return { response: failed, store: allJudged ? failed : accepted, delivery: SEND };
    }
    case FaultKind.ResetAfterCommit:
      return { response: accepted, store: accepted, delivery: { kind: 'reset' } };
    case FaultKind.Slow:
      return {
        response: accepted,
        store: accepted,
        delivery: { kind: 'slow', delayMs: fault.delayMs ?? slowDelayMs },
      };
    case FaultKind.None:
    case FaultKind.InternalBeforeCharge:
    case FaultKind.GenerationFailed:
    case FaultKind.ProviderUnavailable:
    case FaultKind.FailSafety:
    case FaultKind.FailNoImage:
    case FaultKind.FailTimedOut:
    case FaultKind.FailGeneration:
      return { response: accepted, store: accepted, delivery: SEND };
  }
}
