import { setTimeout as sleep } from 'node:timers/promises';

/** Whether a process with this id exists (a zombie or another user's process counts). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Stops a process this one did not start: SIGTERM, then SIGKILL once `graceMs` has passed; resolves once it has gone
 * (or after `graceMs` + 5 s, with false).
 */
export async function stopPid(pid: number, graceMs: number): Promise<boolean> {
  const signal = (name: NodeJS.Signals) => {
    try {
      process.kill(pid, name);
    } catch {
      // gone already
    }
  };
  if (!pidAlive(pid)) return true;
  signal('SIGTERM');
  const killAt = Date.now() + graceMs;
  const giveUpAt = killAt + 5_000;
  let killed = false;
  while (pidAlive(pid)) {
    if (!killed && Date.now() >= killAt) {
      signal('SIGKILL');
      killed = true;
    }
    if (Date.now() >= giveUpAt) return false;
    await sleep(100);
  }
  return true;
}
