import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parse } from 'csv-parse/sync';
import type { JsonlRecord, WrittenResults } from '../../src/results';
import { CreationOutcome, type FaultKind, type ChargeBook, type ChargedCreation } from '../../src/simulator';
import type { FaultProxyCounts } from '../helpers/fault-proxy';
import {
  idempotencyKeyFor,
  KeyOutcome,
  parseIdempotencyKey,
  RowState,
  type BatchProgress,
  type RowRecord,
} from '../../src/model';
import type { ReconcileOutcome } from '../../src/cli/commands/reconcile';
import { sha256Of, type RowOutcome } from '../integration/helpers';
import { ChaosEventKind, SIMULATOR_FAULT_KINDS } from './chaos-plan';
import type { DoneEvent } from './chaos-scenario';

/**
 * The invariants of a chaos run, as figures: each is counted from the sources of truth (the row workflows, the
 * simulator's charge book, the files on disk, the result files) rather than from what the batch says about itself.
 */

export interface FigureInputs {
  rows: number;
  batchId: string;
  outDir: string;
  progress: BatchProgress;
  outcomes: readonly RowOutcome[];
  runsPerRow: ReadonlyMap<string, number>;
  charges: ChargeBook;
  written: WrittenResults;
  events: readonly DoneEvent[];
  storms: number;
  simulatorFaults: Record<FaultKind, number>;
  proxy: FaultProxyCounts;
  simulatorErrors: number;
  batchMs: number;
}

export interface ChaosFigures {
  rows: number;
  /** Rows by the final state of their workflow's result. */
  byState: Partial<Record<RowState, number>>;
  /** Rows whose workflow did not complete with one of succeeded / images_unsaved / failed / unknown. */
  notFinal: number;
  /**
   * Rows of the file that did not end with a complete record (see {@link recordProblems}), and what was wrong with
   * the first few of them.
   */
  rowsWithoutRecord: number;
  recordProblems: string[];
  /** Rows of the file with no workflow at all. */
  lost: number;
  /** Rows whose workflow ran more than once. */
  rowsRunTwice: number;
  /** The batch's own counts differ from the rows' states (0 or 1). */
  batchCountsDiffer: number;
  /** Rows with more than one creation charged net (over all their keys), and keys the ledger says were. */
  doubleCharged: number;
  ledgerChargedTwice: number;
  /** Succeeded (and images_unsaved: paid and generated) rows without exactly one net charge. */
  succeededNotChargedOnce: number;
  /** Failed rows with money not refunded. */
  failedWithCharge: number;
  /** Failed (or rejected 502/503) creations in the ledger, and those of them not refunded in full. */
  failedCreations: number;
  failedCreationsUnrefunded: number;
  /** Ledger charges with no creation, creations charged more than their price, keys in no row's record. */
  chargesWithoutCreation: number;
  overchargedCreations: number;
  keysOfNoRow: number;
  /** Rows, but unknown ones, whose own net (charged - refunded) differs from the ledger's. */
  moneyMismatches: number;
  /** Unknown rows, and those of them whose creation the ledger shows charged (to reconcile). */
  unknownRows: number;
  unknownCharged: number;
  netChargedUsd: number;
  imagesChecked: number;
  imagesMissing: number;
  imagesBadChecksum: number;
  succeededWithoutImages: number;
  resultFileRows: number;
  /** Rows whose results.jsonl record differs from the workflow's record, or that are missing or repeated. */
  resultMismatches: number;
  errorsCsvRows: number;
  unresolvedCsvRows: number;
  kills: number;
  serverRestarts: number;
  storms: number;
  tooManyRequests: number;
  simulatorFaults: Record<FaultKind, number>;
  proxyFaults: FaultProxyCounts['injected'];
  proxyBeforeRequest: FaultProxyCounts['beforeRequest'];
  proxyExchanges: number;
  answersByStatus: Record<number, number>;
  simulatorErrors: number;
  batchMs: number;
  continueAsNewRuns: number;
}

const FINAL: readonly string[] = [RowState.Succeeded, RowState.ImagesUnsaved, RowState.Failed, RowState.Unknown];

/** How many rows' problems the figures keep, to say what was wrong. */
const PROBLEMS_KEPT = 10;

export async function computeFigures(input: FigureInputs): Promise<ChaosFigures> {
  const { outcomes, charges, batchId } = input;
  const completed = outcomes.filter((o) => o.status === 'COMPLETED' && o.result && FINAL.includes(o.result.state));
  const byState: Partial<Record<RowState, number>> = {};
  for (const o of completed) byState[o.result!.state] = (byState[o.result!.state] ?? 0) + 1;
  const counted = Object.fromEntries(Object.entries(input.progress.counts).filter(([, n]) => n > 0));
  const batchCountsDiffer =
    input.progress.done && JSON.stringify(sorted(counted)) === JSON.stringify(sorted(byState)) ? 0 : 1;

  const byKey = new Map(charges.byIdempotencyKey().map((s) => [s.idempotencyKey, s]));
  const ledgerKeysOf = ledgerKeysByRow(batchId, byKey.keys());
  const creationsOf = new Map<string, ChargedCreation[]>();
  for (const c of charges.byCreation()) {
    if (c.idempotencyKey !== null) creationsOf.set(c.idempotencyKey, [...(creationsOf.get(c.idempotencyKey) ?? []), c]);
  }

  // Every row of the file ends with a complete record, whatever ended it.
  const problems: string[] = [];
  let withRecord = 0;
  for (const outcome of outcomes) {
    const found = recordProblems(outcome, batchId, ledgerKeysOf.get(outcome.rowId) ?? [], creationsOf);
    if (found.length === 0) withRecord++;
    else if (problems.length < PROBLEMS_KEPT) problems.push(`${outcome.rowId}: ${found.join('; ')}`);
  }

  const rowKeys = new Set<string>();
  let doubleCharged = 0;
  let succeededNotChargedOnce = 0;
  let failedWithCharge = 0;
  let moneyMismatches = 0;
  let unknownCharged = 0;
  for (const { rowId, result } of completed) {
    // The keys the record lists, and any the ledger saw for the row that it does not (those count as well).
    const listed = result!.keys.map((k) => k.idempotencyKey);
    for (const k of listed) rowKeys.add(k);
    const keys = [...new Set([...listed, ...(ledgerKeysOf.get(rowId) ?? [])])];
    const netCharged = keys.reduce((n, k) => n + (byKey.get(k)?.netCharged ?? 0), 0);
    const netUsd = keys.reduce((n, k) => n + (byKey.get(k)?.netUsd ?? 0), 0);
    if (netCharged > 1) doubleCharged++;
    switch (result!.state) {
      case RowState.Succeeded:
      case RowState.ImagesUnsaved:
        if (netCharged !== 1) succeededNotChargedOnce++;
        break;
      case RowState.Reused:
        // Served by an earlier request of the same fingerprint: nothing charged under its own keys.
        if (netCharged !== 0) doubleCharged++;
        break;
      case RowState.Failed:
        if (netCharged !== 0 || Math.abs(netUsd) > 1e-9) failedWithCharge++;
        break;
      case RowState.Unknown:
        if (netCharged > 0) unknownCharged++;
        break;
      case RowState.Cancelled:
      case RowState.NotRun:
        break;
    }
    // A row's own net may be null (unknown): nothing to compare (the spend reconciliation counts such rows).
    const ownNet: number | null = result!.netUsd;
    if (result!.state !== RowState.Unknown && ownNet !== null && Math.abs(netUsd - ownNet) > 1e-6) moneyMismatches++;
  }
  const violations = charges.violations();
  const failed = charges
    .byCreation()
    .filter((c) => c.outcome === CreationOutcome.Failed || c.outcome === CreationOutcome.Rejected);

  let imagesChecked = 0;
  let imagesMissing = 0;
  let imagesBadChecksum = 0;
  let succeededWithoutImages = 0;
  for (const { result } of completed) {
    if (result!.state !== RowState.Succeeded) continue;
    if (result!.images.length === 0) succeededWithoutImages++;
    for (const image of result!.images) {
      imagesChecked++;
      const onDisk = path.join(input.outDir, image.path);
      if (!existsSync(onDisk)) imagesMissing++;
      else if ((await sha256Of(onDisk)) !== image.sha256) imagesBadChecksum++;
    }
  }

  const results = await compareResultFiles(input.written, completed);
  const proxy = input.proxy;
  return {
    rows: input.rows,
    byState,
    notFinal: outcomes.length - completed.length,
    rowsWithoutRecord: input.rows - withRecord,
    recordProblems: problems,
    lost: input.rows - outcomes.length,
    rowsRunTwice: [...input.runsPerRow.values()].filter((n) => n > 1).length,
    batchCountsDiffer,
    doubleCharged,
    ledgerChargedTwice: violations.chargedTwice.length,
    succeededNotChargedOnce,
    failedWithCharge,
    failedCreations: failed.length,
    failedCreationsUnrefunded: violations.unrefundedFailures.length,
    chargesWithoutCreation: violations.chargesWithoutCreation.length,
    overchargedCreations: violations.overchargedCreations.length,
    keysOfNoRow: [...byKey.keys()].filter((k) => !rowKeys.has(k)).length,
    moneyMismatches,
    unknownRows: byState.unknown ?? 0,
    unknownCharged,
    netChargedUsd: Math.round([...byKey.values()].reduce((n, s) => n + s.netUsd, 0) * 1e6) / 1e6,
    imagesChecked,
    imagesMissing,
    imagesBadChecksum,
    succeededWithoutImages,
    ...results,
    kills: input.events.filter((e) => e.kind === ChaosEventKind.KillWorker).length,
    serverRestarts: input.events.filter((e) => e.kind === ChaosEventKind.RestartServer).length,
    storms: input.storms,
    tooManyRequests: proxy.statuses[429] ?? 0,
    simulatorFaults: input.simulatorFaults,
    proxyFaults: proxy.injected,
    proxyBeforeRequest: proxy.beforeRequest,
    proxyExchanges: proxy.exchanges,
    answersByStatus: proxy.statuses,
    simulatorErrors: input.simulatorErrors,
    batchMs: input.batchMs,
    continueAsNewRuns: input.progress.runs,
  };
}

/**
 * results.jsonl against the workflows row by row; results.csv, errors.csv and unresolved.csv by their rows: every row
 * that did not succeed is in exactly one of errors.csv (safe to submit again) and unresolved.csv (may have been paid).
 */
async function compareResultFiles(
  written: WrittenResults,
  completed: readonly RowOutcome[],
): Promise<Pick<ChaosFigures, 'resultFileRows' | 'resultMismatches' | 'errorsCsvRows' | 'unresolvedCsvRows'>> {
  const text = await readFile(written.resultsJsonl, 'utf8');
  const records = text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as JsonlRecord);
  const byRow = new Map<string, JsonlRecord[]>();
  for (const r of records) byRow.set(r.row_id, [...(byRow.get(r.row_id) ?? []), r]);
  let mismatches = 0;
  for (const { rowId, result } of completed) {
    const found = byRow.get(rowId) ?? [];
    if (found.length !== 1 || !sameAsWorkflow(found[0]!, result!)) mismatches++;
  }
  const csvRows = parse<{ row_id: string }>(await readFile(written.resultsCsv, 'utf8'), { columns: true });
  const errorRows = parse<{ id: string }>(await readFile(written.errorsCsv, 'utf8'), { columns: true });
  const unresolvedRows = parse<{ id: string }>(await readFile(written.unresolvedCsv, 'utf8'), { columns: true });
  const expectedErrors = new Set(completed.filter((o) => o.result!.state !== RowState.Succeeded).map((o) => o.rowId));
  const notSucceeded = [...errorRows, ...unresolvedRows].map((r) => r.id);
  const ids = new Set(notSucceeded);
  if (csvRows.length !== records.length) mismatches++;
  if (ids.size !== notSucceeded.length) mismatches++; // a row in both files, or twice in one
  if (ids.size !== expectedErrors.size || [...expectedErrors].some((id) => !ids.has(id))) mismatches++;
  return {
    resultFileRows: records.length,
    resultMismatches: mismatches,
    errorsCsvRows: errorRows.length,
    unresolvedCsvRows: unresolvedRows.length,
  };
}

/** A results.jsonl line says what the row's record says: every key, creation, figure and flag. */
function sameAsWorkflow(r: JsonlRecord, record: RowRecord): boolean {
  const images = (list: readonly { path: string; sha256: string }[]) =>
    JSON.stringify(list.map((i) => [i.path, i.sha256]));
  const keys = (list: readonly (readonly unknown[])[]) => JSON.stringify(list);
  const close = (a: number | null, b: number | null) => (a === null || b === null ? a === b : Math.abs(a - b) < 1e-9);
  return (
    r.state === record.state &&
    images(r.images) === images(record.images) &&
    keys(
      r.keys.map((k) => [
        k.attempt,
        k.idempotency_key,
        k.outcome,
        k.creation_id,
        k.charged_usd,
        k.refunded_usd,
        k.error,
      ]),
    ) ===
      keys(
        record.keys.map((k) => [
          k.attempt,
          k.idempotencyKey,
          k.outcome,
          k.creationId ?? null,
          k.chargedUsd ?? null,
          k.refundedUsd ?? null,
          k.error ?? null,
        ]),
      ) &&
    JSON.stringify(r.creation_ids) === JSON.stringify(record.creationIds) &&
    close(r.charged_usd, record.chargedUsd) &&
    close(r.refunded_usd, record.refundedUsd) &&
    close(r.net_usd, record.netUsd) &&
    r.error === (record.error ?? null) &&
    r.resubmittable === record.resubmittable
  );
}

const ROW_STATES: readonly string[] = Object.values(RowState);
const KEY_OUTCOMES: readonly string[] = Object.values(KeyOutcome);
/** Key outcomes that leave no creation of the key charged: judged and refused, or charged and refunded. */
const UNCHARGED: readonly string[] = [KeyOutcome.Refunded, KeyOutcome.Rejected, KeyOutcome.Declined];

/**
 * The idempotency keys the ledger saw, by row: `ib/<batch>/<row>/a<n>` ({@link idempotencyKeyFor}); a key that
 * does not parse, or is not the key of its row and number, belongs to no row (and counts in `keysOfNoRow`).
 */
export function ledgerKeysByRow(batchId: string, keys: Iterable<string>): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const key of keys) {
    const parsed = parseIdempotencyKey(key);
    if (!parsed || idempotencyKeyFor(batchId, parsed.rowId, parsed.attempt) !== key) continue;
    out.set(parsed.rowId, [...(out.get(parsed.rowId) ?? []), key]);
  }
  return out;
}

/**
 * What keeps a row's record from being complete, against the ledger; empty when it is complete. A complete record:
 * the row workflow completed with it; its state is one of {@link RowState}; its keys are the row's keys in order,
 * each ended (no key left `submitting`), and list every key the ledger saw for the row; its creation ids are its
 * keys' and include every creation the ledger has for them (but the 502/503 ones, whose id the service never
 * gives, and those of a key whose outcome is `unknown`, which never heard an answer); the cost the service
 * reported for a key is what the ledger charged it, and its refund, once the key's outcome is known, what the
 * ledger refunded; its totals add up; and it is resubmittable only when none of its keys holds money.
 */
export function recordProblems(
  outcome: RowOutcome,
  batchId: string,
  ledgerKeys: readonly string[],
  creationsOf: ReadonlyMap<string, readonly ChargedCreation[]>,
): string[] {
  const { rowId, result: record } = outcome;
  if (outcome.status !== 'COMPLETED') return [`its workflow is ${outcome.status}, not completed with its record`];
  if (!record || !Array.isArray(record.keys) || !Array.isArray(record.creationIds)) return ['no record'];
  const out: string[] = [];
  const near = (a: number, b: number) => Math.abs(a - b) < 1e-6;
  if (!ROW_STATES.includes(record.state)) out.push(`state ${String(record.state)}`);
  if (record.rowId !== rowId || record.batchId !== batchId) out.push(`record of ${record.batchId}/${record.rowId}`);

  for (const [i, key] of record.keys.entries()) {
    const name = `key ${key.idempotencyKey}`;
    if (key.attempt !== i + 1 || key.idempotencyKey !== idempotencyKeyFor(batchId, rowId, i + 1)) {
      out.push(`${name}: not the row's key number ${i + 1}`);
    }
    if (!KEY_OUTCOMES.includes(key.outcome) || key.outcome === KeyOutcome.Submitting) {
      out.push(`${name}: outcome ${key.outcome}`);
    }
    if (
      key.outcome === KeyOutcome.Accepted &&
      record.state !== RowState.Cancelled &&
      record.state !== RowState.Unknown
    ) {
      out.push(`${name}: still accepted in a ${record.state} row`);
    }
    // Every creation the ledger has for the key, but a 502/503's (charged and refunded before any answer).
    const creations = (creationsOf.get(key.idempotencyKey) ?? []).filter((c) => c.outcome !== CreationOutcome.Rejected);
    const heard = key.outcome !== KeyOutcome.Unknown || key.creationId !== undefined;
    for (const c of creations) {
      if (heard && key.creationId !== c.creationId) out.push(`${name}: creation ${c.creationId} not its creation`);
      if (!record.creationIds.includes(c.creationId) && heard) out.push(`${name}: creation ${c.creationId} missing`);
    }
    if (key.creationId !== undefined && !creations.some((c) => c.creationId === key.creationId)) {
      out.push(`${name}: creation ${key.creationId} unknown to the ledger`);
    }
    if (UNCHARGED.includes(key.outcome) && creations.length > 0) {
      out.push(`${name}: ${key.outcome}, yet the ledger has creation ${creations[0]!.creationId}`);
    }
    // Money: what the record says of the key is what the ledger did. A key that ended `refunded` (502/503) accounts
    // for one charge the ledger refunded at submission; any other such charge under the key was never seen answered
    // (the answer was lost on the way, the key sent again) and holds nothing: the spend reconciliation counts those.
    let refundsSeen = key.outcome === KeyOutcome.Refunded ? 1 : 0;
    const money = (creationsOf.get(key.idempotencyKey) ?? []).filter((c) => {
      if (c.outcome !== CreationOutcome.Rejected) return true;
      if (c.chargedUsd === 0 || refundsSeen === 0) return false;
      refundsSeen -= 1;
      return true;
    });
    const charged = money.reduce((n, c) => n + c.chargedUsd, 0);
    const refunded = money.reduce((n, c) => n + c.refundedUsd, 0);
    if (key.chargedUsd !== undefined && !near(key.chargedUsd, charged)) {
      out.push(`${name}: charged ${key.chargedUsd}, the ledger ${charged}`);
    }
    const known =
      key.outcome === KeyOutcome.Succeeded || key.outcome === KeyOutcome.Failed || key.outcome === KeyOutcome.Refunded;
    if (known && key.chargedUsd !== undefined && !near(key.refundedUsd ?? 0, refunded)) {
      out.push(`${name}: refunded ${key.refundedUsd ?? 0}, the ledger ${refunded}`);
    }
  }
  const listed = new Set(record.keys.map((k) => k.idempotencyKey));
  for (const key of ledgerKeys) if (!listed.has(key)) out.push(`key ${key} of the ledger not in the record`);

  const ofKeys = record.keys.flatMap((k) => (k.creationId === undefined ? [] : [k.creationId]));
  if (JSON.stringify(ofKeys) !== JSON.stringify(record.creationIds)) {
    out.push(`creation ids ${record.creationIds.join(' ')} are not its keys' (${ofKeys.join(' ')})`);
  }
  const charged = record.keys.reduce((n, k) => n + (k.chargedUsd ?? 0), 0);
  const refunded = record.keys.reduce((n, k) => n + (k.refundedUsd ?? 0), 0);
  // A total may be null (unknown): only known totals are held against the keys'.
  const totalCharged: number | null = record.chargedUsd;
  const totalRefunded: number | null = record.refundedUsd;
  const totalNet: number | null = record.netUsd;
  if (
    (totalCharged !== null && !near(totalCharged, charged)) ||
    (totalRefunded !== null && !near(totalRefunded, refunded))
  ) {
    out.push(`totals ${totalCharged} / ${totalRefunded} are not its keys' ${charged} / ${refunded}`);
  }
  if (
    totalCharged !== null &&
    totalRefunded !== null &&
    (totalNet === null || !near(totalNet, totalCharged - totalRefunded))
  ) {
    out.push(`net ${totalNet}`);
  }
  if (record.resubmittable) {
    const held = ledgerKeys.flatMap((k) => (creationsOf.get(k) ?? []).filter((c) => c.netUsd !== 0));
    if (held.length > 0) out.push(`resubmittable, yet creation ${held[0]!.creationId} holds ${held[0]!.netUsd} USD`);
  }
  return out;
}

function sorted(o: object): object {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => a.localeCompare(b)));
}

/** What a run was asked to do, to hold its figures against. */
export interface Expectations {
  rows: number;
  kills: number;
  serverRestarts: number;
}

/** Every invariant that does not hold, in words. */
export function violationsOf(f: ChaosFigures, expect: Expectations): string[] {
  const out: string[] = [];
  const zero = (value: number, what: string) => {
    if (value !== 0) out.push(`${what}: ${value}`);
  };
  const completed = Object.values(f.byState).reduce((a, b) => a + b, 0);
  if (completed !== expect.rows) out.push(`rows in a final state: ${completed} of ${expect.rows}`);
  zero(f.notFinal, 'rows not in exactly one final state');
  if (f.rowsWithoutRecord !== 0) {
    out.push(`rows without a complete record: ${f.rowsWithoutRecord} (${f.recordProblems.join(' | ')})`);
  }
  zero(f.lost, 'rows lost');
  zero(f.rowsRunTwice, 'rows whose workflow ran more than once');
  zero(f.batchCountsDiffer, "the batch's counts differ from the rows' states");
  zero(f.doubleCharged, 'rows charged twice');
  zero(f.ledgerChargedTwice, 'idempotency keys charged twice (ledger)');
  zero(f.succeededNotChargedOnce, 'succeeded (or images unsaved) rows not charged exactly once');
  zero(f.failedWithCharge, 'failed rows with a charge not refunded');
  zero(f.failedCreationsUnrefunded, 'failed creations not refunded');
  zero(f.chargesWithoutCreation, 'charges without a creation');
  zero(f.overchargedCreations, 'creations charged more than their price');
  zero(f.keysOfNoRow, "charged keys in no row's record");
  zero(f.moneyMismatches, "rows whose accounting differs from the ledger's");
  zero(f.imagesMissing, 'images missing');
  zero(f.imagesBadChecksum, 'images with a wrong sha256');
  zero(f.succeededWithoutImages, 'succeeded rows without images');
  if (f.resultFileRows !== expect.rows) out.push(`results.jsonl rows: ${f.resultFileRows} of ${expect.rows}`);
  zero(f.resultMismatches, 'result-file rows that differ from the workflows');
  zero(f.simulatorErrors, 'simulator handler errors');
  if (f.kills < expect.kills) out.push(`worker kills: ${f.kills} of ${expect.kills}`);
  if (f.serverRestarts < expect.serverRestarts) {
    out.push(`server restarts: ${f.serverRestarts} of ${expect.serverRestarts}`);
  }
  for (const kind of SIMULATOR_FAULT_KINDS) {
    if (!(f.simulatorFaults[kind] > 0)) out.push(`simulator fault never injected: ${kind}`);
  }
  for (const [kind, n] of Object.entries(f.proxyFaults)) if (n === 0) out.push(`proxy fault never injected: ${kind}`);
  if (f.storms === 0 || f.tooManyRequests === 0) out.push(`429 storms: ${f.storms}, 429 answers: ${f.tooManyRequests}`);
  return out;
}

/** What the reconcile step after the batch did, against the simulator's charge book. */
export interface ReconcileFigures {
  /** Rows of unresolved.csv before the step. */
  unresolvedBefore: number;
  examined: number;
  resolved: number;
  reported: number;
  /** Rows of unresolved.csv after it: the reported ones. */
  unresolvedAfter: number;
  /** Rows whose keys the simulator charged (net of refunds) more than once, after the step. */
  rowsChargedTwice: number;
  /** Keys the simulator charged twice, after the step. */
  keysChargedTwice: number;
}

export function reconcileFiguresOf(
  unresolvedBefore: number,
  outcome: ReconcileOutcome,
  batchId: string,
  charges: ChargeBook,
): ReconcileFigures {
  const byKey = new Map(charges.byIdempotencyKey().map((s) => [s.idempotencyKey, s.netCharged]));
  const keysByRow = ledgerKeysByRow(batchId, byKey.keys());
  let rowsChargedTwice = 0;
  for (const keys of keysByRow.values()) {
    if (keys.reduce((n, k) => n + (byKey.get(k) ?? 0), 0) > 1) rowsChargedTwice++;
  }
  const { examined, resolved, reported } = outcome.summary;
  return {
    unresolvedBefore,
    examined,
    resolved,
    reported,
    unresolvedAfter: outcome.written.unresolvedRows,
    rowsChargedTwice,
    keysChargedTwice: charges.violations().chargedTwice.length,
  };
}

export function reconcileViolations(f: ReconcileFigures): string[] {
  const out: string[] = [];
  if (f.examined !== f.unresolvedBefore) {
    out.push(`reconcile examined ${f.examined} rows, unresolved.csv held ${f.unresolvedBefore}`);
  }
  if (f.resolved + f.reported !== f.examined) {
    out.push(`reconcile: ${f.resolved} resolved + ${f.reported} reported != ${f.examined} examined`);
  }
  if (f.unresolvedAfter !== f.reported) {
    out.push(`after reconcile unresolved.csv holds ${f.unresolvedAfter} rows, ${f.reported} were reported`);
  }
  if (f.rowsChargedTwice > 0) out.push(`${f.rowsChargedTwice} rows charged twice after reconcile`);
  if (f.keysChargedTwice > 0) out.push(`${f.keysChargedTwice} keys charged twice after reconcile`);
  return out;
}
