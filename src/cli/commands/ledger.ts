import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import {
  adoptLedgerStore,
  SummaryGroup,
  type AdoptedStore,
  type LedgerKey,
  type LedgerStore,
  type SummaryRow,
} from '../../ledger';
import { roundUsd } from '../../model';
import { defineCommand, type CommandGroup } from '../command';
import { withLedgerStore } from '../ledger-store';
import { batchId, flag } from '../options';
import { terminalText } from '../terminal-text';
import { csvText } from '../../util/file-text';
import { ledgerCheckCommand } from './ledger-check';

const GROUPS = Object.values(SummaryGroup);

/** The summary's table for a person: one line a group, then the totals. */
export function summaryLines(by: SummaryGroup, rows: readonly SummaryRow[], location: string): string[] {
  const total = rows.reduce<SummaryRow>(
    (t, r) => ({
      group: 'total',
      keys: t.keys + r.keys,
      paid: t.paid + r.paid,
      paidUsd: roundUsd(t.paidUsd + r.paidUsd),
      paidCostUnknown: t.paidCostUnknown + r.paidCostUnknown,
      open: t.open + r.open,
      refunded: t.refunded + r.refunded,
      refused: t.refused + r.refused,
    }),
    { group: 'total', keys: 0, paid: 0, paidUsd: 0, paidCostUnknown: 0, open: 0, refunded: 0, refused: 0 },
  );
  const header = [by, 'keys', 'paid', 'paid (USD, shown)', 'cost not shown', 'open or unknown', 'refunded', 'refused'];
  const cells = (r: SummaryRow) => [
    terminalText(r.group),
    String(r.keys),
    String(r.paid),
    r.paidUsd.toFixed(4),
    String(r.paidCostUnknown),
    String(r.open),
    String(r.refunded),
    String(r.refused),
  ];
  const table = [header, ...rows.map(cells), ...(rows.length > 1 ? [cells(total)] : [])];
  const widths = header.map((_, i) => Math.max(...table.map((line) => line[i]!.length)));
  const lines = table.map((line) =>
    line.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  '),
  );
  const notes = [
    `ledger store ${location}`,
    ...(total.paidCostUnknown > 0
      ? [`${total.paidCostUnknown} paid key(s) whose cost the service never showed: their charge is unknown, not 0`]
      : []),
    ...(total.open > 0
      ? [`${total.open} key(s) sent with no creation known: in flight, or of unknown outcome (imagebatch reconcile)`]
      : []),
  ];
  return [...notes, ...lines];
}

/** `imagebatch ledger show`: what was paid, by batch, by day or by request. */
const showCommand = defineCommand({
  name: 'show',
  description: 'What the ledger store says was paid: by batch, by day (UTC) or by request fingerprint',
  options: [
    { flags: '--by <group>', description: `${GROUPS.join(', ')}`, default: 'batch' },
    { flags: '--batch <id>', description: 'only this batch' },
    { flags: '--json', description: 'print as JSON' },
  ],
  schema: z.object({
    by: z.enum(GROUPS, { error: (i) => `must be one of ${GROUPS.join(', ')} (got ${JSON.stringify(i.input)})` }),
    batch: batchId.optional(),
    json: flag,
  }),
  async run(opts, { stdout, env }) {
    await withLedgerStore(env, async (store) => {
      const rows = await store.summarize(opts.by, opts.batch);
      stdout(
        opts.json
          ? `${JSON.stringify({ store: store.location, by: opts.by, rows })}\n`
          : `${summaryLines(opts.by, rows, store.location).join('\n')}\n`,
      );
    });
  },
});

/** The CSV columns of `ledger export`, one line a key. */
const EXPORT_COLUMNS = [
  'batch_id',
  'row_id',
  'idempotency_key',
  'fingerprint',
  'first_sent_at',
  'outcome',
  'creation_id',
  'cost_usd',
  'error',
] as const;

function exportCells(k: LedgerKey): string[] {
  return [
    k.batchId,
    k.rowId,
    k.idempotencyKey,
    k.fingerprint,
    new Date(k.firstSentAtMs).toISOString(),
    // A key with no known end: accepted (a creation exists) or open (no creation known).
    k.ended?.outcome ?? (k.creationId ? 'accepted' : 'open'),
    k.creationId ?? '',
    k.costUsd === undefined ? '' : k.costUsd.toFixed(4),
    k.ended?.error ?? '',
  ];
}

/** Writes every key of the store (of one batch, when given) as CSV to `file`; the number of keys. */
export async function exportKeys(store: LedgerStore, file: string, batch?: string): Promise<number> {
  const lines = [csvText([[...EXPORT_COLUMNS]])];
  let count = 0;
  for (let after = 0; ;) {
    const page = await store.keys(after, 1000, batch);
    if (page.keys.length > 0) lines.push(csvText(page.keys.map(exportCells)));
    count += page.keys.length;
    if (page.done) break;
    after = page.next;
  }
  await mkdir(path.dirname(file), { recursive: true });
  const partial = `${file}.${process.pid}.tmp`;
  await writeFile(partial, lines.join(''), 'utf8');
  await rename(partial, file);
  return count;
}

/** `imagebatch ledger export FILE`: every key, as CSV. */
const exportCommand = defineCommand({
  name: 'export',
  description: 'Every key of the ledger store as CSV: batch, row, key, fingerprint, when sent, outcome, creation, cost',
  args: [{ name: 'file', description: 'the CSV file to write' }],
  options: [{ flags: '--batch <id>', description: 'only this batch' }],
  schema: z.object({ file: z.string(), batch: batchId.optional() }),
  async run(opts, { stderr, env }) {
    const file = path.resolve(opts.file);
    const count = await withLedgerStore(env, (store) => exportKeys(store, file, opts.batch));
    stderr(`${count} key(s) -> ${file}\n`);
  },
});

/** What `ledger new` says it did: the store in use from now on, and what may be paid again. */
export function adoptedLines(adopted: AdoptedStore): string[] {
  const now = `the ledger store ${adopted.location} (store ${adopted.id}, ${adopted.keys} key(s)) is the one in use`;
  const { replaced } = adopted;
  if (!replaced) return [`${now}; it replaced no store this user used: nothing changed`];
  const gone = replaced.expected;
  return [
    `${now} from now on.`,
    `It does not know the ${gone.keys} key(s) of store ${gone.id} (${gone.location}, last used ` +
      `${new Date(gone.lastUsedMs).toISOString()}): a request that store paid for may be paid again.`,
  ];
}

/** `imagebatch ledger new`: start afresh on the store IMAGEBATCH_LEDGER names, saying what may be paid again. */
const newCommand = defineCommand({
  name: 'new',
  description: 'Use the store IMAGEBATCH_LEDGER names from now on, in place of a missing, emptied or other one',
  schema: z.object({}),
  async run(_opts, { stdout, env }) {
    stdout(`${adoptedLines(await adoptLedgerStore(env)).join('\n')}\n`);
  },
});

/** `imagebatch ledger ...`: the store of what was asked and paid. */
export const ledgerCommands: CommandGroup = {
  name: 'ledger',
  description: 'The ledger store (IMAGEBATCH_LEDGER): what was asked and paid, by batch, day or request',
  summary: 'What was asked and paid (IMAGEBATCH_LEDGER)',
  commands: [showCommand, exportCommand, ledgerCheckCommand, newCommand],
};
