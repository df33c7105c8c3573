import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { BatchNoAnswerError, QUERY_TIMEOUT_MS, followBatch } from '../../src/cli/batches';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import { batchWorkflowId } from '../../src/model';
import { batchWorkflow, type BatchWorkflowInput } from '../../src/workflows';
import { baseEnv, cli, describeRun, ensureDistIsFresh } from '../cli/helpers';

/**
 * The CLI's waits on a batch that no worker runs (a task queue nobody polls): `status` and `pause` end after
 * QUERY_TIMEOUT_MS with a message that says what is wrong, instead of the server's 30 s and "Failed to query
 * Workflow"; `run --follow` says so once and goes on waiting. And `run --max-poll-wait` reaches the batch's input.
 * The tests wait out timeouts on batches of their own, so they run at the same time.
 */
let dir: string;
let server: DevServer | undefined;
let connection: Connection | undefined;
let client: Client;
let env: Record<string, string>;
const TASK_QUEUE = `nobody-${randomUUID()}`;

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-cliwaits-'));
  server = await DevServer.start({ ...devServerBase(), uiPort: false });
  connection = await Connection.connect({ address: server.address });
  client = new Client({ connection });
  env = baseEnv({ TEMPORAL_ADDRESS: server.address, TEMPORAL_TASK_QUEUE: TASK_QUEUE });
}, 300_000);

afterAll(async () => {
  await connection?.close();
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function batchFile(name: string): Promise<string> {
  const file = path.join(dir, `${name}.csv`);
  await writeFile(file, 'id,prompt,model\nr1,a fox in the snow,flux-dev\n');
  return file;
}

/** The input a batch was started with, from the first event of its history. */
async function startInput(batchId: string): Promise<BatchWorkflowInput> {
  const events = (await client.workflow.getHandle(batchWorkflowId(batchId)).fetchHistory()).events ?? [];
  const payload = events[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0]?.data;
  return JSON.parse(Buffer.from(payload!).toString('utf8')) as BatchWorkflowInput;
}

describe.concurrent('the CLI bounds its waits on a batch nobody runs', () => {
  it('run --max-poll-wait puts the maximum wait into the batch input; a bad value is a usage error', async ({
    expect,
  }) => {
    const file = await batchFile('maxwait');
    const args = ['run', file, '--batch-id', 'maxwait', '--max-poll-wait', '45m', '--out', path.join(dir, 'out')];
    const r = await cli(args, { env });
    expect(r.code, describeRun(args, r)).toBe(0);
    expect((await startInput('maxwait')).maxPollWaitMs).toBe(45 * 60_000);

    const bad = ['run', file, '--batch-id', 'maxwait-bad', '--max-poll-wait', '500ms'];
    const rb = await cli(bad, { env });
    expect(rb.code, describeRun(bad, rb)).toBe(2);
    expect(rb.stderr).toMatch(/--max-poll-wait.*at least 1 s, such as 90s, 45m or 2h/s);
  }, 120_000);

  it('status ends after the query timeout and asks whether a worker runs; pause says its signal was sent', async ({
    expect,
  }) => {
    const file = await batchFile('silent');
    const run = ['run', file, '--batch-id', 'silent', '--out', path.join(dir, 'out')];
    expect((await cli(run, { env })).code).toBe(0);

    // Both wait out the query timeout, each on its own: at once.
    const [status, pause] = await Promise.all([
      cli(['status', 'silent'], { env, timeoutMs: 60_000 }),
      cli(['pause', 'silent'], { env, timeoutMs: 60_000 }),
    ]);
    expect(status.code, describeRun(['status'], status)).toBe(1);
    expect(status.stderr).toContain(
      `batch silent did not answer within ${QUERY_TIMEOUT_MS / 1000} s: is a worker running`,
    );
    // The server alone would have held the query for 30 s.
    expect(status.ms).toBeLessThan(25_000);

    expect(pause.code, describeRun(['pause'], pause)).toBe(1);
    expect(pause.stderr).toContain('pause was sent and applies once a worker runs the batch, but batch silent did');
    const events = (await client.workflow.getHandle(batchWorkflowId('silent')).fetchHistory()).events ?? [];
    expect(events.some((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'pause')).toBe(true);
  }, 120_000);

  it('following a batch nobody answers for reports it once and goes on until stopped', async ({ expect }) => {
    const handle = await client.workflow.start(batchWorkflow, {
      taskQueue: TASK_QUEUE,
      workflowId: batchWorkflowId('followed'),
      args: [{ batchId: 'followed', file: 'none.csv', outDir: 'out' }],
    });
    const controller = new AbortController();
    const reports: BatchNoAnswerError[] = [];
    const followed = client.withAbortSignal(controller.signal, () =>
      followBatch(handle, () => undefined, {
        intervalMs: 100,
        queryTimeoutMs: 1_000,
        signal: controller.signal,
        onNoAnswer: (err) => reports.push(err),
      }),
    );
    // Several query timeouts pass; the report comes once, and following goes on.
    await new Promise((resolve) => setTimeout(resolve, 4_500));
    controller.abort();
    await expect(followed).rejects.toThrow();
    expect(reports).toHaveLength(1);
    expect(reports[0]).toBeInstanceOf(BatchNoAnswerError);
    expect(reports[0]!.message).toContain('batch followed did not answer within 1 s');
  }, 60_000);
});
