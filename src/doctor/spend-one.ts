import path from 'node:path';
import { idempotencyKeyProblem } from '../api/client';
import { FAILED_STATUS } from '../api/contract';
import { describeKeyCarrier } from '../api/key-carrier';
import { findRecordFields, type RecordFindings } from '../api/record-findings';
import { redactJsonValue, redactRawText } from '../api/redact';
import { imagesOf } from '../api/schemas';
import type { ImageRef, PollCreationResult, StatusCheck } from '../model';
import { SERVICE_CONFIG_ENV } from '../config/service-config';
import { costCheck, imageHostCheck, imagesCheck, recordFieldsCheck, recordOf } from './record-checks';
import { checkKeyHonoured } from './key-check';
import { keyPaths, readRecords, writeRecords } from './record-file';
import { recordSettings } from './settings-to-write';
import { pollUntilEnded, readingOf, submitOne, type Polled, type SpendContext } from './spend-requests';
import { CheckResult, type DoctorCheck, type SpendOneReport } from './types';

/**
 * `doctor --spend-one`: ONE creation under an idempotency key the user can see and a re-run reuses, followed; what
 * its record showed (its keys, where each field was, what its status means to the settings), the settings it calls
 * for, and its images saved.
 */

/** The record of paid tests: one entry per idempotency key, written before the request leaves. */
export const SPEND_ONE_RECORD = 'doctor-spend-one.json';

/** The idempotency key of a paid test: visible, and the same on every re-run with the same test id and model. */
export function spendOneKey(testId: string, model: string): string {
  return `imagebatch-doctor/${testId}/${model}`;
}

/** `--spend-one`: one creation under a visible, re-usable key; its record's shape, its mapping, its images. */
export async function spendOne(ctx: SpendContext): Promise<SpendOneReport> {
  const { options, add } = ctx;
  const idempotencyKey = spendOneKey(options.testId, options.model);
  const out: SpendOneReport = { idempotencyKey };
  if (!inputAccepted(ctx, idempotencyKey)) return out;
  const outDir = path.resolve(ctx.deps.outputRoot, options.outDir);
  const recordFile = path.join(outDir, SPEND_ONE_RECORD);
  const records = await readRecords(recordFile);
  const deadline = ctx.now() + options.maxWaitMs;
  const creationId = await submission(ctx, out, { recordFile, records, deadline });
  if (creationId === undefined) return out;
  out.creationId = creationId;
  // The first answer is known: the key goes once more, and the same creation must come back.
  const honoured = await checkKeyHonoured(ctx, idempotencyKey, creationId, { recordFile, records, deadline });

  const polled = await pollUntilEnded(ctx, creationId, deadline);
  if (polled.kind === 'failed') {
    add({ name: 'poll', result: CheckResult.Fail, ...polled.check });
    return out;
  }
  const result = readRecord(ctx, creationId, polled, out);
  if (result?.outcome !== 'succeeded') return out;
  const images = result.images;
  if (images.length === 0) {
    add({
      name: 'mapped images',
      result: CheckResult.Fail,
      found: 'a succeeded creation with no image reference found: a batch would save nothing',
      hint: 'the keys above show where the images are; see docs/real-service.md',
    });
    return out;
  }
  add(imagesCheck(images, out.fields));
  add(imageHostCheck(images, ctx.deps.config));
  await saveImages(ctx, creationId, images, outDir, out);
  if (out.saved !== undefined && polled.kind === 'ended' && ctx.deps.proveService && !honoured) {
    add({ name: 'proof', result: CheckResult.Warn, found: 'not recorded: the key was not proven honoured' });
  } else if (out.saved !== undefined && polled.kind === 'ended' && ctx.deps.proveService) {
    await ctx.deps.proveService(creationId).then(
      () =>
        add({ name: 'proof', result: CheckResult.Ok, found: 'recorded: a batch on these settings skips its canary' }),
      (err: unknown) =>
        add({
          name: 'proof',
          result: CheckResult.Warn,
          found: `not recorded (${String(err)}): a batch sends its canary`,
        }),
    );
  }
  return out;
}

/** Whether the key can be sent and the model is in the catalog (when it was read); else the check says why. */
function inputAccepted(ctx: SpendContext, idempotencyKey: string): boolean {
  const { options, add } = ctx;
  const keyProblem = idempotencyKeyProblem(idempotencyKey);
  if (keyProblem) {
    add({ name: 'spend one', result: CheckResult.Fail, found: `idempotency key ${keyProblem}`, invalidInput: true });
    return false;
  }
  if (ctx.models !== undefined && !ctx.models.some((m) => m.id === options.model)) {
    add({
      name: 'spend one',
      result: CheckResult.Fail,
      found: `model ${options.model} is not in the account's catalog; nothing was submitted`,
      hint: `pick one of: ${ctx.models.map((m) => m.id).join(', ')}`,
      invalidInput: true,
    });
    return false;
  }
  return true;
}

/**
 * The creation of the paid test: the one its record holds (nothing is sent), else the one the submission creates,
 * written to the record before the request leaves and after it was accepted. Undefined when there is none.
 */
async function submission(
  ctx: SpendContext,
  out: SpendOneReport,
  file: { recordFile: string; records: Awaited<ReturnType<typeof readRecords>>; deadline: number },
): Promise<string | undefined> {
  const { options, add } = ctx;
  const { config } = ctx.deps;
  const { idempotencyKey } = out;
  const { recordFile, records, deadline } = file;
  const window = `${Math.round(config.idempotencyWindowMs / 3_600_000)} h`;
  const known = records[idempotencyKey];
  if (known?.creationId !== undefined) {
    out.fromRecord = true;
    add({
      name: 'submission',
      result: CheckResult.Ok,
      found: `not sent: ${recordFile} holds key ${idempotencyKey} with creation ${known.creationId}; following it (nothing paid again)`,
      hint: `--test-id <another name> pays for a new test`,
    });
    return known.creationId;
  }
  if (known && ctx.now() - known.sentAt > config.idempotencyWindowMs) {
    add({
      name: 'submission',
      result: CheckResult.Fail,
      found: `key ${idempotencyKey} was sent ${new Date(known.sentAt).toISOString()} with no known answer, longer ago than the service remembers keys (${window}): sending it again might pay twice`,
      hint: `--test-id <another name> pays for a new test`,
    });
    return undefined;
  }
  const sentAt = known?.sentAt ?? ctx.now();
  records[idempotencyKey] = { model: options.model, sentAt };
  await writeRecords(recordFile, records);
  const submitted = await submitOne(ctx, idempotencyKey, deadline);
  if (submitted.kind !== 'accepted') {
    add({ name: 'submission', result: CheckResult.Fail, ...submitted.check });
    return undefined;
  }
  const { creationId } = submitted;
  out.creationId = creationId;
  if (submitted.replayed !== undefined) out.replayed = submitted.replayed;
  records[idempotencyKey] = { model: options.model, sentAt, creationId };
  await writeRecords(recordFile, records);
  add({
    name: 'submission',
    result: CheckResult.Ok,
    found:
      `HTTP 202, creation ${creationId}, key ${idempotencyKey} (in the ${describeKeyCarrier(config)})` +
      (submitted.replayed === true
        ? ': a replay of the earlier acceptance, nothing charged again'
        : submitted.replayed === false
          ? ': a new creation, charged once'
          : '') +
      (ctx.models === undefined ? ` (the catalog could not tell whether the account has ${options.model})` : ''),
    hint: `re-running with the same --test-id and model reuses this key (the service replays it for ${window}; ${recordFile} remembers it after that): nothing is paid twice`,
  });
  return creationId;
}

/**
 * What the ended creation's record shows: the poll, its shape (key paths only), where its fields are and the
 * settings they call for, what its status means to the settings, its cost. Returns the creation as a batch reads it;
 * undefined for a status in no set on a record that holds no image (judged by its bytes): not known to be a success.
 */
function readRecord(
  ctx: SpendContext,
  creationId: string,
  polled: Exclude<Polled, { kind: 'failed' }>,
  out: SpendOneReport,
): PollCreationResult | undefined {
  const { add } = ctx;
  const { config } = ctx.deps;
  add({
    name: 'poll',
    result: CheckResult.Ok,
    found: `${polled.polls} poll(s) of ${config.creationPath.replace('{id}', creationId)}, ${polled.intervalMs} ms or more apart`,
  });
  ctx.settle({
    name: 'creation path',
    result: CheckResult.Ok,
    found: `the paid creation was read at ${config.creationPath} (a made-up id could not tell)`,
  });
  const shape = polled.json === undefined ? [] : redactJsonValue(keyPaths(polled.json), ctx.key);
  out.recordShape = shape;
  add(
    shape.length > 0
      ? { name: 'record shape', result: CheckResult.Ok, found: `keys (values not shown): ${shape.join(', ')}` }
      : { name: 'record shape', result: CheckResult.Warn, found: 'the record could not be read again to show it' },
  );
  const found = findRecordFields(polled.json, readingOf(config));
  const imageJudged = polled.kind === 'unrecognised' && polled.check.image !== undefined;
  if (found) {
    out.fields = found;
    add(recordFieldsCheck(found));
    for (const setting of recordSettings(found, config, imageJudged)) ctx.addSetting(setting);
  }
  if (polled.kind === 'unrecognised' && !imageJudged) {
    out.status = polled.status;
    add(noImageStatusCheck(polled.status, polled.check, found));
    return undefined;
  }
  const result: PollCreationResult =
    polled.kind === 'ended'
      ? polled.result
      : {
          outcome: 'succeeded',
          status: polled.status,
          images: found
            ? imagesOf(
                { fields: recordOf(polled.json, found) },
                { imageFields: config.imageFields, maxInlineBytes: config.maxDownloadBytes },
              )
            : [],
          ...(found?.cost ? { costUsd: found.cost.usd } : {}),
        };
  out.outcome = result.outcome;
  out.status = result.status;
  add(mappedStatusCheck(polled, result, found));
  add(costCheck(result, found, config));
  if (result.costUsd !== undefined) out.costUsd = result.costUsd;
  return result;
}

/** A status in no set on a record that holds something at an image path, no byte of which is an image. */
function noImageStatusCheck(status: string, check: StatusCheck, found: RecordFindings | undefined): DoctorCheck {
  const statusAt = found?.status ? ` (at ${found.status.at})` : '';
  return {
    name: 'mapped status',
    result: CheckResult.Fail,
    found: `"${status}"${statusAt} is in no set (${SERVICE_CONFIG_ENV.successStatuses}, "${FAILED_STATUS}", ${SERVICE_CONFIG_ENV.pendingStatuses}) and its record holds something at the image path ${check.atImagePath ?? '?'}, but nothing it holds is an image (${check.why ?? 'no URL'}): a batch stops on it`,
    hint: `if it means still in flight, add it to ${SERVICE_CONFIG_ENV.pendingStatuses}; else set ${SERVICE_CONFIG_ENV.imageFields} to where the images are`,
  };
}

/** What the creation's status means to the settings: succeeded, failed, or a success under another name. */
function mappedStatusCheck(
  polled: Exclude<Polled, { kind: 'failed' }>,
  result: PollCreationResult,
  found: RecordFindings | undefined,
): DoctorCheck {
  const statusAt = found?.status ? ` (at ${found.status.at})` : '';
  if (polled.kind === 'unrecognised') {
    return {
      name: 'mapped status',
      result: CheckResult.Fail,
      found:
        found?.status?.configured === false
          ? `"${polled.status}" at ${found.status.at}, which ${SERVICE_CONFIG_ENV.statusFields} does not name: a batch cannot read the status; the record carries an image`
          : `"${polled.status}"${statusAt} is not in ${SERVICE_CONFIG_ENV.successStatuses} and is not "${FAILED_STATUS}": a batch waits on it as in flight, yet the record carries an image (${polled.check.image?.type ?? 'an image'} by its bytes): a success under another name`,
      hint: 'write the settings below',
    };
  }
  return result.outcome === 'succeeded'
    ? {
        name: 'mapped status',
        result: CheckResult.Ok,
        found: `"${result.status}" means succeeded (${SERVICE_CONFIG_ENV.successStatuses}; read at ${found?.status?.at ?? 'the status field'})`,
      }
    : {
        name: 'mapped status',
        result: CheckResult.Warn,
        found: `"${result.status}"${statusAt}: the creation failed (refunded): ${result.error} (${result.retryable ? 'retryable' : 'not retryable'})`,
      };
}

/** Downloads the images as a batch would (without the key, through the download guard) into `outDir`. */
async function saveImages(
  ctx: SpendContext,
  creationId: string,
  images: ImageRef[],
  outDir: string,
  out: SpendOneReport,
): Promise<void> {
  const { add } = ctx;
  try {
    const saved = await ctx.deps.saveImages({
      creationId,
      images,
      outDir,
      ...(ctx.deps.signal ? { signal: ctx.deps.signal } : {}),
    });
    out.saved = saved.map((s) => path.join(outDir, s.path));
    add({
      name: 'download',
      result: CheckResult.Ok,
      found: `saved ${saved.map((s) => `${path.join(outDir, s.path)} (${s.bytes} bytes)`).join(', ')}`,
    });
  } catch (err) {
    add({
      name: 'download',
      result: CheckResult.Fail,
      found: redactRawText(err instanceof Error ? err.message : String(err), ctx.key),
      hint: `an image host on a private or loopback address needs ${SERVICE_CONFIG_ENV.downloadAllowHosts}`,
    });
  }
}
