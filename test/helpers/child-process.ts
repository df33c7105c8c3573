import type { ChildProcess } from 'node:child_process';

/**
 * SIGTERM, then SIGKILL if the child has not gone after `graceMs`; resolves once it has exited (`exited` is the
 * caller's promise of its exit). Shared by the test and bench process wrappers.
 */
export async function stopChild(child: ChildProcess, exited: Promise<unknown>, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
  }
}
