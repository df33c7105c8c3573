/**
 * 7. Temporal's footprint per row (issue #32, point 5): N rows (2,000; `--quick` 200; `--rows N`) in local mode's
 * set-up (the dev server on a SQLite file with the server's own pragmas, as `src/local` starts it) against the
 * zero-latency simulator, once with payload compression off and once on. Measured: the SQLite file (and its -wal)
 * before and after, bytes per row, what its tables hold; the histories of the batch and of a sample of rows: events
 * per row by type, bytes per row split into payloads (by what they carry) and the rest; payloads that repeat; and
 * the projection to a million rows (disk, and hours at the measured rows/s, on this machine).
 *
 *   npx tsx bench/footprint.ts [--rows N] [--quick]    # or: npm run bench -- --only footprint
 */
import os from 'node:os';
import path from 'node:path';
import { PAYLOAD_COMPRESSION_ENV } from '../src/config/compression-config';
import { ensureDistIsFresh } from '../test/helpers/dist';
import { rowIds, writeBatchFile } from './lib/batch-file';
import type { Benchmark, BenchContext } from './lib/context';
import { payloadCensus, type PayloadCensus } from './lib/payload-census';
import { simulatorSettings } from './lib/settings';
import { sqliteFiles, tableBytes, totalBytes, type SqliteFiles, type TableBytes } from './lib/sqlite-footprint';
import { Stack } from './lib/stack';
import { num, toMarkdown, verdict, type Cell, type Table } from './lib/table';
import { ORCHESTRATION_CONCURRENCY, ZERO_LATENCY_WORKER_ENV } from './orchestration';

/** Rows of a run. */
export const FOOTPRINT_ROWS = 2000;
/** Rows of a `--quick` run. */
export const FOOTPRINT_QUICK_ROWS = 200;
/** Rows whose histories are read. */
const SAMPLED_ROWS = 20;
/** The goal of #32: Temporal's state per row in local mode, bytes (the file after the batch). */
export const FOOTPRINT_GOAL_BYTES = 4096;
/** The size the figures are projected to. */
const PROJECTED_ROWS = 1_000_000;
/** The variants, in the order they run. */
const VARIANTS = [
  { name: 'compression off (the default)', compression: 'off' },
  { name: 'compression on', compression: 'on' },
] as const;

interface Measured {
  name: string;
  rows: number;
  seconds: number;
  before: SqliteFiles;
  /** With the server still running, right after the batch. */
  live: SqliteFiles;
  /** Once the server stopped (its log checkpointed into the file). */
  stopped: SqliteFiles;
  tables: TableBytes[];
  census: PayloadCensus;
  retentionHours: number;
}

const perRow = (m: Measured, bytes: number) => bytes / m.rows;
const fileBytesPerRow = (m: Measured) => perRow(m, totalBytes(m.stopped) - totalBytes(m.before));
const mb = (bytes: number) => num(bytes / 2 ** 20, 1);

async function measure(ctx: BenchContext, rows: number, variant: (typeof VARIANTS)[number]): Promise<Measured> {
  const settings = { [PAYLOAD_COMPRESSION_ENV]: variant.compression };
  const stack = await Stack.start({
    name: 'footprint',
    count: false,
    sim: simulatorSettings({ generationMs: { min: 0, max: 0 } }),
    workerEnv: { ...ZERO_LATENCY_WORKER_ENV, ...settings },
    cliEnv: settings,
    // Local mode's server: no pragmas of ours (src/local/local.ts), the server's own journal.
    pragmas: {},
  });
  try {
    const db = path.join(stack.dir, 'temporal.sqlite');
    const file = path.join(stack.dir, 'rows.csv');
    await writeBatchFile(file, rows);
    const before = sqliteFiles(db);
    ctx.log(`footprint: ${rows} rows, ${variant.name}`);
    const batchId = 'footprint';
    const run = await stack.runBatch(file, batchId, ORCHESTRATION_CONCURRENCY, 3 * 60 * 60_000);
    if (run.progress.counts.succeeded !== rows) {
      throw new Error(`footprint: ${JSON.stringify(run.progress.counts)} of ${rows} rows`);
    }
    const live = sqliteFiles(db);
    const client = stack.client!;
    const ns = await client.workflowService.describeNamespace({ namespace: 'default' });
    const ttl = ns.config?.workflowExecutionRetentionTtl?.seconds;
    ctx.log(`footprint: reading the histories of the batch and ${SAMPLED_ROWS} rows`);
    const census = await payloadCensus(client, batchId, rowIds(rows), SAMPLED_ROWS);
    for (const { label, text } of census.example) ctx.log(`footprint: a row's ${label}: ${text}`);
    await stack.worker?.stop();
    await stack.server.stop();
    return {
      name: variant.name,
      rows,
      seconds: run.seconds,
      before,
      live,
      stopped: sqliteFiles(db),
      tables: tableBytes(db),
      census,
      retentionHours: Number(ttl ?? 0) / 3600,
    };
  } finally {
    await stack.close();
  }
}

/** The machine the projection assumes. */
function machine(): string {
  return `${os.cpus().length} cores, ${os.cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}`;
}

function summaryTable(runs: readonly Measured[], rows: number): Table {
  return {
    title: `7. Temporal's footprint per row (${num(rows)} rows, local mode's dev server on SQLite, zero-latency simulator)`,
    headers: [
      'variant',
      'rows/s',
      'SQLite before MB',
      'after, live MB (file + wal)',
      'after, stopped MB',
      'bytes/row (file)',
      'history bytes/row',
      'payload bytes/row',
      'events/row',
    ],
    rows: runs.map((m) => [
      m.name,
      num(m.rows / m.seconds, 1),
      mb(totalBytes(m.before)),
      `${mb(m.live.db)} + ${mb(m.live.wal)}`,
      mb(totalBytes(m.stopped)),
      num(fileBytesPerRow(m)),
      num(m.census.historyBytes.row + m.census.historyBytes.batch),
      num(m.census.payloadBytes.row + m.census.payloadBytes.batch),
      num(eventsOf(m.census.eventsPerRow.row) + eventsOf(m.census.eventsPerRow.batch), 1),
    ]),
    notes: [
      ...runs.map(
        (m) =>
          `Goal (#32): Temporal state at most ${num(FOOTPRINT_GOAL_BYTES)} bytes a row in local mode, ${m.name}: ` +
          `${verdict(fileBytesPerRow(m) <= FOOTPRINT_GOAL_BYTES)} (${num(fileBytesPerRow(m))} bytes; at ` +
          `${num(rows)} rows, not the 100,000 of the goal).`,
      ),
      `bytes/row (file): growth of the SQLite file and its -wal from the server's start to its stop after the batch, ` +
        `divided by the rows. History and payload bytes: events proto-encoded, as the server stores them; a row's ` +
        `own history (mean of ${SAMPLED_ROWS} rows) plus its share of the batch's (${runs[0]?.census.batchRuns ?? 0} ` +
        `runs). The namespace's retention was ${num(runs[0]?.retentionHours ?? 0)} h: nothing was deleted during ` +
        `the runs. Settings: \`--concurrency ${ORCHESTRATION_CONCURRENCY}\`, the worker's defaults but ` +
        `${Object.entries(ZERO_LATENCY_WORKER_ENV)
          .map(([k, v]) => `${k}=${v}`)
          .join(', ')}, ${PAYLOAD_COMPRESSION_ENV} as the variant says (worker and CLI).`,
    ],
  };
}

const eventsOf = (types: Record<string, number>) => Object.values(types).reduce((a, b) => a + b, 0);

/** What the SQLite file holds per row, by table (tables under 1% of the file left out), one column per variant. */
function tablesTable(runs: readonly Measured[]): Table {
  const names = new Set<string>();
  for (const m of runs) {
    const total = totalBytes(m.stopped);
    for (const t of m.tables) if (t.bytes >= total / 100) names.add(t.table);
  }
  const cell = (m: Measured, table: string): Cell => {
    const t = m.tables.find((x) => x.table === table);
    return t ? `${num(perRow(m, t.bytes))} (${num(t.rows)} rows)` : '0';
  };
  return {
    title: "7b. What the SQLite file holds, bytes per batch row by table (the table's rows in brackets)",
    headers: ['table (with its indexes)', ...runs.map((m) => m.name)],
    rows: [...names].map((name) => [name, ...runs.map((m) => cell(m, name))]),
    notes: [
      'dbstat pages of each table and its indexes once the server stopped, over the batch rows; tables under 1% of the ' +
        'file are left out. history_node holds the events; executions_visibility the visibility records.',
      ...largestParts(runs[0]),
    ],
  };
}

/** The parts (the table, its indexes) of the two largest tables of a run, bytes per row. */
function largestParts(m: Measured | undefined): string[] {
  if (!m) return [];
  return m.tables.slice(0, 2).map(
    (t) =>
      `${t.table}, ${m.name}: ${t.parts
        .slice(0, 12)
        .map((p) => `${p.name} ${num(perRow(m, p.bytes))}`)
        .join(', ')}${t.parts.length > 12 ? `, and ${t.parts.length - 12} more` : ''} (${t.parts.length} parts).`,
  );
}

function eventsTable(runs: readonly Measured[]): Table {
  const types = new Set<string>();
  for (const m of runs) for (const t of Object.keys(m.census.eventsPerRow.row)) types.add(t);
  const [first] = runs;
  if (first) for (const t of Object.keys(first.census.eventsPerRow.batch)) types.add(t);
  const e = first?.census.eventsPerRow;
  return {
    title: '7c. History events per row, by type (a row its own; the batch its share per row)',
    headers: ['event type', "row's history", "batch's, per row"],
    rows: [...types].map((t) => [t, num(e?.row[t] ?? 0, 2), num(e?.batch[t] ?? 0, 2)]),
    notes: [
      `Total ${num(eventsOf(e?.row ?? {}), 1)} events in a row's history and ${num(eventsOf(e?.batch ?? {}), 2)} per row ` +
        `in the batch's (${first?.census.batchRuns ?? 0} runs); the same in both variants.`,
    ],
  };
}

function payloadsTable(runs: readonly Measured[]): Table {
  const [off, on] = runs;
  const kinds = off?.census.kinds ?? [];
  const stored = (m: Measured | undefined, where: string, what: string) =>
    m?.census.kinds.find((k) => k.where === where && k.what === what)?.storedBytes ?? 0;
  const rest = (m: Measured | undefined) =>
    m
      ? m.census.historyBytes.row +
        m.census.historyBytes.batch -
        m.census.payloadBytes.row -
        m.census.payloadBytes.batch
      : 0;
  return {
    title: "7d. A row's history bytes by what they carry (per row; the batch's payloads shared over its rows)",
    headers: ['history', 'payloads of', 'count/row', 'bytes/row, off', 'bytes/row, on', 'prompt copies/row'],
    rows: [
      ...kinds.map((k) => [
        k.where,
        k.what,
        num(k.count, 2),
        num(k.storedBytes),
        num(stored(on, k.where, k.what)),
        num(k.promptCopies, 2),
      ]),
      ['both', 'the rest (event fields, ids, timestamps, task queue names)', '', num(rest(off)), num(rest(on)), ''],
    ],
    notes: [
      `Payload bytes are each payload proto-encoded (metadata and data) as the history holds it. The prompt is ` +
        `${num(off?.census.promptBytes ?? 0)} bytes here (the bench's file); prompt copies count it inside each ` +
        `payload, decompressed.`,
    ],
  };
}

function repeatsTable(runs: readonly Measured[]): Table {
  const [off, on] = runs;
  return {
    title: '7e. Payloads that carry the same bytes twice or more (per row, beyond the first copy)',
    headers: ['the same payload in', 'extra bytes/row, off', 'extra bytes/row, on'],
    rows: (off?.census.repeats ?? []).map((r) => [
      r.places.join(' = '),
      num(r.extraStoredBytes),
      num(on?.census.repeats.find((x) => x.places.join() === r.places.join())?.extraStoredBytes ?? 0),
    ]),
    notes: [
      "Same content: the same payload once decompressed (metadata and data), found in a sampled row's history or in " +
        "the batch's. Partial repeats (the prompt inside several payloads) are in 6d's last column.",
    ],
  };
}

function projectionTable(runs: readonly Measured[]): Table {
  return {
    title: `7f. Projection to ${num(PROJECTED_ROWS)} rows (local mode, one machine)`,
    headers: ['variant', 'bytes/row', 'disk GB', 'rows/s', 'hours', 'machine'],
    rows: runs.map((m) => {
      const rate = m.rows / m.seconds;
      return [
        m.name,
        num(fileBytesPerRow(m)),
        num((fileBytesPerRow(m) * PROJECTED_ROWS) / 1e9, 1),
        num(rate, 1),
        num(PROJECTED_ROWS / rate / 3600, 1),
        machine(),
      ];
    }),
    notes: [
      `Linear in the rows: bytes/row and rows/s as measured at ${num(runs[0]?.rows ?? 0)} rows, before retention ` +
        `deletes any closed row (${num(runs[0]?.retentionHours ?? 0)} h after it closed); the file does not shrink ` +
        `when rows are deleted (SQLite reuses its free pages). Against the zero-latency simulator: the orchestration's ` +
        `pace, not a real service's.`,
    ],
  };
}

/** Both variants on `rows` rows: the tables. */
export async function runFootprint(ctx: BenchContext, rows: number): Promise<{ table: Table; more: Table[] }> {
  const runs: Measured[] = [];
  for (const variant of VARIANTS) runs.push(await measure(ctx, rows, variant));
  return {
    table: summaryTable(runs, rows),
    more: [tablesTable(runs), eventsTable(runs), payloadsTable(runs), repeatsTable(runs), projectionTable(runs)],
  };
}

export const footprint: Benchmark = {
  name: 'footprint',
  run: (ctx) => runFootprint(ctx, ctx.quick ? FOOTPRINT_QUICK_ROWS : FOOTPRINT_ROWS),
};

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const quick = args.includes('--quick');
  const at = args.indexOf('--rows');
  const rows = at >= 0 ? Number(args[at + 1]) : quick ? FOOTPRINT_QUICK_ROWS : FOOTPRINT_ROWS;
  if (!Number.isInteger(rows) || rows < 1) throw new Error(`--rows takes a whole number of rows, not ${args[at + 1]}`);
  const log = (line: string) => process.stderr.write(`[footprint ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
  await ensureDistIsFresh();
  const ctx: BenchContext = { quick, log, earlier: new Map(), artifact: (s) => s };
  const out = await runFootprint(ctx, rows);
  process.stdout.write(
    `Date: ${new Date().toISOString()}; machine: ${machine()}; load ${os.loadavg()[0]?.toFixed(2)}\n\n`,
  );
  for (const table of [out.table, ...out.more]) process.stdout.write(`${toMarkdown(table)}\n`);
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
