/**
 * A row's record as Temporal holds it, read through the client: the \`lookupRow\` activity and the result files
 * (src/results) both read it, so it sits below both.
 */
import type { Client, WorkflowExecutionStatusName } from '@temporalio/client';
import type { LoadedDataConverter } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import {
  KeyOutcome,
  rowMoney,
  RowState,
  SignalName,
  type CreateImageInput,
  type KeyRecord,
  type PromptWorkflowInput,
  type RowRecord,
} from '../model';

/**
 * What Temporal says of a row: still running, or ended with its record. `closed` also covers a row that has sent its
 * final report and not closed yet (`closedAs` is then `RUNNING`): the record it reported is its last word.
 */
export type RowLookup =
  | { status: 'running' }
  | {
      status: 'closed';
      closedAs: WorkflowExecutionStatusName;
      record: RowRecord;
      /** The record was rebuilt from history (the row never wrote one): its batch's output folder, to keep it. */
      rebuiltFor?: { outDir: string };
    };

/**
 * The record of a row read from Temporal. A row that completed returns its own record. A row closed any other
 * way (terminated, timed out, failed) never wrote one: its record is rebuilt from its history, which holds its
 * input and every key it scheduled; what such a key did is not known, so each is `unknown` and the row is not
 * resubmittable. Never a guess in the paying direction.
 */
export async function lookupRowRecord(client: Client, workflowId: string): Promise<RowLookup> {
  const handle = client.workflow.getHandle(workflowId);
  const status = (await handle.describe()).status.name;
  if (status === 'RUNNING') {
    // A row's report to its batch is the last thing it does; one that has sent it has ended, though it may take a
    // moment to close (its report may have gone to a run of the batch that has since been terminated).
    const reported = await reportedRecord(client, await handle.fetchHistory());
    return reported ? { status: 'closed', closedAs: status, record: reported } : { status: 'running' };
  }
  if (status === 'COMPLETED') {
    const result: unknown = await handle.result();
    if (isRowRecord(result)) return { status: 'closed', closedAs: status, record: result };
  }
  const history = await handle.fetchHistory();
  // Terminated (or timed out) after its report: what it reported was final.
  const reported = await reportedRecord(client, history);
  if (reported) return { status: 'closed', closedAs: status, record: reported };
  const { record, outDir } = await recordFromHistory(client, history, status);
  return { status: 'closed', closedAs: status, record, ...(outDir === undefined ? {} : { rebuiltFor: { outDir } }) };
}

function isRowRecord(v: unknown): v is RowRecord {
  return typeof v === 'object' && v !== null && Array.isArray((v as RowRecord).keys) && 'state' in v;
}

/** The record a row's history shows it reported to its batch (its final report), if it sent one. */
async function reportedRecord(
  client: Client,
  history: temporal.api.history.v1.IHistory,
): Promise<RowRecord | undefined> {
  for (const event of history.events ?? []) {
    const sent = event.signalExternalWorkflowExecutionInitiatedEventAttributes;
    if (sent?.signalName !== SignalName.RowDone) continue;
    const record = await decodeFirst(client.options.loadedDataConverter, sent.input?.payloads);
    if (isRowRecord(record)) return record;
  }
  return undefined;
}

async function recordFromHistory(
  client: Client,
  history: temporal.api.history.v1.IHistory,
  closedAs: WorkflowExecutionStatusName,
): Promise<{ record: RowRecord; outDir: string | undefined }> {
  const converter = client.options.loadedDataConverter;
  const events = history.events ?? [];
  const started = events[0]?.workflowExecutionStartedEventAttributes;
  const input = (await decodeFirst(converter, started?.input?.payloads)) as PromptWorkflowInput | undefined;
  const keys: KeyRecord[] = [];
  for (const event of events) {
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled?.activityType?.name !== 'createImage') continue;
    const args = (await decodeFirst(converter, scheduled.input?.payloads)) as CreateImageInput | undefined;
    if (!args || keys.some((k) => k.idempotencyKey === args.idempotencyKey)) continue;
    const creationId = args.progress?.creationId;
    keys.push({
      attempt: keys.length + 1,
      idempotencyKey: args.idempotencyKey,
      outcome: KeyOutcome.Unknown,
      ...(creationId ? { creationId } : {}),
    });
  }
  const creationIds = keys.flatMap((k) => (k.creationId ? [k.creationId] : []));
  const ending = closedAs === 'TERMINATED' || closedAs === 'CANCELLED' ? RowState.Cancelled : RowState.Unknown;
  const record: RowRecord = {
    batchId: input?.batchId ?? '',
    rowId: input?.rowId ?? '',
    ...(input?.line === undefined ? {} : { line: input.line }),
    state: ending,
    prompt: input?.request.prompt ?? '',
    model: input?.request.model ?? '',
    keys,
    creationIds,
    images: [],
    // Keys of unknown outcome: what they hold is unknown (none sent: nothing).
    ...rowMoney(keys),
    error:
      `the row's workflow was ${closedAs.toLowerCase().replace('_', ' ')} before it wrote its record` +
      (keys.length ? `; its keys may have been charged: resolve them with the same keys` : '; it sent nothing'),
    // A row that completed without a record of ours is not understood: never taken as safe to pay again.
    resubmittable: keys.length === 0 && closedAs !== 'COMPLETED',
  };
  return { record, outDir: input?.outDir };
}

async function decodeFirst(
  converter: LoadedDataConverter,
  payloads: temporal.api.common.v1.IPayload[] | null | undefined,
): Promise<unknown> {
  const first = payloads?.[0];
  if (!first) return undefined;
  let decoded = [first];
  for (const codec of [...converter.payloadCodecs].reverse()) decoded = await codec.decode(decoded);
  return decoded[0] ? converter.payloadConverter.fromPayload(decoded[0]) : undefined;
}
