import os from 'node:os';
import { Context } from '@temporalio/activity';
import type { Dispatcher } from 'undici';
import type { ServiceConfig } from '../api/service-config';
import { runDoctorChecks, type DoctorDeps, type DoctorOptions, type DoctorReport, type SaveImages } from '../doctor';
import { downloadImages, downloadSettings, guardedDownloadDispatcher } from './download';
import { whileHeartbeating } from './heartbeat';
import { doctorStatusJudge } from './status-check';

/**
 * The paid test's images saved as a batch saves them: without the key, through the download guard (a dispatcher of
 * its own, closed after, unless one is given), within the settings' sizes and timeouts.
 */
export function doctorImageSaver(deps: {
  config: ServiceConfig;
  outputRoot: string;
  now: () => number;
  /** @default the guarded download dispatcher of the batches */
  downloadDispatcher?: Dispatcher;
}): SaveImages {
  const { config } = deps;
  return async ({ creationId, images, outDir, signal }) => {
    const dispatcher = deps.downloadDispatcher ?? guardedDownloadDispatcher(config, 2);
    try {
      return await downloadImages(
        { batchId: 'doctor', rowId: 'spend-one', creationId, images, outDir },
        {
          ...downloadSettings(config),
          dispatcher,
          outputRoot: deps.outputRoot,
          now: deps.now,
          ...(signal ? { signal } : {}),
        },
      );
    } finally {
      if (!deps.downloadDispatcher) await dispatcher.close();
    }
  };
}

/** The activity: the checks (src/doctor) with the worker's settings and key, heartbeating while they run. */
export function createDoctorActivities(
  deps: Omit<DoctorDeps, 'signal' | 'sleep' | 'ranOn' | 'saveImages' | 'judgeStatus'> & {
    downloadDispatcher?: Dispatcher;
  },
) {
  const { downloadDispatcher, ...checks } = deps;
  const shared = {
    config: deps.config,
    now: deps.now ?? Date.now,
    ...(downloadDispatcher ? { downloadDispatcher } : {}),
  };
  const saveImages = doctorImageSaver({ ...shared, outputRoot: deps.outputRoot });
  const judgeStatus = doctorStatusJudge(shared);
  return {
    async doctorChecks(options: DoctorOptions): Promise<DoctorReport> {
      const ctx = Context.current();
      const ranOn = `worker ${process.pid}@${os.hostname()}`;
      return whileHeartbeating(
        ctx,
        runDoctorChecks({ ...checks, saveImages, judgeStatus, signal: ctx.cancellationSignal, ranOn }, options),
      );
    },
  };
}
