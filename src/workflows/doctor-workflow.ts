import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { DoctorOptions, DoctorReport } from '../doctor';
import { HEARTBEAT_TIMEOUT } from './timeouts';

// One attempt, and a second one if the worker is lost: a re-run of `--spend-one` reuses its key, so it pays nothing
// twice. The activity heartbeats while it waits; its longest wait is the CLI's --max-wait (at most 15 minutes).
const { doctorChecks } = proxyActivities<Activities>({
  startToCloseTimeout: '20 minutes',
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: { maximumAttempts: 2 },
});

/**
 * `imagebatch doctor` through a worker: the checks run with the worker's settings and key (the key never leaves the
 * worker; the report holds a fingerprint at most).
 */
export async function doctorWorkflow(options: DoctorOptions): Promise<DoctorReport> {
  return doctorChecks(options);
}
