import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parse } from 'csv-parse/sync';
import type { WrittenResults } from '../../src/results';
import { CreationOutcome, type FaultKind, type FaultProxyCounts, type Ledger } from '../../src/simulator';
import type { BatchProgress } from '../../src/workflows';
import { idempotencyKeyFor } from '../../src/workflows/keys';
import { RowState, type PromptResult } from '../../src/workflows/model';
import { sha256Of, type RowOutcome } from '../integration/helpers';
import { ChaosEventKind, SIMULATOR_FAULT_KINDS } from './chaos-plan';
import type { DoneEvent } from './chaos-scenario';

/**
 * The invariants of a chaos run, as figures: each is counted from the sources of truth (the row workflows, the
 * simulator's ledger, the files on disk, the result files) rather than from what the batch says about itself.
 */

export interface FigureInputs {
  rows: number;
  batchId: string;
  outDir: string;
  progress: BatchProgress;
  outcomes: readonly RowOutcome[];
  runsPerRow: ReadonlyMap<string, number>;
  ledger: Ledger;
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
  /** Rows whose workflow did not complete with one of succeeded / failed / unknown. */
  notFinal: number;
  /** Rows of the file with no workflow at all. */
  lost: number;
  /** Rows whose workflow ran more than once. */
  rowsRunTwice: number;
  /** The batch's own counts differ from the rows' states (0 or 1). */
  batchCountsDiffer: number;
  /** Rows with more than one creation charged net (over all their keys), and keys the ledger says were. */
  doubleCharged: number;
  ledgerChargedTwice: number;
  /** Succeeded rows without exactly one net charge. */
  succeededNotChargedOnce: number;
  /** Failed rows with money not refunded. */
  failedWithCharge: number;
  /** Failed (or rejected 502/503) creations in the ledger, and those of them not refunded in full. */
  failedCreations: number;
  failedCreationsUnrefunded: number;
  /** Ledger charges with no creation, creations charged more than their price, keys of no row's attempt. */
  chargesWithoutCreation: number;
  overchargedCreations: number;
  keysOfNoRow: number;
  /** Succeeded and failed rows whose own charged - refunded differs from the ledger's net. */
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
  /** Rows whose results.jsonl record differs from the workflow's result, or that are missing or repeated. */
  resultMismatches: number;
  errorsCsvRows: number;
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

const FINAL: readonly string[] = [RowState.Succeeded, RowState.Failed, RowState.Unknown];

export async function computeFigures(input: FigureInputs): Promise<ChaosFigures> {
  const { outcomes, ledger, batchId } = input;
  const completed = outcomes.filter((o) => o.status === 'COMPLETED' && o.result && FINAL.includes(o.result.state));
  const byState: Partial<Record<RowState, number>> = {};
  for (const o of completed) byState[o.result!.state] = (byState[o.result!.state] ?? 0) + 1;
  const counted = Object.fromEntries(Object.entries(input.progress.counts).filter(([, n]) => n > 0));
  const batchCountsDiffer =
    input.progress.done && JSON.stringify(sorted(counted)) === JSON.stringify(sorted(byState)) ? 0 : 1;

  const byKey = new Map(ledger.byIdempotencyKey().map((s) => [s.idempotencyKey, s]));
  const rowKeys = new Set<string>();
  let doubleCharged = 0;
  let succeededNotChargedOnce = 0;
  let failedWithCharge = 0;
  let moneyMismatches = 0;
  let unknownCharged = 0;
  for (const { rowId, result } of completed) {
    const keys = result!.attempts.map((_, i) => idempotencyKeyFor(batchId, rowId, i + 1));
    for (const k of keys) rowKeys.add(k);
    const netCharged = keys.reduce((n, k) => n + (byKey.get(k)?.netCharged ?? 0), 0);
    const netUsd = keys.reduce((n, k) => n + (byKey.get(k)?.netUsd ?? 0), 0);
    if (netCharged > 1) doubleCharged++;
    switch (result!.state) {
      case RowState.Succeeded:
        if (netCharged !== 1) succeededNotChargedOnce++;
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
    if (result!.state !== RowState.Unknown && Math.abs(netUsd - (result!.chargedUsd - result!.refundedUsd)) > 1e-6) {
      moneyMismatches++;
    }
  }
  const violations = ledger.violations();
  const failed = ledger
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

interface JsonlRecord {
  row_id: string;
  state: string;
  images: { path: string; sha256: string }[];
  attempts: number;
  creation_ids: string[];
  charged_usd: number;
  refunded_usd: number;
  unknown_idempotency_key: string | null;
}

/** results.jsonl against the workflows row by row; errors.csv and results.csv by their rows. */
async function compareResultFiles(
  written: WrittenResults,
  completed: readonly RowOutcome[],
): Promise<Pick<ChaosFigures, 'resultFileRows' | 'resultMismatches' | 'errorsCsvRows'>> {
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
  const expectedErrors = new Set(completed.filter((o) => o.result!.state !== RowState.Succeeded).map((o) => o.rowId));
  const errorIds = new Set(errorRows.map((r) => r.id));
  if (csvRows.length !== records.length) mismatches++;
  if (errorIds.size !== expectedErrors.size || [...expectedErrors].some((id) => !errorIds.has(id))) mismatches++;
  return { resultFileRows: records.length, resultMismatches: mismatches, errorsCsvRows: errorRows.length };
}

function sameAsWorkflow(r: JsonlRecord, result: PromptResult): boolean {
  const images = (list: readonly { path: string; sha256: string }[]) =>
    JSON.stringify(list.map((i) => [i.path, i.sha256]));
  return (
    r.state === result.state &&
    images(r.images) === images(result.images) &&
    r.attempts === result.attempts.length &&
    JSON.stringify(r.creation_ids) === JSON.stringify(result.creationIds) &&
    Math.abs(r.charged_usd - result.chargedUsd) < 1e-9 &&
    Math.abs(r.refunded_usd - result.refundedUsd) < 1e-9 &&
    r.unknown_idempotency_key === (result.unknownKey ?? null)
  );
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
  zero(f.lost, 'rows lost');
  zero(f.rowsRunTwice, 'rows whose workflow ran more than once');
  zero(f.batchCountsDiffer, "the batch's counts differ from the rows' states");
  zero(f.doubleCharged, 'rows charged twice');
  zero(f.ledgerChargedTwice, 'idempotency keys charged twice (ledger)');
  zero(f.succeededNotChargedOnce, 'succeeded rows not charged exactly once');
  zero(f.failedWithCharge, 'failed rows with a charge not refunded');
  zero(f.failedCreationsUnrefunded, 'failed creations not refunded');
  zero(f.chargesWithoutCreation, 'charges without a creation');
  zero(f.overchargedCreations, 'creations charged more than their price');
  zero(f.keysOfNoRow, "charged keys that are no row's attempt");
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
