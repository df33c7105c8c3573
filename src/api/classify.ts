import type { RejectedDetails } from '../model';
import { DEFAULT_PENDING_STATUSES, ErrorCode, FAILED_STATUS, isRetryableFailureMessage } from './contract';
import { authStop, paymentStop, unrecognisedStatusStop } from './batch-stops';
import { asRecord, clip, OutcomeLimit, text } from './outcome-text';
import { parseRetryAfter, retryAfterOr } from './retry-after';
import { readUsd } from './money';
import {
  DEFAULT_ERROR_FIELDS,
  DEFAULT_ID_FIELDS,
  DEFAULT_MAX_INLINE_IMAGE_BYTES,
  DEFAULT_MODEL_ID_FIELDS,
  DEFAULT_STATUS_FIELDS,
  ErrorEnvelope,
  imagesOf,
  parseCreation,
  parseJson,
  parseModels,
  type CreationFields,
} from './schemas';
import { recordKeysOf } from './record-keys';
import { judgeInline } from './unrecognised-status';
import { RequestKind, type Outcome } from './outcome';

/**
 * The one place where a response (or the lack of one) of the image service gets its meaning. Pure: no I/O, no
 * clock (the time is an input), no randomness, no Temporal: an {@link Outcome} is plain data, and only the activities
 * turn a failing one into the `ApplicationFailure` that workflows branch on (`src/activities/failures.ts`).
 */

export interface ClassifyInput {
  kind: RequestKind;
  /** HTTP status; undefined when no response arrived (then `error` says why). */
  status?: number;
  /** Response headers, lower-case names. */
  headers?: Readonly<Record<string, string | string[] | undefined>>;
  /** Response body as text (already redacted of the key). */
  body?: string;
  /** Why no (usable) response arrived: connection reset, timeout, body too large... (already redacted). */
  error?: string;
  /**
   * With no response: the error proves that no byte of the request left (a connect-phase error, see not-sent.ts).
   * @default false
   */
  notSent?: boolean;
  /** Current time, for Retry-After in the HTTP-date form. */
  nowMs: number;
  /** Statuses that mean success (lower case). */
  successStatuses: readonly string[];
  /** Where a creation record says what it cost (dotted paths, in order): see `readUsd`. */
  costFields: readonly string[];
  /** Where a model record says its price per image (dotted paths, in order). */
  priceFields: readonly string[];
  /** Where a creation record carries its id (paths, in order). @default DEFAULT_ID_FIELDS */
  idFields?: readonly string[];
  /** Where a creation record carries its status. @default DEFAULT_STATUS_FIELDS */
  statusFields?: readonly string[];
  /** Where a failed creation's record carries its error text. @default DEFAULT_ERROR_FIELDS */
  errorFields?: readonly string[];
  /** Where a succeeded creation's record carries its images (then discovery, see `imagesOf`). @default DEFAULT_IMAGE_FIELDS */
  imageFields?: readonly string[];
  /** `IMAGEGEN_IMAGE_DISCOVERY`: whether a record whose image paths find nothing is searched. @default true */
  imageDiscovery?: boolean;
  /** Statuses that say a creation is in flight (lower case). @default DEFAULT_PENDING_STATUSES */
  pendingStatuses?: readonly string[];
  /** Where a model record carries its id. @default DEFAULT_MODEL_ID_FIELDS */
  modelIdFields?: readonly string[];
  /** `IMAGEGEN_MAX_DOWNLOAD_BYTES`: what bounds an inline (base64) image. @default DEFAULT_MAX_INLINE_IMAGE_BYTES */
  maxDownloadBytes?: number;
  /** Wait used when a 429 or 503 gives no usable Retry-After. */
  defaultRetryAfterMs: number;
}

/** Headers that some services set on a replayed idempotent response. */
const REPLAY_HEADERS = [
  'idempotent-replayed',
  'idempotency-replayed',
  'x-idempotent-replayed',
  'x-idempotency-replayed',
];

export { OutcomeLimit } from './outcome-text';
export { RequestKind, type FailureOutcome, type Outcome, type RateLimitedInfo } from './outcome';

export function classifyResponse(input: ClassifyInput): Outcome {
  const { kind, status } = input;
  if (status === undefined) {
    const lastError = input.error ?? 'no response';
    return input.notSent === true ? { kind: 'notSent', lastError } : { kind: 'ambiguous', lastError };
  }
  if (input.error !== undefined) {
    // The headers arrived, the body did not (timeout, reset, too large): as good as no answer.
    return { kind: 'ambiguous', httpStatus: status, lastError: `HTTP ${status}: ${input.error}` };
  }
  const json = parseJson(input.body);
  const envelope = ErrorEnvelope.safeParse(json);
  const err = envelope.success ? envelope.data.error : undefined;
  const code = clip(err?.code ?? `HTTP_${status}`);
  const message = clip(err?.message ?? describeBody(status, input.body));
  const retryAfterMs = () =>
    retryAfterOr(headerOf(input.headers, 'retry-after'), input.nowMs, input.defaultRetryAfterMs);

  if (status === 401 || status === 403) return { kind: 'batchStop', details: authStop(status, json, err) };
  if (status === 402) return { kind: 'batchStop', details: paymentStop(err) };
  if (status === 429) {
    const d = asRecord(err?.details);
    return {
      kind: 'rateLimited',
      httpStatus: status,
      code,
      message,
      retryAfterMs: retryAfterMs(),
      ...(typeof d.scope === 'string' ? { scope: clip(d.scope) } : {}),
      ...(typeof d.reason === 'string' ? { reason: clip(d.reason) } : {}),
    };
  }

  switch (kind) {
    case RequestKind.Submit:
      return classifySubmit(input, status, json, err, code, message, retryAfterMs);
    case RequestKind.Poll:
      return classifyPoll(input, status, json, err, code, message, retryAfterMs);
    case RequestKind.Models:
      return classifyModels(input, status, json, code, message, retryAfterMs);
  }
}

type EnvelopeError = ErrorEnvelope['error'] | undefined;

function classifySubmit(
  input: ClassifyInput,
  status: number,
  json: unknown,
  err: EnvelopeError,
  code: string,
  message: string,
  retryAfterMs: () => number,
): Outcome {
  if (status >= 200 && status < 300) {
    const record = parseCreation(json, creationFieldsOf(input));
    if (record?.id === undefined) {
      // Possibly accepted and charged: only the same key may find out.
      return {
        kind: 'ambiguous',
        httpStatus: status,
        lastError: `HTTP ${status} without a creation id${shapeOf(json, status, input.body, 'IMAGEGEN_ID_FIELDS')}`,
      };
    }
    const replayed = replayHeader(input.headers);
    return {
      kind: 'accepted',
      creationId: record.id,
      status: clip(record.status ?? 'accepted'),
      ...costOf(record.fields, input.costFields),
      ...(replayed === undefined ? {} : { replayed }),
    };
  }
  if (status === 400 || status === 404) {
    return {
      kind: 'rejected',
      details: {
        httpStatus: status,
        code,
        message:
          err || status !== 404
            ? message
            : `${message} (no error envelope: check IMAGEGEN_BASE_URL and IMAGEGEN_SUBMIT_PATH)`,
        fieldErrors: fieldErrorsOf(err?.details),
      },
    };
  }
  // 502 and 503 are refunds only when the service itself says so; a proxy's 502/503 leaves the outcome unknown.
  if (status === 502 && code === ErrorCode.GenerationFailed) {
    return { kind: 'refunded', details: { httpStatus: status, code, message } };
  }
  if (status === 503 && code === ErrorCode.ProviderUnavailable) {
    return { kind: 'refunded', details: { httpStatus: status, code, message, retryAfterMs: retryAfterMs() } };
  }
  // 500, other 5xx, undocumented statuses: not known whether the request was charged; the same key again.
  const hasRetryAfter = headerOf(input.headers, 'retry-after') !== undefined;
  return {
    kind: 'ambiguous',
    httpStatus: status,
    lastError: `HTTP ${status} ${code}: ${message}`,
    ...(hasRetryAfter ? { retryAfterMs: retryAfterMs() } : {}),
  };
}

function classifyPoll(
  input: ClassifyInput,
  status: number,
  json: unknown,
  err: EnvelopeError,
  code: string,
  message: string,
  retryAfterMs: () => number,
): Outcome {
  if (status >= 200 && status < 300) {
    const record = parseCreation(json, creationFieldsOf(input));
    if (record?.status === undefined) {
      return {
        kind: 'malformed',
        httpStatus: status,
        lastError: `HTTP ${status} without a creation status${shapeOf(json, status, input.body, 'IMAGEGEN_STATUS_FIELDS')}`,
      };
    }
    const statusName = clip(record.status);
    const normal = statusName.trim().toLowerCase();
    const cost = costOf(record.fields, input.costFields);
    if (normal === FAILED_STATUS) {
      // The contract's error is a string; another type is kept as its JSON text rather than hiding the status.
      const error = record.error === undefined || record.error === null ? '' : text(record.error);
      return {
        kind: 'ended',
        result: {
          outcome: 'failed',
          status: statusName,
          ...cost,
          error,
          retryable: isRetryableFailureMessage(error),
        },
      };
    }
    const images = () =>
      imagesOf(record, {
        ...(input.imageFields ? { imageFields: input.imageFields } : {}),
        ...(input.maxDownloadBytes === undefined ? {} : { maxInlineBytes: input.maxDownloadBytes }),
        ...(input.imageDiscovery === undefined ? {} : { discovery: input.imageDiscovery }),
      });
    const isIn = (set: readonly string[]) => set.some((s) => s.toLowerCase() === normal);
    if (isIn(input.successStatuses)) {
      const found = images();
      // A success showing no image names the record's fields (never values) in its error (src/api/record-keys.ts).
      const keys = found.length === 0 ? { recordKeys: recordKeysOf(record.fields) } : {};
      return { kind: 'ended', result: { outcome: 'succeeded', status: statusName, ...cost, images: found, ...keys } };
    }
    // A status in no set whose record holds an image (by its bytes) likely means success under another word: a person
    // says which. URLs are judged by the activity (unrecognised-status.ts); an inline image here.
    const pending = isIn(input.pendingStatuses ?? DEFAULT_PENDING_STATUSES);
    const held = pending ? undefined : judgeInline(images(), input.maxDownloadBytes ?? DEFAULT_MAX_INLINE_IMAGE_BYTES);
    if (held && 'image' in held) {
      const check = { status: normal, image: held.image };
      return { kind: 'batchStop', details: unrecognisedStatusStop(statusName, check, input.successStatuses) };
    }
    // A Retry-After on an answer in flight says when to poll it again (held in process, and the activity's delay).
    const hint = parseRetryAfter(headerOf(input.headers, 'retry-after'), input.nowMs);
    const unjudged = held ? { unrecognised: held.unjudged } : {};
    return { kind: 'inFlight', status: statusName, ...(hint ? { retryAfterMs: hint } : {}), ...unjudged };
  }
  if (status === 404) {
    // The contract's answer for an unknown id is ERR_NOT_FOUND; any other 404 (a proxy's page, a wrong path) says
    // nothing about the creation, so its outcome stays unknown rather than lost.
    if (err?.code === ErrorCode.NotFound) return { kind: 'notFound', httpStatus: status, code, message };
    return {
      kind: 'ambiguous',
      httpStatus: status,
      lastError: `HTTP ${status} ${code}: ${message}`,
      unrecognizedNotFound: true,
    };
  }
  if (status === 503) return { kind: 'rateLimited', httpStatus: status, code, message, retryAfterMs: retryAfterMs() };
  if (status >= 500) return { kind: 'ambiguous', httpStatus: status, lastError: `HTTP ${status} ${code}: ${message}` };
  return { kind: 'malformed', httpStatus: status, lastError: `HTTP ${status} ${code}: ${message}` };
}

function classifyModels(
  input: ClassifyInput,
  status: number,
  json: unknown,
  code: string,
  message: string,
  retryAfterMs: () => number,
): Outcome {
  if (status >= 200 && status < 300) {
    const models = parseModels(json, input.priceFields, input.modelIdFields ?? DEFAULT_MODEL_ID_FIELDS);
    return models
      ? { kind: 'models', models }
      : { kind: 'malformed', httpStatus: status, lastError: `HTTP ${status}: no model list in the body` };
  }
  if (status === 503) return { kind: 'rateLimited', httpStatus: status, code, message, retryAfterMs: retryAfterMs() };
  if (status >= 500) return { kind: 'ambiguous', httpStatus: status, lastError: `HTTP ${status} ${code}: ${message}` };
  return { kind: 'malformed', httpStatus: status, lastError: `HTTP ${status} ${code}: ${message}` };
}

function fieldErrorsOf(details: unknown): RejectedDetails['fieldErrors'] {
  const errors = asRecord(details).errors;
  if (!Array.isArray(errors)) return [];
  return (errors as unknown[]).slice(0, OutcomeLimit.fieldErrors).map((e) => {
    if (typeof e === 'string') return { field: '', message: clip(e) };
    const r = asRecord(e);
    const field = r.field ?? r.loc ?? r.path ?? r.name ?? '';
    const msg = r.message ?? r.msg ?? r.detail ?? e;
    const path = Array.isArray(field) ? clip(field.slice(0, 32).map(text).join('.')) : text(field);
    return { field: path, message: text(msg) };
  });
}

export function headerOf(headers: ClassifyInput['headers'] | undefined, name: string): string | undefined {
  const v = headers?.[name];
  return Array.isArray(v) ? v[0] : v;
}

function replayHeader(headers: ClassifyInput['headers']): boolean | undefined {
  for (const name of REPLAY_HEADERS) {
    const v = headerOf(headers, name);
    if (v !== undefined) return v.trim().toLowerCase() === 'true' || v.trim() === '1';
  }
  return undefined;
}

/** Where the fields of a creation record are read, as `input` says (the defaults for what it leaves out). */
function creationFieldsOf(input: ClassifyInput): CreationFields {
  return {
    idFields: input.idFields ?? DEFAULT_ID_FIELDS,
    statusFields: input.statusFields ?? DEFAULT_STATUS_FIELDS,
    errorFields: input.errorFields ?? DEFAULT_ERROR_FIELDS,
  };
}

/**
 * What a body that shows no creation record looks like, for a message: a JSON object by its top-level field names
 * only (never a value: it may be a signed URL, a prompt or megabytes of base64), any other JSON by its type, a body
 * that is not JSON by its start ({@link describeBody}).
 */
function shapeOf(json: unknown, status: number, body: string | undefined, setting: string): string {
  if (json === undefined) return `: ${describeBody(status, body)}`;
  if (Array.isArray(json)) return ` (the body is a JSON array of ${json.length} elements)`;
  if (json === null || typeof json !== 'object') return ` (the body is a JSON ${json === null ? 'null' : typeof json})`;
  const keys = recordKeysOf(json);
  const fields = keys.length > 0 ? clip(keys.join(', ')) : 'none';
  return ` at the fields of ${setting} (the body's top-level fields: ${fields}; set ${setting} to where it is)`;
}

/** A short description of an unexpected body: its start, or that it was empty or not JSON. */
function describeBody(status: number, body: string | undefined): string {
  if (body === undefined || body.trim() === '') return `HTTP ${status} with an empty body`;
  const oneLine = body.replace(/\s+/g, ' ').trim();
  return oneLine.length > 200 ? `${oneLine.slice(0, 200)}...` : oneLine;
}

/** What a creation record says it cost, when it says so (never a 0 for nothing said). */
function costOf(record: object, costFields: readonly string[]): { costUsd?: number } {
  const costUsd = readUsd(record, costFields);
  return costUsd === undefined ? {} : { costUsd };
}
