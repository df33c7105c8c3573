import { readdir } from 'node:fs/promises';
import { CLAIMS_DIR } from '../ledger/claims';

/** The batch ids of a schedule's runs: the folders of its output folder (its claims aside). */
export async function runBatchIds(scheduleDir: string): Promise<string[]> {
  try {
    const entries = await readdir(scheduleDir, { withFileTypes: true });
    return entries.filter((e) => e.isDirectory() && e.name !== CLAIMS_DIR).map((e) => e.name);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}
