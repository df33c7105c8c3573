import { fork, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CLAIMS_DIR,
  SCHEDULE_RUN_FILE,
  claimFileName,
  claimOwner,
  claimRow,
  markScheduleRun,
  releaseRow,
  scheduleDirOf,
} from '../../src/ledger/claims';
import { ID_PATTERN } from '../../src/model';

let dir: string;
let n = 0;
const freshSchedule = async () => {
  const d = path.join(dir, `schedule-${++n}`);
  await mkdir(d, { recursive: true });
  return d;
};

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-claims-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('the schedule folder of a run', () => {
  it('is undefined for an output folder that is no run of a schedule, or that does not exist', async () => {
    const plain = path.join(dir, 'plain');
    await mkdir(plain, { recursive: true });
    expect(await scheduleDirOf(plain)).toBeUndefined();
    expect(await scheduleDirOf(path.join(dir, 'missing'))).toBeUndefined();
  });

  it('is the folder the marker names, relative to the run folder, wherever the volume is mounted', async () => {
    const scheduleDir = await freshSchedule();
    const runDir = path.join(scheduleDir, 'nightly-2026-01-01T02:00:00Z');
    await markScheduleRun(runDir, scheduleDir, 'nightly-2026-01-01T02:00:00Z');
    expect(await scheduleDirOf(runDir)).toBe(scheduleDir);
    const marker = JSON.parse(await readFile(path.join(runDir, SCHEDULE_RUN_FILE), 'utf8')) as Record<string, unknown>;
    expect(marker).toMatchObject({ v: 1, scheduleDir: '..', batchId: 'nightly-2026-01-01T02:00:00Z' });
    // The same tree seen under another mount point still names its own schedule folder.
    const moved = path.join(dir, 'elsewhere');
    await mkdir(path.join(moved, 'run'), { recursive: true });
    await writeFile(path.join(moved, 'run', SCHEDULE_RUN_FILE), JSON.stringify(marker));
    expect(await scheduleDirOf(path.join(moved, 'run'))).toBe(moved);
  });

  it('refuses a marker it cannot read rather than running without claims', async () => {
    const runDir = path.join(await freshSchedule(), 'run');
    await mkdir(runDir, { recursive: true });
    await writeFile(path.join(runDir, SCHEDULE_RUN_FILE), '{"v":1,');
    await expect(scheduleDirOf(runDir)).rejects.toThrow(SCHEDULE_RUN_FILE);
  });
});

/** Claims `subject` (a request's print) for run `batchId`; the owner told as its batch id. */
async function claim(s: string, subject: string, batchId: string) {
  const answer = await claimRow(s, subject, { batchId, rowId: subject });
  return answer.ok ? answer : { ok: false, owner: answer.owner.batchId };
}
const ownerOf = async (s: string, subject: string) => (await claimOwner(s, subject))?.batchId;

describe('claims of requests', () => {
  it('a free row is claimed; again by the same run is ok; another run is told the owner', async () => {
    const s = await freshSchedule();
    expect(await claim(s, 'row-1', 'run-a')).toEqual({ ok: true });
    expect(await claim(s, 'row-1', 'run-a')).toEqual({ ok: true });
    expect(await claim(s, 'row-1', 'run-b')).toEqual({ ok: false, owner: 'run-a' });
    expect(await claim(s, 'row-2', 'run-b')).toEqual({ ok: true });
    expect(await ownerOf(s, 'row-1')).toBe('run-a');
    expect(await ownerOf(s, 'row-3')).toBeUndefined();
  });

  it('a release by the owner frees the row for another run; a release by anyone else changes nothing', async () => {
    const s = await freshSchedule();
    await claim(s, 'r', 'run-a');
    await releaseRow(s, 'r', 'run-b');
    expect(await claim(s, 'r', 'run-b')).toEqual({ ok: false, owner: 'run-a' });
    await releaseRow(s, 'r', 'run-a');
    await releaseRow(s, 'r', 'run-a'); // twice: nothing to give back
    await releaseRow(s, 'never-claimed', 'run-a');
    expect(await ownerOf(s, 'r')).toBeUndefined();
    expect(await claim(s, 'r', 'run-b')).toEqual({ ok: true });
    expect(await claim(s, 'r', 'run-a')).toEqual({ ok: false, owner: 'run-b' });
  });

  it('of many runs claiming one row at once, exactly one wins and every other is told the same owner', async () => {
    const s = await freshSchedule();
    for (let round = 0; round < 5; round++) {
      const rowId = `row-${round}`;
      const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => claim(s, rowId, `run-${i}`)));
      const winners = answers.flatMap((a, i) => (a.ok ? [`run-${i}`] : []));
      expect(winners).toHaveLength(1);
      for (const a of answers) if (!a.ok) expect(a.owner).toBe(winners[0]);
      expect(await ownerOf(s, rowId)).toBe(winners[0]);
    }
    // No temporary file is left behind.
    expect((await readdir(path.join(s, CLAIMS_DIR))).filter((f) => f.startsWith('.'))).toEqual([]);
  });

  it('of several processes claiming the same rows at once, one wins each row', async () => {
    const s = await freshSchedule();
    const rows = Array.from({ length: 400 }, (_, i) => `row-${i}`);
    const script = path.join(dir, 'claimer.mjs');
    const claimsModule = path.resolve(__dirname, '../../src/ledger/claims.ts');
    // Each process loads, says it is ready, and claims every row at once when told to go.
    await writeFile(
      script,
      `const { claimRow } = await import(${JSON.stringify(claimsModule)});
       const [scheduleDir, batchId, ...rows] = process.argv.slice(2);
       process.once('message', async () => {
         const answers = await Promise.all(rows.map((r) => claimRow(scheduleDir, r, { batchId, rowId: r })));
         process.send(rows.filter((_, i) => answers[i].ok), () => process.exit(0));
       });
       process.send('ready');`,
    );
    const children = ['p1', 'p2', 'p3', 'p4'].map((batchId) =>
      fork(script, [s, batchId, ...rows], { execArgv: ['--import', 'tsx'] }),
    );
    const next = (child: ChildProcess) =>
      new Promise<unknown>((resolve, reject) => {
        child.once('message', resolve);
        child.once('error', reject);
        child.once('exit', (code) => (code === 0 ? undefined : reject(new Error(`claimer exited ${code}`))));
      });
    await Promise.all(children.map(next));
    const results = children.map(next);
    for (const child of children) child.send('go');
    const won = (await Promise.all(results)) as string[][];
    expect(won.flat().sort()).toEqual([...rows].sort());
    for (const [i, list] of won.entries()) {
      for (const r of list) expect(await ownerOf(s, r)).toBe(`p${i + 1}`);
    }
  });

  it('row ids differing only in case or in . _ : - are different claims, with safe file names', async () => {
    const s = await freshSchedule();
    const ids = [
      'A',
      'a',
      'a.b',
      'a_b',
      'a:b',
      'a-b',
      '.a',
      'a.',
      '..a',
      '-',
      '_',
      ':',
      'X'.repeat(128),
      'x'.repeat(128),
    ];
    for (const id of ids) expect(ID_PATTERN.test(id)).toBe(true);
    for (const [i, id] of ids.entries()) expect(await claim(s, id, `run-${i}`)).toEqual({ ok: true });
    for (const [i, id] of ids.entries()) expect(await ownerOf(s, id)).toBe(`run-${i}`);
    const names = ids.map(claimFileName);
    expect(new Set(names).size).toBe(ids.length);
    for (const name of names) {
      expect(name).toMatch(/^[a-z0-9_-][a-z0-9_.-]*$/);
      expect(name.length).toBeLessThanOrEqual(200);
      expect(name).not.toMatch(/^\.+$/);
    }
    expect((await readdir(path.join(s, CLAIMS_DIR))).sort()).toEqual([...names].sort());
    // Readable where it can be: a lower-case id is its own name.
    expect(claimFileName('row-12')).toBe('row-12');
  });
});
