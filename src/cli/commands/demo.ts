import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { DevServer } from '../../temporal/dev-server';
import { createWorker, TASK_QUEUE } from '../../worker';
import { pingWorkflow, type PingWorkflowResult } from '../../workflows';

/** Options of {@link demo}. */
export interface DemoOptions {
  /**
   * Folder that keeps the embedded server's SQLite file, so that a second run finds the first one's history.
   * @default `.imagebatch` in the working directory
   */
  home: string;
  /** Progress lines for a person; the command's result is the return value. */
  log: (line: string) => void;
  /** Aborted on Ctrl-C: everything started is stopped cleanly. */
  signal?: AbortSignal;
}

export interface DemoResult {
  temporalAddress: string;
  webUi: string | undefined;
  dbFile: string;
  workflowId: string;
  result: PingWorkflowResult;
  /** Demo runs recorded in the server's history, this one included. */
  runsInHistory: number;
}

/**
 * The main command on the embedded default: starts the dev server on its SQLite file and a worker in this
 * process, runs a workflow through an activity, and stops both.
 */
export async function demo(options: DemoOptions): Promise<DemoResult> {
  const dbFile = path.join(options.home, 'temporal.sqlite');
  options.log(`starting the embedded Temporal dev server (state in ${dbFile})`);
  const server = await DevServer.start({ dbFile });
  try {
    options.log(`Temporal is at ${server.address}; Web UI: ${server.uiUrl ?? 'off'}`);
    const nativeConnection = await NativeConnection.connect({ address: server.address });
    const connection = await Connection.connect({ address: server.address });
    try {
      const client = new Client({ connection });
      const worker = await createWorker({ connection: nativeConnection });
      const workflowId = `demo/ping/${new Date().toISOString()}`;
      const run = client.workflow.execute(pingWorkflow, {
        taskQueue: TASK_QUEUE,
        workflowId,
        args: [{ name: 'imagebatch demo' }],
      });
      const aborted = new Promise<never>((_, reject) => {
        options.signal?.addEventListener('abort', () => reject(new Error('interrupted')), { once: true });
      });
      options.log(`running workflow ${workflowId} (Ctrl-C stops everything cleanly)`);
      const result = await worker.runUntil(Promise.race([run, aborted]));
      const { count } = await client.workflow.count(`WorkflowType = 'pingWorkflow'`);
      return { temporalAddress: server.address, webUi: server.uiUrl, dbFile, workflowId, result, runsInHistory: count };
    } finally {
      await connection.close();
      await nativeConnection.close();
    }
  } finally {
    await server.stop();
  }
}
