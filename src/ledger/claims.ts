import { createHash, randomBytes } from 'node:crypto';
import { link, mkdir, open, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * Claims of requests across the runs of one schedule. Each run of a schedule is a batch of its own (a fresh batch
 * id, so fresh idempotency keys): two runs that overlap (`allow_all`, or a run started while a cancelled or
 * terminated one still has rows in flight) could both pay for one request. Before a row of a run sends a key, it
 * claims its request (the request's fingerprint: what it asks, whatever the row's id or line) in the schedule's
 * folder; a request claimed by another run is not sent. The claim is given back only when the row ended with no
 * money held (refused, or refunded), so a later run may retry it; a request that may have been paid keeps it.
 *
 * A claim is one file, `<scheduleDir>/claims/<fingerprint, encoded>`, holding the owner's batch and row. It is created
 * exclusively: written whole under a temporary name, then hard-linked to its name, which fails if the name exists
 * (atomic on local file systems and NFS alike, and a reader never sees a claim half written); where hard links are
 * not supported, it is created with O_EXCL. Several workers on a shared volume claim in the same folder.
 */
export const CLAIMS_DIR = 'claims';

/** The marker of a run of a schedule, in the run's output folder. */
export const SCHEDULE_RUN_FILE = 'schedule-run.json';

const MARKER_VERSION = 1;

interface ScheduleRunMarker {
  v: typeof MARKER_VERSION;
  /** The schedule folder, relative to the run folder (`..`): right wherever the volume is mounted. */
  scheduleDir: string;
  batchId: string;
}

interface ClaimContent {
  v: typeof MARKER_VERSION;
  /** What is claimed: the request's fingerprint. */
  print: string;
  /** The row of the owner that claimed it. */
  rowId: string;
  batchId: string;
  at: string;
}

/** Who holds a claim: a run (its batch id) and its row. */
export interface ClaimOwner {
  batchId: string;
  rowId: string;
}

/** Marks `runDir` as the output folder of run `batchId` of the schedule whose folder is `scheduleDir`. */
export async function markScheduleRun(runDir: string, scheduleDir: string, batchId: string): Promise<void> {
  await mkdir(runDir, { recursive: true });
  const marker: ScheduleRunMarker = {
    v: MARKER_VERSION,
    scheduleDir: path.relative(path.resolve(runDir), path.resolve(scheduleDir)) || '.',
    batchId,
  };
  const file = path.join(runDir, SCHEDULE_RUN_FILE);
  const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  await writeFile(tmp, `${JSON.stringify(marker)}\n`, 'utf8');
  await rename(tmp, file);
}

/** The schedule folder when `outDir` is a run of a schedule (prepareScheduledRun marks it), else undefined. */
export async function scheduleDirOf(outDir: string): Promise<string | undefined> {
  const file = path.join(outDir, SCHEDULE_RUN_FILE);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw err;
  }
  let marker: Partial<ScheduleRunMarker>;
  try {
    marker = JSON.parse(text) as Partial<ScheduleRunMarker>;
  } catch {
    marker = {};
  }
  if (marker?.v !== MARKER_VERSION || typeof marker.scheduleDir !== 'string') {
    // Running on without the claims could pay twice for a row: the row's key waits until the marker is fixed.
    throw new Error(
      `${file} is not a schedule-run marker this version can read: ${JSON.stringify(text.slice(0, 200))}`,
    );
  }
  return path.resolve(outDir, marker.scheduleDir);
}

const LONG_NAME = 200;

/**
 * The claim file's name of what is claimed (a request's fingerprint; a row id in the claims of earlier versions):
 * lower-case letters, digits and `-` as they are, every other byte as `_` and two
 * lower-case hex digits, so names differ on case-insensitive file systems, `.` and `..` never occur, and nothing
 * but `[a-z0-9_-]` is used. A name longer than 200 characters is the SHA-256 of the id, with the suffix `.sha256`
 * (no escaped name holds a `.`).
 */
export function claimFileName(print: string): string {
  let name = '';
  for (const byte of Buffer.from(print, 'utf8')) {
    const c = String.fromCharCode(byte);
    name += /[a-z0-9-]/.test(c) ? c : `_${byte.toString(16).padStart(2, '0')}`;
  }
  if (name.length <= LONG_NAME) return name;
  return `${createHash('sha256').update(print, 'utf8').digest('hex')}.sha256`;
}

const claimsDirOf = (scheduleDir: string) => path.join(scheduleDir, CLAIMS_DIR);
const claimFileOf = (scheduleDir: string, print: string) => path.join(claimsDirOf(scheduleDir), claimFileName(print));

/** The run and row that hold the claim of request `print`, or undefined when it is free. */
export async function claimOwner(scheduleDir: string, print: string): Promise<ClaimOwner | undefined> {
  const file = claimFileOf(scheduleDir, print);
  // A claim made with O_EXCL (no hard links) may be seen before its content: wait for it a little.
  for (let tries = 0; ; tries++) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    try {
      const claim = JSON.parse(text) as Partial<ClaimContent>;
      if (typeof claim.batchId === 'string') return { batchId: claim.batchId, rowId: claim.rowId ?? '' };
    } catch {
      // read again
    }
    if (tries >= 50) throw new Error(`the claim ${file} cannot be read: ${JSON.stringify(text.slice(0, 200))}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Claims request `print` for row `rowId` of run `batchId` in the schedule folder, atomically (an exclusively created
 * file under <scheduleDir>/claims/); ok when it is free or already this run's (another row of the run asking the
 * same thing is served by the ledger store, which pays a request once).
 */
export async function claimRow(
  scheduleDir: string,
  print: string,
  owner: ClaimOwner,
): Promise<{ ok: true } | { ok: false; owner: ClaimOwner }> {
  const dir = claimsDirOf(scheduleDir);
  const file = claimFileOf(scheduleDir, print);
  const content: ClaimContent = { v: MARKER_VERSION, print, ...owner, at: new Date().toISOString() };
  const text = `${JSON.stringify(content)}\n`;
  await mkdir(dir, { recursive: true });
  for (;;) {
    const created = await createExclusive(dir, file, text);
    if (created) return { ok: true };
    const held = await claimOwner(scheduleDir, print);
    if (held === undefined) continue; // given back between the two: try again
    return held.batchId === owner.batchId ? { ok: true } : { ok: false, owner: held };
  }
}

/**
 * Gives the claim of request `print` back (only if run `batchId` holds it): called when the row ended with no money
 * held, so a later run may retry it.
 */
export async function releaseRow(scheduleDir: string, print: string, batchId: string): Promise<void> {
  // Only the owner removes a claim, and no other run can take it while it exists: read, then remove, is safe.
  if ((await claimOwner(scheduleDir, print))?.batchId !== batchId) return;
  try {
    await unlink(claimFileOf(scheduleDir, print));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

/** Creates `file` with `text` unless it exists: true when this call created it. */
async function createExclusive(dir: string, file: string, text: string): Promise<boolean> {
  const tmp = path.join(dir, `.tmp-${process.pid}-${randomBytes(8).toString('hex')}`);
  const handle = await open(tmp, 'wx');
  try {
    await handle.writeFile(text, 'utf8');
    await handle.datasync();
  } finally {
    await handle.close();
  }
  try {
    await link(tmp, file);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return false;
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw err;
    return createWithExcl(file, text);
  } finally {
    await unlink(tmp).catch(() => undefined);
  }
}

/** O_EXCL: for file systems without hard links. */
async function createWithExcl(file: string, text: string): Promise<boolean> {
  let handle;
  try {
    handle = await open(file, 'wx');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  try {
    await handle.writeFile(text, 'utf8');
    await handle.datasync();
  } finally {
    await handle.close();
  }
  return true;
}
