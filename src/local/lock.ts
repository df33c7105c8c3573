import { closeSync, mkdirSync, openSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pidAlive } from './processes';

/**
 * Runs `fn` while this process holds the home's lock file, created exclusively with its pid: one process at a time
 * starts or stops the local server and worker. A lock whose process is gone (a crash, `kill -9`) is stale and taken
 * over; a live holder is waited for, at most `timeoutMs`.
 */
export async function withLock<T>(file: string, fn: () => Promise<T>, timeoutMs = 180_000): Promise<T> {
  // The lock's folder is the home: the user's alone (the worker's logs and state).
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const fd = openSync(file, 'wx', 0o600);
      try {
        writeSync(fd, `${process.pid}\n`);
      } finally {
        closeSync(fd);
      }
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = lockHolder(file);
    // A lock without a pid is given a moment (its writer is between open and write), then taken for torn.
    if (holder === undefined ? olderThan(file, 5_000) : !pidAlive(holder)) rmSync(file, { force: true });
    else if (Date.now() > deadline) {
      throw new Error(
        `${file} is held by process ${holder ?? '(unknown)'}, which has been starting or stopping the local server ` +
          `for over ${Math.round(timeoutMs / 1000)} s; if it is not an imagebatch process, remove the file`,
      );
    } else await sleep(100);
  }
  try {
    return await fn();
  } finally {
    if (lockHolder(file) === process.pid) rmSync(file, { force: true });
  }
}

function lockHolder(file: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(file, 'utf8'), 10);
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function olderThan(file: string, ms: number): boolean {
  try {
    return Date.now() - statSync(file).mtimeMs > ms;
  } catch {
    return false;
  }
}
