import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimOwner, claimRow, scheduleDirOf } from '../../src/ledger/claims';
import type { LedgerStore, NewLedgerEvent } from '../../src/ledger';
import { tempLedger, testPrint, writeJsonlLedger } from '../helpers/ledger';
import { prepareScheduledInput } from '../../src/schedules/prepare';
import { KeyOutcome, RowState, type KeyOutcome as KeyOutcomeT, type RowRecord } from '../../src/model';
import { rowRecord } from '../helpers/records';

let dir: string;
let server: Server;
let base: string;
let store: LedgerStore;
/** What every preparation reads: the store, and the prints of an earlier version's ledger.jsonl. */
const ledger = () => ({ store, fingerprintOf: testPrint });
const BODY = 'prompt,model\n"a fox, in snow",flux-dev\na lake at dawn,flux-dev\n';

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-prepare-'));
  store = await tempLedger();
  server = createServer((req, res) => {
    if (req.url === '/prompts.csv') res.writeHead(200, { 'content-type': 'text/csv' }).end(BODY);
    else if (req.url === '/big.csv') res.writeHead(200).end('prompt\n' + 'x'.repeat(5000) + '\n');
    else res.writeHead(404).end('nope');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await rm(dir, { recursive: true, force: true });
  await store.close();
});

describe('the input of a scheduled run', () => {
  it('fetches a URL source, and writes the rows with explicit ids', async () => {
    const runDir = path.join(dir, 'run1');
    const prepared = await prepareScheduledInput({
      source: `${base}/prompts.csv`,
      runDir,
      skipSucceeded: true,
      ledger: ledger(),
    });
    expect(prepared).toMatchObject({ rows: 2, skipped: 0, invalid: 0 });
    const text = await readFile(prepared.file, 'utf8');
    expect(text.split('\n')[0]).toBe('id,prompt,model,negative_prompt,width,height,seed,num_images');
    expect(text).toContain('row-1,"a fox, in snow",flux-dev');
    expect(await readFile(path.join(runDir, 'source.csv'), 'utf8')).toBe(BODY);
  });

  it('leaves out the ids of the old succeeded-ids.txt record, still read for the schedules that wrote it', async () => {
    const scheduleDir = path.join(dir, 'legacy');
    await mkdir(scheduleDir, { recursive: true });
    await writeFile(path.join(scheduleDir, 'succeeded-ids.txt'), 'row-1\n');
    const file = path.join(dir, 'local.csv');
    await writeFile(file, BODY);
    const prepared = await prepareScheduledInput({
      source: file,
      runDir: path.join(scheduleDir, 'run2'),
      skipSucceeded: true,
      ledger: ledger(),
    });
    expect(prepared).toMatchObject({ rows: 1, skipped: 1 });
    expect(await readFile(prepared.file, 'utf8')).not.toContain('a fox');
  });

  it('refuses a URL that answers an error, or a body over the size limit, with the reason', async () => {
    const common = { runDir: path.join(dir, 'run3'), skipSucceeded: false, ledger: ledger() };
    await expect(prepareScheduledInput({ ...common, source: `${base}/missing.csv` })).rejects.toThrow(/HTTP 404/);
    await expect(prepareScheduledInput({ ...common, source: `${base}/big.csv`, maxBytes: 1000 })).rejects.toThrow(
      /over the limit of 1000/,
    );
  });
});

/** The request of row `id` of the sources below. */
const requestOf = (id: string) => ({ prompt: `a picture called ${id}`, model: 'flux-dev' });
/** The claim of the request of row `id`, held by row `id` of run `batchId`. */
const claim = (scheduleDir: string, id: string, batchId: string) =>
  claimRow(scheduleDir, testPrint(requestOf(id)).fingerprint, { batchId, rowId: id });
const ownerOf = async (scheduleDir: string, id: string) =>
  (await claimOwner(scheduleDir, testPrint(requestOf(id)).fingerprint))?.batchId;

/** One key of a row as a run's ledger tells it: sent, maybe accepted, maybe ended. */
function keyEvents(
  batchId: string,
  rowId: string,
  n: number,
  end?: { accepted?: boolean; outcome?: KeyOutcomeT },
): NewLedgerEvent[] {
  const request = requestOf(rowId);
  const ids = { batchId, rowId, idempotencyKey: `ib.${batchId}.${rowId}.a${n}` };
  return [
    { type: 'sending', ...ids, request, ...testPrint(request) },
    ...(end?.accepted ? [{ type: 'accepted' as const, ...ids, creationId: `c-${rowId}-${n}`, costUsd: 0.01 }] : []),
    ...(end?.outcome ? [{ type: 'ended' as const, ...ids, outcome: end.outcome }] : []),
  ];
}

function rowRecordOf(batchId: string, rowId: string, state: RowState, outcomes: KeyOutcomeT[]): RowRecord {
  const keys = outcomes.map((outcome, i) => ({
    attempt: i + 1,
    idempotencyKey: `ib.${batchId}.${rowId}.a${i + 1}`,
    outcome,
  }));
  return rowRecord({ batchId, rowId, state, prompt: requestOf(rowId).prompt, keys });
}

describe('what --skip-succeeded leaves out: every row any earlier run may have paid for, from their ledgers', () => {
  const ids = 'abcdefghijklmnop'.split('');
  const source = async (name: string) => {
    const file = path.join(dir, `${name}.csv`);
    await writeFile(file, `id,prompt,model\n${ids.map((id) => `${id},a picture called ${id},flux-dev`).join('\n')}\n`);
    return file;
  };
  const inputIds = async (file: string) =>
    (await readFile(file, 'utf8'))
      .trim()
      .split('\n')
      .slice(1)
      .map((l) => l.split(',')[0]);

  /** A schedule folder whose two earlier runs ended their rows in every way there is. */
  async function scheduleWithHistory(name: string): Promise<string> {
    const scheduleDir = path.join(dir, name);
    // The first run was of an earlier version: its ledger.jsonl is imported.
    await writeJsonlLedger(path.join(scheduleDir, 'run1'), [
      ...keyEvents('run1', 'a', 1, { accepted: true, outcome: KeyOutcome.Succeeded }), // succeeded
      ...keyEvents('run1', 'b', 1), // sent, no answer yet (in flight, or cut off): may be paid
      ...keyEvents('run1', 'c', 1, { accepted: true }), // accepted, never ended (cancelled, terminated)
      ...keyEvents('run1', 'd', 1, { accepted: true, outcome: KeyOutcome.TimedOut }), // the max poll wait ran out
      ...keyEvents('run1', 'e', 1, { outcome: KeyOutcome.Unknown }), // 500s until the tries ran out
      ...keyEvents('run1', 'f', 1, { accepted: true, outcome: KeyOutcome.Succeeded }), // paid, images unsaved
      { type: 'row', by: 'row', record: rowRecordOf('run1', 'f', RowState.ImagesUnsaved, [KeyOutcome.Succeeded]) },
      ...keyEvents('run1', 'g', 1, { outcome: KeyOutcome.Rejected }), // refused: nothing held
      ...keyEvents('run1', 'h', 1, { outcome: KeyOutcome.Refunded }), // 503: refunded
      ...keyEvents('run1', 'i', 1, { accepted: true, outcome: KeyOutcome.Failed }), // failed, refunded...
      ...keyEvents('run1', 'i', 2, { accepted: true, outcome: KeyOutcome.Failed }), // ... twice: nothing held
      ...keyEvents('run1', 'j', 1, { outcome: KeyOutcome.Declined }), // 402: nothing held
      ...keyEvents('run1', 'k', 1, { accepted: true, outcome: KeyOutcome.Failed }), // refunded, then a new key...
      ...keyEvents('run1', 'k', 2), // ... sent: may be paid
      // A record rebuilt by the batch's safety net, with no key events of its own: its key may be paid.
      { type: 'row', by: 'lookup', record: rowRecordOf('run1', 'l', RowState.Unknown, [KeyOutcome.Unknown]) },
    ]);
    // A later run, in the store: m succeeded, and g (refused in run1) was paid this time.
    await mkdir(path.join(scheduleDir, 'run2'), { recursive: true });
    await store.append([
      ...keyEvents('run2', 'm', 1, { accepted: true, outcome: KeyOutcome.Succeeded }),
      ...keyEvents('run2', 'g', 1, { accepted: true, outcome: KeyOutcome.Succeeded }),
    ]);
    return scheduleDir;
  }

  it('skips rows succeeded, unknown, timed out, unsaved or in flight in any run; retries the rest', async () => {
    const scheduleDir = await scheduleWithHistory('history');
    const prepared = await prepareScheduledInput({
      source: await source('history'),
      runDir: path.join(scheduleDir, 'run3'),
      skipSucceeded: true,
      ledger: ledger(),
    });
    // Left out: a b c d e f k l (run1), g m (run2). Run again: h i j (nothing held), n o p (never sent).
    expect(await inputIds(prepared.file)).toEqual(['h', 'i', 'j', 'n', 'o', 'p']);
    expect(prepared).toMatchObject({ rows: 6, skipped: 10, claimed: 0 });
  });

  it('runs every row when not asked to skip, and marks no run for claims', async () => {
    const scheduleDir = await scheduleWithHistory('no-skip');
    const runDir = path.join(scheduleDir, 'run3');
    const prepared = await prepareScheduledInput({
      source: await source('no-skip'),
      runDir,
      skipSucceeded: false,
      ledger: ledger(),
    });
    expect(await inputIds(prepared.file)).toEqual(ids);
    expect(await scheduleDirOf(runDir)).toBeUndefined();
  });

  it('marks the run as a run of its schedule, so its rows claim themselves before they send', async () => {
    const scheduleDir = await scheduleWithHistory('marked');
    const runDir = path.join(scheduleDir, 'run3');
    await prepareScheduledInput({ source: await source('marked'), runDir, skipSucceeded: true, ledger: ledger() });
    expect(await scheduleDirOf(runDir)).toBe(scheduleDir);
  });

  it('skips rows another run holds the claim of (being run now), not the ones this run holds', async () => {
    const scheduleDir = await scheduleWithHistory('claimed');
    await claim(scheduleDir, 'n', 'run2'); // run2 is running row n now
    await claim(scheduleDir, 'o', 'run3'); // this run's own claim (an earlier attempt of the activity)
    await claim(scheduleDir, 'a', 'run1'); // a paid row keeps its claim: skipped either way
    const prepared = await prepareScheduledInput({
      source: await source('claimed'),
      runDir: path.join(scheduleDir, 'run3'),
      skipSucceeded: true,
      ledger: ledger(),
    });
    expect(await inputIds(prepared.file)).toEqual(['h', 'i', 'j', 'o', 'p']);
    expect(prepared).toMatchObject({ rows: 5, skipped: 11, claimed: 1 });
  });

  it('gives back a claim whose row ended long ago with nothing held, and runs the row again', async () => {
    const scheduleDir = await scheduleWithHistory('stale');
    await claim(scheduleDir, 'n', 'run2'); // run2's row n closed long ago without sending
    await claim(scheduleDir, 'o', 'run2'); // run2's row o still runs
    await claim(scheduleDir, 'a', 'run1'); // paid: never given back, whatever its workflow
    const asked: string[] = [];
    const prepared = await prepareScheduledInput({
      source: await source('stale'),
      runDir: path.join(scheduleDir, 'run3'),
      skipSucceeded: true,
      ledger: ledger(),
      rowSettled: async (batchId, rowId) => {
        asked.push(`${batchId}/${rowId}`);
        return rowId === 'n';
      },
    });
    expect(await inputIds(prepared.file)).toEqual(['h', 'i', 'j', 'n', 'p']);
    expect(prepared).toMatchObject({ skipped: 11, claimed: 1, released: 1 });
    expect(asked.sort()).toEqual(['run2/n', 'run2/o']);
    expect(await ownerOf(scheduleDir, 'n')).toBeUndefined();
    expect(await ownerOf(scheduleDir, 'o')).toBe('run2');
    expect(await ownerOf(scheduleDir, 'a')).toBe('run1');
  });
});

describe('a request is known by what it asks, not by its id or line (issue 33)', () => {
  const noIds = (prompts: string[]) => `prompt,model\n${prompts.map((p) => `${p},flux-dev`).join('\n')}\n`;
  const paidRun = async (scheduleDir: string, batchId: string, rows: [string, string][]) => {
    await mkdir(path.join(scheduleDir, batchId), { recursive: true });
    for (const [rowId, prompt] of rows) {
      const request = { prompt, model: 'flux-dev' };
      const ids = { batchId, rowId, idempotencyKey: `ib.${batchId}.${rowId}.a1` };
      await store.append([
        { type: 'sending', ...ids, request, ...testPrint(request) },
        { type: 'accepted', ...ids, creationId: `c-${batchId}-${rowId}`, costUsd: 0.01 },
        { type: 'ended', ...ids, outcome: KeyOutcome.Succeeded },
      ]);
    }
  };
  const prompts = async (file: string) =>
    (await readFile(file, 'utf8'))
      .trim()
      .split('\n')
      .slice(1)
      .map((l) => l.split(',')[1]);

  it('a row inserted at the top of a file without ids runs, and the rows it shifted are not paid again', async () => {
    const scheduleDir = path.join(dir, 'inserted');
    // The first run paid for the file's two rows, under their positional ids.
    await paidRun(scheduleDir, 'run1', [
      ['row-1', 'a red kite'],
      ['row-2', 'a blue boat'],
    ]);
    const file = path.join(dir, 'inserted.csv');
    await writeFile(file, noIds(['a green field', 'a red kite', 'a blue boat']));
    const prepared = await prepareScheduledInput({
      source: file,
      runDir: path.join(scheduleDir, 'run2'),
      skipSucceeded: true,
      ledger: ledger(),
    });
    expect(await prompts(prepared.file)).toEqual(['a green field']);
    expect(prepared).toMatchObject({ rows: 1, skipped: 2 });
  });

  it('an edited prompt under the same id runs; a paid prompt under a new id does not', async () => {
    const scheduleDir = path.join(dir, 'edited');
    await paidRun(scheduleDir, 'run1', [
      ['a', 'a red kite'],
      ['b', 'a blue boat'],
    ]);
    const file = path.join(dir, 'edited.csv');
    await writeFile(file, 'id,prompt,model\na,a red kite at dusk,flux-dev\nb2,a blue boat,flux-dev\n');
    const prepared = await prepareScheduledInput({
      source: file,
      runDir: path.join(scheduleDir, 'run2'),
      skipSucceeded: true,
      ledger: ledger(),
    });
    expect(await prompts(prepared.file)).toEqual(['a red kite at dusk']);
    expect(prepared).toMatchObject({ rows: 1, skipped: 1 });
  });

  it('a request another run holds the claim of is left out, whatever id it has in this file', async () => {
    const scheduleDir = path.join(dir, 'claimed-by-content');
    await mkdir(scheduleDir, { recursive: true });
    await claimRow(scheduleDir, testPrint({ prompt: 'a red kite', model: 'flux-dev' }).fingerprint, {
      batchId: 'run1',
      rowId: 'row-1',
    });
    const file = path.join(dir, 'claimed-by-content.csv');
    await writeFile(file, noIds(['a green field', 'a red kite']));
    const prepared = await prepareScheduledInput({
      source: file,
      runDir: path.join(scheduleDir, 'run2'),
      skipSucceeded: true,
      ledger: ledger(),
    });
    expect(await prompts(prepared.file)).toEqual(['a green field']);
    expect(prepared).toMatchObject({ rows: 1, skipped: 1, claimed: 1 });
  });
});
