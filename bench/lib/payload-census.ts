import { createHash } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { Payload } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { CompressionPayloadCodec } from '../../src/codec';
import { batchWorkflowId, promptWorkflowId } from '../../src/model';

/**
 * What a row's history bytes are made of: every event of the batch (all its runs) and of a sample of rows, sized as
 * Temporal stores them (proto-encoded), the payloads among them named by what they carry, and the payloads whose
 * content repeats (the same bytes in two places, or the row's prompt inside them).
 */

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
const EventType = temporal.api.enums.v1.EventType;
const EventProto = temporal.api.history.v1.HistoryEvent;
const PayloadProto = temporal.api.common.v1.Payload;
const inflate = new CompressionPayloadCodec({ compress: false });

/** Bytes per row of one kind of payload: as stored, and once decompressed. */
export interface PayloadKind {
  what: string;
  /** Whose history holds it. */
  where: 'row' | 'batch';
  count: number;
  storedBytes: number;
  plainBytes: number;
  /** Prompts inside these payloads (decompressed JSON `"prompt":` fields), per row. */
  promptCopies: number;
}

/** A payload content found in more than one place. */
export interface Repeat {
  /** The places, in history order (`row: ...`, `batch: ...`). */
  places: string[];
  /** Bytes stored per row beyond the first copy. */
  extraStoredBytes: number;
  /** The same, decompressed. */
  extraPlainBytes: number;
}

/** The census, every figure per row of the batch. */
export interface PayloadCensus {
  rows: number;
  sampledRows: number;
  batchRuns: number;
  /** Events per row by type: the row's own, and the batch's share. */
  eventsPerRow: { row: Record<string, number>; batch: Record<string, number> };
  /** Bytes per row of every event, proto-encoded. */
  historyBytes: { row: number; batch: number };
  payloadBytes: { row: number; batch: number };
  kinds: PayloadKind[];
  repeats: Repeat[];
  /** Bytes of one prompt (UTF-8), the mean of the sample. */
  promptBytes: number;
  /** The payloads of the first sampled row, decompressed: what it says, for a person reading the log. */
  example: Array<{ label: string; text: string }>;
}

const typeName = (type: number | null | undefined) =>
  (EventType[type ?? 0] ?? String(type)).replace(/^EVENT_TYPE_/, '');
const utf8 = (b: Uint8Array | null | undefined) => Buffer.from(b ?? new Uint8Array(0)).toString('utf8');

/** What the payloads of an event carry, by event type (activities by their type). */
function payloadLabel(e: HistoryEvent, path: string, activities: Map<string, string>): string {
  const a = e.activityTaskScheduledEventAttributes;
  // Event ids are numbers or Longs: both print their value.
  const id = (x: { scheduledEventId?: { toString(): string } | number | null } | null | undefined) =>
    x?.scheduledEventId?.toString() ?? '';
  if (path.includes('searchAttributes')) return 'search attributes';
  if (path.includes('header')) return 'headers';
  if (path.includes('memo')) return 'memo';
  switch (e.eventType) {
    case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
      return 'workflow input';
    case EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
      return `activity input: ${a?.activityType?.name ?? '?'}`;
    case EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
      return `activity result: ${activities.get(id(e.activityTaskCompletedEventAttributes)) ?? '?'}`;
    case EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
      return `activity failure: ${activities.get(id(e.activityTaskFailedEventAttributes)) ?? '?'}`;
    case EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
      return `activity started, its last failure: ${activities.get(id(e.activityTaskStartedEventAttributes)) ?? '?'}`;
    case EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
      return 'child completed: its result';
    case EventType.EVENT_TYPE_MARKER_RECORDED:
      return `marker: ${e.markerRecordedEventAttributes?.markerName ?? '?'} (${path.split('.').slice(-3, -2).join('')})`;
    case EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
      return `signal sent: ${e.signalExternalWorkflowExecutionInitiatedEventAttributes?.signalName ?? '?'}`;
    case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
      return `signal received: ${e.workflowExecutionSignaledEventAttributes?.signalName ?? '?'}`;
    case EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
      return 'child start: its input';
    case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
      return 'workflow result';
    case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
      return 'continue-as-new input';
    default:
      return `${typeName(e.eventType)} (${path})`;
  }
}

/** Every payload inside an event, with the path it was found at. */
function* payloadsOf(value: unknown, path = ''): Generator<{ payload: Payload; path: string }> {
  if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return;
  const o = value as Record<string, unknown>;
  if ('data' in o && o.data instanceof Uint8Array && 'metadata' in o) {
    yield { payload: o, path };
    return;
  }
  for (const [k, v] of Object.entries(o)) {
    if (Array.isArray(v)) for (let i = 0; i < v.length; i++) yield* payloadsOf(v[i], `${path}.${k}[${i}]`);
    else yield* payloadsOf(v, `${path}.${k}`);
  }
}

interface Seen {
  where: 'row' | 'batch';
  label: string;
  stored: number;
  plain: number;
  hash: string;
  text: string;
}

async function seenIn(events: HistoryEvent[], where: 'row' | 'batch'): Promise<Array<Seen & { type: string }>> {
  const activities = new Map<string, string>();
  const out: Array<Seen & { type: string }> = [];
  for (const e of events) {
    const name = e.activityTaskScheduledEventAttributes?.activityType?.name;
    if (name) activities.set(String(e.eventId), name);
    for (const { payload, path } of payloadsOf(e)) {
      const [plain] = await inflate.decode([payload]);
      const plainBytes = PayloadProto.encode(plain!).finish();
      const hash = createHash('sha256').update(plainBytes).digest('hex');
      out.push({
        where,
        type: typeName(e.eventType),
        label: payloadLabel(e, path, activities),
        stored: PayloadProto.encode(payload).finish().length,
        plain: plainBytes.length,
        hash,
        text: utf8(plain!.data),
      });
    }
  }
  return out;
}

async function historyOf(client: Client, workflowId: string, runId?: string): Promise<HistoryEvent[]> {
  return (await client.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? [];
}

const countTypes = (events: HistoryEvent[], into: Record<string, number>, weight: number) => {
  for (const e of events) into[typeName(e.eventType)] = (into[typeName(e.eventType)] ?? 0) + weight;
};
const eventBytes = (events: HistoryEvent[]) => events.reduce((n, e) => n + EventProto.encode(e).finish().length, 0);

/** The census of `batchId` over `rowIds`, reading every run of the batch and `sample` evenly spaced rows. */
export async function payloadCensus(
  client: Client,
  batchId: string,
  rowIds: readonly string[],
  sample = 20,
): Promise<PayloadCensus> {
  const rows = rowIds.length;
  const eventsPerRow = { row: {} as Record<string, number>, batch: {} as Record<string, number> };
  const historyBytes = { row: 0, batch: 0 };
  const batchSeen: Seen[] = [];
  let batchRuns = 0;
  for await (const run of client.workflow.list({ query: `WorkflowId = '${batchWorkflowId(batchId)}'` })) {
    const events = await historyOf(client, run.workflowId, run.runId);
    batchRuns++;
    countTypes(events, eventsPerRow.batch, 1 / rows);
    historyBytes.batch += eventBytes(events) / rows;
    batchSeen.push(...(await seenIn(events, 'batch')));
  }
  const step = Math.max(1, Math.floor(rows / sample));
  const picked = rowIds.filter((_, i) => i % step === 0).slice(0, sample);
  const rowSeen: Seen[][] = [];
  const prompts: string[] = [];
  for (const rowId of picked) {
    const events = await historyOf(client, promptWorkflowId(batchId, rowId));
    countTypes(events, eventsPerRow.row, 1 / picked.length);
    historyBytes.row += eventBytes(events) / picked.length;
    const seen = await seenIn(events, 'row');
    rowSeen.push(seen);
    prompts.push(promptOf(seen));
  }
  const kinds = new Map<string, PayloadKind>();
  const add = (s: Seen, weight: number) => {
    const key = `${s.where}|${s.label}`;
    const k = kinds.get(key) ?? {
      what: s.label,
      where: s.where,
      count: 0,
      storedBytes: 0,
      plainBytes: 0,
      promptCopies: 0,
    };
    k.count += weight;
    k.storedBytes += s.stored * weight;
    k.plainBytes += s.plain * weight;
    k.promptCopies += occurrences(s.text, PROMPT_FIELD) * weight;
    kinds.set(key, k);
  };
  for (const seen of rowSeen) for (const s of seen) add(s, 1 / picked.length);
  // The batch's payloads are shared by all its rows.
  for (const s of batchSeen) add(s, 1 / rows);
  const all = [...kinds.values()];
  return {
    rows,
    sampledRows: picked.length,
    batchRuns,
    eventsPerRow,
    historyBytes,
    payloadBytes: {
      row: all.filter((k) => k.where === 'row').reduce((n, k) => n + k.storedBytes, 0),
      batch: all.filter((k) => k.where === 'batch').reduce((n, k) => n + k.storedBytes, 0),
    },
    kinds: all.sort((a, b) => b.storedBytes - a.storedBytes),
    repeats: repeatsOf(rowSeen, batchSeen),
    promptBytes: prompts.reduce((n, p) => n + Buffer.byteLength(p), 0) / Math.max(1, prompts.length),
    example: (rowSeen[0] ?? []).map((s) => ({ label: s.label, text: s.text })),
  };
}

/** The prompt a row's input carries (its first `prompt` field), or '' when none is found. */
function promptOf(seen: readonly Seen[]): string {
  const input = seen.find((s) => s.label === 'workflow input');
  const match = input ? /"prompt":"((?:[^"\\]|\\.)*)"/.exec(input.text) : null;
  return match ? (JSON.parse(`"${match[1]}"`) as string) : '';
}

/** A prompt in a payload's JSON: a request's, or a record's (`negative_prompt` does not match). */
const PROMPT_FIELD = '"prompt":"';

function occurrences(text: string, needle: string): number {
  if (!needle) return 0;
  let n = 0;
  for (let i = text.indexOf(needle); i >= 0; i = text.indexOf(needle, i + needle.length)) n++;
  return n;
}

/**
 * Payload contents of a sampled row found more than once, in its history or the batch's, per row. Contents that
 * several sampled rows share (a memo naming the batch) are no row's own, and left out.
 */
function repeatsOf(rowSeen: readonly Seen[][], batchSeen: readonly Seen[]): Repeat[] {
  const byHash = new Map<string, Seen[]>();
  for (const s of batchSeen) byHash.set(s.hash, [...(byHash.get(s.hash) ?? []), s]);
  const rowsWith = new Map<string, number>();
  for (const seen of rowSeen)
    for (const h of new Set(seen.map((s) => s.hash))) rowsWith.set(h, (rowsWith.get(h) ?? 0) + 1);
  const repeats = new Map<string, Repeat>();
  for (const seen of rowSeen) {
    const mine = new Map<string, Seen[]>();
    for (const s of seen) mine.set(s.hash, [...(mine.get(s.hash) ?? []), s]);
    for (const [hash, copies] of mine) {
      const all = [...copies, ...(byHash.get(hash) ?? [])];
      if (all.length < 2 || (rowsWith.get(hash) ?? 0) > 1) continue;
      const places = all.map((s) => `${s.where}: ${s.label}`);
      const key = places.join(' + ');
      const r = repeats.get(key) ?? { places, extraStoredBytes: 0, extraPlainBytes: 0 };
      r.extraStoredBytes += all.slice(1).reduce((n, s) => n + s.stored, 0) / rowSeen.length;
      r.extraPlainBytes += all.slice(1).reduce((n, s) => n + s.plain, 0) / rowSeen.length;
      repeats.set(key, r);
    }
  }
  return [...repeats.values()].sort((a, b) => b.extraPlainBytes - a.extraPlainBytes);
}
