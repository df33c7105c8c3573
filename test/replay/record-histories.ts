/**
 * Re-records the replay fixtures in test/replay/histories/: `npx tsx test/replay/record-histories.ts`.
 *
 * Runs the current workflows with the real activities against the simulator on an in-memory dev server, one
 * scenario each, and saves every history as `JSON.stringify` of the History message that `fetchHistory()` returns
 * (protobufjs's JSON form: enum names, 64-bit integers as strings, bytes in base64), formatted by prettier; the
 * replay test reads it back with `History.fromObject`. Not the SDK's `historyToJSON`/`historyFromJSON`: with this
 * lock file @temporalio/common and @temporalio/proto each carry their own copy of protobufjs 8, and both functions
 * throw "type must be a Type". Re-record only on purpose: the fixtures are what running workflows look like, and the replay test
 * proves that new workflow code still replays them (changes go behind `patched()`). The histories hold no API key
 * (it lives in the worker's environment only); the replay test checks that too.
 *
 * It lives under test/ rather than scripts/ because only test/, src/ and bench/ are in the type-checked project.
 */
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { format, resolveConfig } from 'prettier';
import { defaultServiceConfig } from '../../src/config/service-config';
import { DEMO_ACCOUNT_ID, DEMO_API_KEY, FaultKind, startSimulator } from '../../src/simulator';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import { createWorker } from '../../src/worker';
import { batchWorkflowId, type PromptWorkflowInput } from '../../src/model';
import {
  batchWorkflow,
  cancelSignal,
  pauseSignal,
  progressQuery,
  promptWorkflow,
  resumeSignal,
  type BatchWorkflowInput,
} from '../../src/workflows';
import { ROW_REPORTS_LIMIT } from '../../src/workflows/prompt-workflow';
import { lazyTempLedger } from '../helpers/ledger';
import { expectState, hasPatch, recordAdaptiveWindow, recordNotSent, waitFor } from './recorded-scenarios';
import { recordKeyNotHonoured } from './recorded-key-proof';
import { recordDeclaredPrice } from './recorded-declared-price';
import { recordScheduledBudget, recordScheduledCapPaused } from './recorded-schedule';

// IMAGEBATCH_HISTORIES_DIR records elsewhere (e.g. to add a new version's histories beside the old ones).
const HISTORIES_DIR = process.env.IMAGEBATCH_HISTORIES_DIR ?? path.join(__dirname, 'histories');
const TASK_QUEUE = 'replay-recording';

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const server = await DevServer.start({ ...devServerBase(), uiPort: false });
  // The simulator's clock, which the max-wait scenario stops so that a creation never ends.
  let frozenAt: number | undefined;
  const sim = await startSimulator({
    clock: { now: () => frozenAt ?? Date.now() },
    generation: { queuedMs: { minMs: 10, maxMs: 30 }, runningMs: { minMs: 50, maxMs: 100 } },
    limits: { minPollIntervalMs: 100, requestsPerSecond: 1000, burst: 1000 },
    faults: { providerRetryAfterSeconds: 1 },
    // No prompt declined at random: each scenario's rows end as it says.
    safety: { genericDeclineProbability: 0 },
    models: [
      { id: 'flux-dev', name: 'Flux Dev', price_usd: 0.04 },
      { id: 'flux-schnell', name: 'Flux Schnell', price_usd: 0.01 },
      { id: 'sdxl', name: 'Stable Diffusion XL', price_usd: 0.02 },
      // A stale catalog: shown at 0.01 an image, charged 0.04.
      { id: 'stale-price', name: 'Stale Price', price_usd: 0.04, listed_price_usd: 0.01 },
    ],
  });
  const outputRoot = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-record-'));
  const native = await NativeConnection.connect({ address: server.address });
  const connection = await Connection.connect({ address: server.address });
  try {
    const client = new Client({ connection });
    const worker = await createWorker({
      connection: native,
      taskQueue: TASK_QUEUE,
      activityDeps: {
        config: defaultServiceConfig({ baseUrl: sim.baseUrl, minPollIntervalMs: 100 }),
        apiKey: () => DEMO_API_KEY,
        outputRoot,
        temporalClient: client,
        ledger: lazyTempLedger(),
      },
    });
    const histories = new Map<string, string>();
    const save = async (name: string, handle: WorkflowHandle, runId?: string) => {
      const h = runId ? client.workflow.getHandle(handle.workflowId, runId) : handle;
      histories.set(name, JSON.stringify(await h.fetchHistory()));
    };

    await worker.runUntil(async () => {
      const row = (rowId: string, prompt: string) => ({
        taskQueue: TASK_QUEUE,
        workflowId: `replay/${rowId}`,
        args: [{ batchId: 'replay', rowId, request: { prompt, model: 'flux-dev' }, outDir: 'replay' }] as [
          PromptWorkflowInput,
        ],
      });

      // A row's happy path.
      const happy = await client.workflow.start(promptWorkflow, row('happy', 'a lighthouse on a cliff at dusk'));
      expectState(await happy.result(), 'succeeded');
      await save('prompt-happy-path', happy);

      // A retryable generation failure: refunded, then a new attempt with a new key succeeds.
      const failingPrompt = 'a quiet harbour at dawn [retryable]';
      sim.scriptFor(failingPrompt, [{ kind: FaultKind.FailGeneration }]);
      const retried = await client.workflow.start(promptWorkflow, row('retryable', failingPrompt));
      expectState(await retried.result(), 'succeeded', 2);
      await save('prompt-retryable-failure', retried);

      // A 503: charged and refunded before the answer; its Retry-After is a durable timer, then a new key.
      const busyPrompt = 'a desert at noon [503]';
      sim.scriptFor(busyPrompt, [{ kind: FaultKind.ProviderUnavailable }]);
      const refunded = await client.workflow.start(promptWorkflow, row('refunded-503', busyPrompt));
      expectState(await refunded.result(), 'succeeded', 2);
      await save('prompt-503-refunded', refunded);

      // A batch-level stop (402, empty wallet): the row tells its batch and waits; a resume carries it on.
      sim.setWallet(DEMO_ACCOUNT_ID, 0);
      const stopFile = path.join(outputRoot, 'stop.csv');
      await writeFile(stopFile, 'id,prompt\nfirst,a fox in the snow at night\nsecond,a boat on a calm lake\n');
      const stopped = await client.workflow.start(batchWorkflow, {
        taskQueue: TASK_QUEUE,
        workflowId: batchWorkflowId('replay-stop'),
        args: [
          { batchId: 'replay-stop', file: stopFile, outDir: 'stop', concurrency: 1, defaultModel: 'flux-dev' },
        ] as [BatchWorkflowInput],
      });
      await waitFor(async () => (await stopped.query(progressQuery)).status === 'paused');
      sim.setWallet(DEMO_ACCOUNT_ID, 100);
      await stopped.signal(resumeSignal);
      const stopProgress = await stopped.result();
      if (stopProgress.counts.succeeded !== 2) throw new Error(`stop batch: ${JSON.stringify(stopProgress)}`);
      await save('prompt-batch-stop-resume', client.workflow.getHandle('replay-stop/first'));
      await save('batch-stop-resume', stopped);

      // A spend cap: the first row reserves its price, the second would pass the cap and waits; a resume with a
      // higher cap carries it on. The price of each comes from the catalog, asked once at the start.
      const capFile = path.join(outputRoot, 'cap.csv');
      await writeFile(capFile, 'id,prompt\nfirst,a red kite over a hill\nsecond,a lantern in the fog\n');
      const capped = await client.workflow.start(batchWorkflow, {
        taskQueue: TASK_QUEUE,
        workflowId: batchWorkflowId('replay-cap'),
        args: [
          {
            batchId: 'replay-cap',
            file: capFile,
            outDir: 'cap',
            concurrency: 2,
            defaultModel: 'flux-dev',
            spendCapUsd: 0.05,
          },
        ] as [BatchWorkflowInput],
      });
      await waitFor(async () => {
        const p = await capped.query(progressQuery);
        return p.waiting?.kind === 'spend_cap' && p.counts.succeeded === 1;
      });
      await capped.signal(resumeSignal, { spendCapUsd: 1 });
      const capProgress = await capped.result();
      if (capProgress.counts.succeeded !== 2) throw new Error(`cap batch: ${JSON.stringify(capProgress)}`);
      await save('batch-spend-cap-resume', capped);

      // Batch and row ids of 128 characters each: the rows' workflow ids are cut to 255 with the batch's digest.
      const longBatch = `replay-long-${'b'.repeat(116)}`;
      const longFile = path.join(outputRoot, 'long.csv');
      await writeFile(longFile, `id,prompt\n${'r'.repeat(127)}1,a heron in the reeds\n${'r'.repeat(127)}2,a kite\n`);
      const long = await client.workflow.start(batchWorkflow, {
        taskQueue: TASK_QUEUE,
        workflowId: batchWorkflowId(longBatch),
        args: [{ batchId: longBatch, file: longFile, outDir: 'long', concurrency: 2, defaultModel: 'flux-dev' }] as [
          BatchWorkflowInput,
        ],
      });
      const longProgress = await long.result();
      if (longProgress.counts.succeeded !== 2) throw new Error(`long-id batch: ${JSON.stringify(longProgress)}`);
      await save('batch-long-ids', long);

      // A small batch that continues as new (every run is saved).
      const canFile = path.join(outputRoot, 'can.csv');
      const prompts = Array.from({ length: 8 }, (_, i) => `a watercolour garden number ${i + 1}`);
      await writeFile(canFile, `prompt\n${prompts.join('\n')}\n`);
      const can = await client.workflow.start(batchWorkflow, {
        taskQueue: TASK_QUEUE,
        workflowId: batchWorkflowId('replay-can'),
        args: [
          {
            batchId: 'replay-can',
            file: canFile,
            outDir: 'can',
            concurrency: 2,
            pageSize: 3,
            maxHistoryEvents: 40,
            defaultModel: 'flux-dev',
          },
        ] as [BatchWorkflowInput],
      });
      const canProgress = await can.result();
      if (canProgress.counts.succeeded !== 8 || canProgress.runs < 2) {
        throw new Error(`continue-as-new batch: ${JSON.stringify(canProgress)}`);
      }
      let runId: string | undefined = can.firstExecutionRunId;
      for (let run = 1; runId; run++) {
        const history = await client.workflow.getHandle(can.workflowId, runId).fetchHistory();
        await save(`batch-continue-as-new-run${run}`, can, runId);
        runId = history.events?.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
      }

      // A creation that never ends (the simulator's clock stopped): the row ends unknown at its maximum wait.
      frozenAt = Date.now();
      const waited = await client.workflow.start(promptWorkflow, {
        ...row('max-wait', 'a glacier under the northern lights'),
        args: [{ ...row('max-wait', 'a glacier under the northern lights').args[0], maxPollWaitMs: 3_000 }],
      });
      const waitedResult = await waited.result();
      frozenAt = undefined;
      if (waitedResult.state !== 'unknown' || !/maximum wait/.test(waitedResult.error ?? '')) {
        throw new Error(`max-wait row: ${JSON.stringify(waitedResult)}`);
      }
      await save('prompt-max-wait', waited);

      // A row terminated by hand while its submission is held: the paused batch counts it, then is cancelled.
      const holdFile = path.join(outputRoot, 'hold.csv');
      const held = 'a lighthouse in a storm [held]';
      sim.scriptFor(held, [{ kind: FaultKind.Slow, delayMs: 120_000 }]);
      await writeFile(holdFile, `id,prompt\nheld,${held}\nnext,a harbour at dawn\nlast,a boat at dusk\n`);
      const holding = await client.workflow.start(batchWorkflow, {
        taskQueue: TASK_QUEUE,
        workflowId: batchWorkflowId('replay-terminated'),
        args: [
          { batchId: 'replay-terminated', file: holdFile, outDir: 'hold', concurrency: 1, defaultModel: 'flux-dev' },
        ] as [BatchWorkflowInput],
      });
      await waitFor(async () => (await holding.query(progressQuery)).started === 1);
      await holding.signal(pauseSignal, 'recording');
      await client.workflow.getHandle('replay-terminated/held').terminate('recording: terminated by hand');
      await waitFor(async () => (await holding.query(progressQuery)).counts.cancelled === 1);
      await holding.signal(cancelSignal);
      const holdProgress = await holding.result();
      if (holdProgress.status !== 'cancelled' || holdProgress.counts.not_run !== 2) {
        throw new Error(`terminated-row batch: ${JSON.stringify(holdProgress)}`);
      }
      await save('batch-terminated-row-cancelled', holding);

      // A row of an earlier run (carried across continue-as-new) terminated by hand: found by the periodic check.
      const carryFile = path.join(outputRoot, 'carry.csv');
      const carried = 'a lighthouse in a storm [carried]';
      sim.scriptFor(carried, [{ kind: FaultKind.Slow, delayMs: 120_000 }]);
      const others = Array.from({ length: 5 }, (_, i) => `o${i + 1},a meadow in summer number ${i + 1}`);
      await writeFile(carryFile, `id,prompt\ncarried,${carried}\n${others.join('\n')}\n`);
      const carrying = await client.workflow.start(batchWorkflow, {
        taskQueue: TASK_QUEUE,
        workflowId: batchWorkflowId('replay-carried'),
        args: [
          {
            batchId: 'replay-carried',
            file: carryFile,
            outDir: 'carry',
            concurrency: 2,
            pageSize: 1,
            maxHistoryEvents: 30,
            rowCheckEveryMs: 1_000,
            defaultModel: 'flux-dev',
          },
        ] as [BatchWorkflowInput],
      });
      await waitFor(async () => {
        const p = await carrying.query(progressQuery);
        return p.runs >= 2 && p.counts.succeeded === 5;
      });
      await client.workflow.getHandle('replay-carried/carried').terminate('recording: terminated by hand');
      const carryProgress = await carrying.result();
      if (carryProgress.counts.cancelled !== 1 || carryProgress.counts.succeeded !== 5) {
        throw new Error(`carried-row batch: ${JSON.stringify(carryProgress)}`);
      }
      // The last run: the one that asked after the carried row and counted it.
      const lastRun = (await carrying.describe()).runId;
      await save('batch-carried-row-terminated-last-run', carrying, lastRun);

      // A cancel after the last row started, while a row waits on a batch stop (402): the row ends cancelled with
      // its record, and the batch ends.
      sim.setWallet(DEMO_ACCOUNT_ID, 0);
      const blockFile = path.join(outputRoot, 'block.csv');
      await writeFile(blockFile, 'id,prompt\nblocked,a kite over a beach\n');
      const blocking = await client.workflow.start(batchWorkflow, {
        taskQueue: TASK_QUEUE,
        workflowId: batchWorkflowId('replay-cancel-blocked'),
        args: [{ batchId: 'replay-cancel-blocked', file: blockFile, outDir: 'block', defaultModel: 'flux-dev' }] as [
          BatchWorkflowInput,
        ],
      });
      await waitFor(async () => (await blocking.query(progressQuery)).status === 'paused');
      await blocking.signal(cancelSignal);
      const blockProgress = await blocking.result();
      sim.setWallet(DEMO_ACCOUNT_ID, 100);
      if (blockProgress.status !== 'cancelled' || blockProgress.counts.cancelled !== 1) {
        throw new Error(`cancelled blocked-row batch: ${JSON.stringify(blockProgress)}`);
      }
      await save('batch-cancel-blocked-row', blocking);
      await save('prompt-cancelled-while-blocked', client.workflow.getHandle('replay-cancel-blocked/blocked'));

      // Twelve rows at once against the account's 8 creations in flight: rows meet 429 ERR_QUOTA_EXCEEDED, and each
      // row whose worker saw the quota bind as its key ended tells its batch so (patch `row-reports-limit`).
      const quotaFile = path.join(outputRoot, 'quota.csv');
      const quotaRows = Array.from({ length: 12 }, (_, i) => `q${i + 1},a lantern festival number ${i + 1}`);
      await writeFile(quotaFile, `id,prompt\n${quotaRows.join('\n')}\n`);
      const quota = await client.workflow.start(batchWorkflow, {
        taskQueue: TASK_QUEUE,
        workflowId: batchWorkflowId('replay-quota'),
        args: [
          { batchId: 'replay-quota', file: quotaFile, outDir: 'quota', concurrency: 12, defaultModel: 'flux-dev' },
        ] as [BatchWorkflowInput],
      });
      const quotaProgress = await quota.result();
      if (quotaProgress.counts.succeeded !== 12) throw new Error(`quota batch: ${JSON.stringify(quotaProgress)}`);
      const reporting = [];
      for (let i = 12; i >= 1; i--) {
        const handle = client.workflow.getHandle(`replay-quota/q${i}`);
        if (hasPatch(await handle.fetchHistory(), ROW_REPORTS_LIMIT)) reporting.push(handle);
      }
      if (!reporting[0]) throw new Error('quota batch: no row reported the limit that bound');
      await save('batch-quota-rows-report-limit', quota);
      await save('prompt-quota-reports-limit', reporting[0]);

      // A catalog whose price is stale: the batch reserves 0.01 an image, each creation is charged 0.04. Once one is,
      // the cap counts 0.04 (patch `prices-seen-count`): two rows fit under 0.10, and the batch pauses before the third.
      const staleFile = path.join(outputRoot, 'stale.csv');
      const staleRows = Array.from({ length: 4 }, (_, i) => `s${i + 1},a stale price number ${i + 1}`);
      await writeFile(staleFile, `id,prompt\n${staleRows.join('\n')}\n`);
      const stale = await client.workflow.start(batchWorkflow, {
        taskQueue: TASK_QUEUE,
        workflowId: batchWorkflowId('replay-stale-price'),
        args: [
          {
            batchId: 'replay-stale-price',
            file: staleFile,
            outDir: 'stale',
            concurrency: 1,
            spendCapUsd: 0.1,
            defaultModel: 'stale-price',
          },
        ] as [BatchWorkflowInput],
      });
      // The first charge above the price given trips the stop-loss (patch `stop-loss`): a resume goes on.
      await waitFor(async () => (await stale.query(progressQuery)).waiting?.kind === 'stop_loss');
      await stale.signal(resumeSignal);
      await waitFor(async () => {
        const p = await stale.query(progressQuery);
        return p.waiting?.kind === 'spend_cap' && p.inFlight === 0;
      });
      const staleHeld = await stale.query(progressQuery);
      if (staleHeld.counts.succeeded !== 2 || !staleHeld.pricesSeen?.length) {
        throw new Error(`stale-price batch: ${JSON.stringify(staleHeld)}`);
      }
      await stale.signal(cancelSignal);
      await stale.result();
      await save('batch-price-seen-cap', stale);

      await recordNotSent({ client, native, save, outputRoot });
      await recordAdaptiveWindow({ client, native, baseUrl: sim.baseUrl, save, outputRoot });
      await recordScheduledCapPaused({ client, taskQueue: TASK_QUEUE, outputRoot, save });
      await recordScheduledBudget({ client, taskQueue: TASK_QUEUE, outputRoot, save });
      await recordKeyNotHonoured({ client, native, outputRoot, save });
      await recordDeclaredPrice({ client, native, outputRoot, save });
    });

    await mkdir(HISTORIES_DIR, { recursive: true });
    for (const old of await readdir(HISTORIES_DIR)) {
      if (old.endsWith('.json')) await rm(path.join(HISTORIES_DIR, old));
    }
    const prettier = await resolveConfig(path.join(HISTORIES_DIR, 'x.json'));
    for (const [name, json] of histories) {
      const file = path.join(HISTORIES_DIR, `${name}.json`);
      await writeFile(file, await format(json, { ...prettier, parser: 'json' }));
      console.log(`recorded ${path.relative(process.cwd(), file)}`);
    }
  } finally {
    await connection.close();
    await native.close();
    await sim.close();
    await server.stop();
    await rm(outputRoot, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
