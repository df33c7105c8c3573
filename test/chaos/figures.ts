import { FaultKind } from '../../src/simulator';
import { ChaosEventKind } from './chaos-plan';
import type { ChaosReport } from './chaos-scenario';
import { DIFFERENCES_NAMED, describeDifference, spendTotalInWords, usd, type Spend } from './spend-reconciliation';

/**
 * The figures table of a chaos run: one line per figure, with `ok` or `FAIL` where the figure is an invariant.
 * Plain text, so that it can be pasted into docs/chaos.md as it is.
 */
export function formatFigures(report: ChaosReport, wallMs: number): string {
  const f = report.figures;
  const lines: [string, string, string][] = [];
  const info = (name: string, value: string | number) => lines.push([name, String(value), '']);
  const check = (name: string, value: string | number, ok: boolean) =>
    lines.push([name, String(value), ok ? 'ok' : 'FAIL']);
  const zero = (name: string, value: number) => check(name, value, value === 0);
  const section = (name: string) => lines.push([`-- ${name}`, '', '']);
  const list = (o: Record<string, number>) =>
    Object.entries(o)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');

  section('rows');
  const inFinal = Object.values(f.byState).reduce((a, b) => a + b, 0);
  check('rows in a final state', `${inFinal} of ${f.rows}`, inFinal === f.rows);
  info('rows by final state', list(f.byState));
  zero('rows not in exactly one final state', f.notFinal);
  zero('rows without a complete record', f.rowsWithoutRecord);
  zero('rows lost', f.lost);
  zero('rows whose workflow ran twice', f.rowsRunTwice);
  check("batch's counts = rows' states", f.batchCountsDiffer === 0 ? 'yes' : 'no', f.batchCountsDiffer === 0);

  section('money (simulator charge book)');
  zero('rows charged twice', f.doubleCharged);
  zero('idempotency keys charged twice', f.ledgerChargedTwice);
  zero('succeeded (or images unsaved) rows not charged once', f.succeededNotChargedOnce);
  zero('failed rows with a charge left', f.failedWithCharge);
  check(
    'failed creations refunded',
    `${f.failedCreations - f.failedCreationsUnrefunded} of ${f.failedCreations}`,
    f.failedCreationsUnrefunded === 0,
  );
  zero('charges without a creation', f.chargesWithoutCreation);
  zero('creations charged above price', f.overchargedCreations);
  zero("charged keys in no row's record", f.keysOfNoRow);
  zero("rows' accounting != ledger", f.moneyMismatches);
  info('unknown rows: charged / not charged', `${f.unknownCharged} / ${f.unknownRows - f.unknownCharged}`);
  info('net charged', `${f.netChargedUsd.toFixed(2)} USD`);

  section('images');
  info('images checked (sha256)', f.imagesChecked);
  zero('images missing', f.imagesMissing);
  zero('images with a wrong sha256', f.imagesBadChecksum);
  zero('succeeded rows without images', f.succeededWithoutImages);

  section('result files');
  check('results.jsonl rows', `${f.resultFileRows} of ${f.rows}`, f.resultFileRows === f.rows);
  zero("rows differing from the workflows' records", f.resultMismatches);
  info('errors.csv rows', f.errorsCsvRows);
  info('unresolved.csv rows', f.unresolvedCsvRows);

  section('reconcile (after the batch)');
  const r = report.reconcile;
  check('unresolved rows examined', `${r.examined} of ${r.unresolvedBefore}`, r.examined === r.unresolvedBefore);
  check(
    'resolved / reported',
    `${r.resolved} / ${r.reported}`,
    r.resolved + r.reported === r.examined && r.unresolvedAfter === r.reported,
  );
  zero('rows charged twice after reconcile', r.rowsChargedTwice);
  zero('keys charged twice after reconcile', r.keysChargedTwice);

  section("spend reconciliation (results against the simulator's charge book)");
  const s = report.spend;
  const money = (m: Spend) => `net ${usd(m.netUsd)} (charged ${usd(m.chargedUsd)}, refunded ${usd(m.refundedUsd)})`;
  info('rows compared', `${s.rowsCompared} (of ${s.resultRows} in results.jsonl)`);
  const named = s.differences.slice(0, DIFFERENCES_NAMED).map(describeDifference);
  const more = s.differences.length - named.length;
  check(
    'rows differing',
    s.differences.length === 0
      ? '0'
      : `${s.differences.length}: ${named.join(' | ')}${more > 0 ? ` | and ${more} more` : ''}`,
    s.differences.length === 0,
  );
  info(
    'rows of unknown spend',
    s.unknownRows.length === 0
      ? '0'
      : `${s.unknownRows.length} (the simulator holds ${money(s.unknownSimulator)}: ` +
          `${s.unknownRows
            .slice(0, DIFFERENCES_NAMED)
            .map((u) => `${u.rowId} ${usd(u.simulator.netUsd)}`)
            .join(', ')}${s.unknownRows.length > DIFFERENCES_NAMED ? ', ...' : ''})`,
  );
  info(
    'refunded charges never seen answered',
    `${s.unseenRefunded.charges} (${usd(s.unseenRefunded.usd)} charged and refunded in full; left out of charged ` +
      'and refunded, net 0)',
  );
  const totalsAgree = s.totalsDiffering.length === 0;
  check('results total net (known)', money(s.resultsKnown), totalsAgree);
  check('simulator total net (same rows)', money(s.simulatorSameRows), totalsAgree);
  info('simulator total net (all rows)', money(s.simulatorAllRows));
  check('total', spendTotalInWords(s), totalsAgree && s.differences.length === 0);

  section("ledger store (against the simulator's charge book)");
  const st = report.store;
  info('keys in the store', st.storeKeys);
  info('charges under the batch keys', st.charges);
  info('charges whose creation the store names', st.chargesKnown);
  zero('charges under keys the store never heard of', st.chargesWithoutKey.length);
  zero('creations the store names that were not made', st.unknownCreations.length);
  zero('costs differing by a cent or more', st.costsDiffering.length);
  info(
    'charged, over the creations the store names',
    `${usd(st.chargedKnownUsd.simulator)} simulator, ${usd(st.chargedKnownUsd.store)} store (its known costs)`,
  );
  section('chaos');
  const at = (kind: ChaosEventKind) =>
    report.events
      .filter((e) => e.kind === kind)
      .map((e) => `${(e.atMs / 1000).toFixed(0)} s`)
      .join(' ');
  info('worker SIGKILLs', `${f.kills}${f.kills ? ` (at ${at(ChaosEventKind.KillWorker)})` : ''}`);
  const downs = report.events.filter((e) => e.kind === ChaosEventKind.RestartServer).map((e) => e.outageMs);
  info(
    'dev-server restarts',
    `${f.serverRestarts}${downs.length ? ` (at ${at(ChaosEventKind.RestartServer)}, down ${downs.join(' ')} ms)` : ''}`,
  );
  info('429 storms / 429 answers', `${f.storms} / ${f.tooManyRequests}`);
  const { [FaultKind.None]: untouched, ...faults } = f.simulatorFaults;
  info('simulator faults', list(faults));
  info('simulator submissions without fault', untouched);
  const p = f.proxyFaults;
  const before = f.proxyBeforeRequest;
  info(
    'proxy faults',
    `reset ${p.reset} (${before.reset} before the request), stall ${p.stall} (${before.stall} before the request), ` +
      `cut ${p.cut}, latency ${p.latency}, of ${f.proxyExchanges} exchanges`,
  );
  info('answers by status (upstream)', list(f.answersByStatus));
  zero('simulator handler errors', f.simulatorErrors);

  section('time');
  info('batch', `${(f.batchMs / 1000).toFixed(1)} s over ${f.continueAsNewRuns} run(s)`);
  info('wall (set-up, batch, checks)', `${(wallMs / 1000).toFixed(1)} s`);

  const width = Math.max(...lines.map(([name]) => name.length));
  const head = `chaos run: seed ${report.seed}, ${report.rows} rows: ${report.violations.length === 0 ? 'PASSED' : 'FAILED'}`;
  return [
    head,
    ...lines.map(([name, value, mark]) => (value ? `${name.padEnd(width)}  ${value}${mark ? `  ${mark}` : ''}` : name)),
  ].join('\n');
}
