import { BatchStopReason, type BatchStopDetails, type StatusCheck } from '../model';
import { AuthDetail } from './contract';
import { asRecord, clip, OutcomeLimit } from './outcome-text';
import { AuthFailureBody, type ErrorEnvelope } from './schemas';

/** What a batch stop says: the details of each answer that stops a batch until a person acts (src/api/classify.ts). */

type EnvelopeError = ErrorEnvelope['error'] | undefined;

/** 401 or 403: the reason the plain body names, else the one the status implies. */
export function authStop(status: number, json: unknown, err: EnvelopeError): BatchStopDetails {
  const plain = AuthFailureBody.safeParse(json);
  const detail = plain.success ? plain.data.detail : undefined;
  const known = Object.values(AuthDetail) as string[];
  let reason: BatchStopReason;
  if (detail !== undefined && known.includes(detail)) reason = detail as BatchStopReason;
  else if (status === 403) reason = BatchStopReason.AccountDisabled;
  else reason = BatchStopReason.ApiKeyInvalid;
  const message = clip(detail ?? err?.message ?? err?.code ?? `HTTP ${status}`);
  return { reason, httpStatus: status, message };
}

/** 402: insufficient balance or the monthly budget, with the amounts and the top-up link the service gives. */
export function paymentStop(err: EnvelopeError): BatchStopDetails {
  const d = asRecord(err?.details);
  const monthly = d.reason === BatchStopReason.MonthlyBudgetExceeded;
  const out: BatchStopDetails = {
    reason: monthly ? BatchStopReason.MonthlyBudgetExceeded : BatchStopReason.InsufficientBalance,
    httpStatus: 402,
    message: clip(err?.message ?? (monthly ? 'monthly budget exceeded' : 'insufficient balance')),
  };
  const required = numberOf(d.required ?? d.required_usd ?? d.amount ?? d.amount_usd);
  if (required !== undefined) out.requiredUsd = required;
  const balance = numberOf(d.balance ?? d.balance_usd);
  if (balance !== undefined) out.balanceUsd = balance;
  const url = typeof d.top_up_url === 'string' ? d.top_up_url : firstMatching(d, /url|link|top_?up/i, 'string');
  // A URL cut short would be a wrong link: one longer than any real top-up page is left out.
  if (typeof url === 'string' && url.length <= OutcomeLimit.text) out.topUpUrl = url;
  const cap = numberOf(d.monthly_cap_usd ?? firstMatching(d, /cap|budget|limit/i, 'number'));
  if (cap !== undefined) out.monthlyCapUsd = cap;
  return out;
}

function firstMatching(d: Record<string, unknown>, re: RegExp, type: 'string' | 'number'): unknown {
  for (const [k, v] of Object.entries(d)) {
    if (k === 'required' || k === 'balance' || k === 'reason') continue;
    if (re.test(k) && typeof v === type) return v;
  }
  return undefined;
}

function numberOf(v: unknown): number | undefined {
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (typeof v === 'string' && /^\d+(\.\d+)?$/.test(v)) return Number(v);
  return undefined;
}

/** Characters of a status word, and of where an image sat, that a stop's message names at most. */
const NAMED_CHARS = { status: 64, source: 200 } as const;

/**
 * A poll whose status (`status`) is in none of the worker's sets, while its record holds an image judged by its bytes,
 * or something at a configured image path (`check`, src/api/unrecognised-status.ts): what the word means is for a
 * person to say. The message names the word, where the image sat and the settings. Only an image judged by its bytes
 * is called one, and only then is the word offered as a success (`successStatuses` spelled out whole with it added).
 */
export function unrecognisedStatusStop(
  status: string,
  check: StatusCheck,
  successStatuses: readonly string[],
): BatchStopDetails {
  const word = status.trim().slice(0, NAMED_CHARS.status);
  const inFlight = `if it means still in flight, add it to IMAGEGEN_PENDING_STATUSES`;
  const restart = 'restart the worker, then resume the batch';
  const none = `the creation's status ${JSON.stringify(word)} is none of the success, failed or in-flight statuses`;
  let message: string;
  if (check.image) {
    const success = [...successStatuses, word.toLowerCase()].join(',');
    message =
      `${none}, but its record holds an image (${check.image.type} by its bytes) at ` +
      `${check.image.at.slice(0, NAMED_CHARS.source)}: if it means success, set ` +
      `IMAGEGEN_SUCCESS_STATUSES=${success}; ${inFlight}; ${restart}`;
  } else {
    const where = (check.atImagePath ?? 'an image path').slice(0, NAMED_CHARS.source);
    message =
      `${none}, and its record holds something at the image path ${where}, but nothing it holds is an image ` +
      `(${check.why ?? 'no URL'}): ${inFlight}; if it means success, set IMAGEGEN_IMAGE_FIELDS to where its images ` +
      `are; ${restart}`;
  }
  return { reason: BatchStopReason.UnrecognisedStatus, httpStatus: 200, message: clip(message) };
}
