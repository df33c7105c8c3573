import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchFileChangedError, startOrAttachBatch } from '../../src/cli/batches';
import { fileFingerprint, type BatchEvent, type LedgerStore } from '../../src/ledger';
import { defaultLedger } from '../helpers/ledger';
import { DevServer } from '../../src/temporal/dev-server';
import { devServerBase } from '../../src/local/dev-server-base';
import { batchWorkflow } from '../../src/workflows';
import { batchWorkflowId } from '../../src/model';
import { baseEnv, cli, describeRun, ensureDistIsFresh } from './helpers';

/**
 * A batch is what it asks: `run` with the same id and another file or other options is refused (exit 3, nothing
 * started) whether the old content is in Temporal (the batch workflow's memo) or only in the ledger store (Temporal
 * reset, or past its retention); the same content again attaches as before. Without `--batch-id`, other content
 * under a file's name is a batch of its own. No worker runs: the batches started here just wait on their task queue.
 */

let dir: string;
let server: DevServer;
let connection: Connection;
let client: Client;
/** This file's default store: the one the commands it runs use. */
let store: LedgerStore;

beforeAll(async () => {
  store = await defaultLedger();
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-identity-'));
  server = await DevServer.start({ ...devServerBase(), uiPort: false });
  connection = await Connection.connect({ address: server.address });
  client = new Client({ connection });
});

afterAll(async () => {
  await connection?.close();
  await server?.stop();
  await store?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const TASK_QUEUE = 'imagebatch-identity';
const env = (address = server.address) => ({
  env: baseEnv({ TEMPORAL_ADDRESS: address, TEMPORAL_TASK_QUEUE: TASK_QUEUE }),
});

const ORIGINAL = 'id,prompt\nr1,a lighthouse at dusk\nr2,a fox in the snow\n';
const CHANGED = 'id,prompt\nr1,a lighthouse at dawn\nr2,a fox in the snow\nr3,a tram in the rain\n';

const batchEvents = (_out: string, batchId: string): Promise<BatchEvent[]> => store.batches(batchId);

/** `run FILE --batch-id ID --out OUT`, no --follow: starts (or attaches) and returns. */
function run(file: string, batchId: string, out: string, address?: string, model = 'flux-dev') {
  const args = ['run', file, '--batch-id', batchId, '--out', out, '--model', model];
  return cli(args, env(address)).then((r) => ({ r, what: describeRun(args, r) }));
}

const short = (fp: { size: number; sha256: string }) => [String(fp.size), fp.sha256.slice(0, 12)];

describe('run: a batch id is bound to its file', { timeout: 120_000 }, () => {
  it('records the file in the store, attaches with the same file, refuses a changed one (exit 3, both fingerprints)', async () => {
    const file = path.join(dir, 'prompts.csv');
    const out = path.join(dir, 'out-memo');
    await writeFile(file, ORIGINAL);
    const original = await fileFingerprint(file);

    const first = await run(file, 'same-id', out);
    expect(first.r.code, first.what).toBe(0);
    expect(first.r.stderr).toContain('started batch same-id (2 rows)');
    const events = await batchEvents(out, 'same-id');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ file, fingerprint: original, defaultModel: 'flux-dev' });
    const memo = (await client.workflow.getHandle(batchWorkflowId('same-id')).describe()).memo;
    expect(memo).toMatchObject({ fingerprint: original });

    // The same file again: attached, as before, and no second batch event for the same fingerprint.
    const again = await run(file, 'same-id', out);
    expect(again.r.code, again.what).toBe(0);
    expect(again.r.stderr).toContain('attached to batch same-id');
    expect(await batchEvents(out, 'same-id')).toHaveLength(1);

    // A changed file under the same id, with another output folder: Temporal's memo refuses it.
    await writeFile(file, CHANGED);
    const changed = await fileFingerprint(file);
    const refused = await run(file, 'same-id', path.join(dir, 'out-elsewhere'));
    expect(refused.r.code, refused.what).toBe(3);
    const line = refused.r.stderr.trim();
    expect(line.split('\n')).toHaveLength(1);
    for (const part of [...short(original), ...short(changed), 'same-id', '--batch-id']) expect(line).toContain(part);
    expect(refused.r.stderr).not.toContain('attached');

    // And with the batch's own folder: still refused, and the store records nothing for the changed file.
    const refusedToo = await run(file, 'same-id', out);
    expect(refusedToo.r.code, refusedToo.what).toBe(3);
    expect(await batchEvents(out, 'same-id')).toHaveLength(1);
  });

  it('refuses a changed file when only the store knows the batch (Temporal reset)', async () => {
    const file = path.join(dir, 'ledger-only.csv');
    const out = path.join(dir, 'out-ledger');
    await writeFile(file, ORIGINAL);
    const original = await fileFingerprint(file);
    await store.append([
      { type: 'batch', batchId: 'ledger-only', file, fingerprint: original, outDir: out, defaultModel: 'flux-dev' },
    ]);
    await writeFile(file, CHANGED);
    const changed = await fileFingerprint(file);

    const refused = await run(file, 'ledger-only', out);
    expect(refused.r.code, refused.what).toBe(3);
    for (const part of [...short(original), ...short(changed), 'ledger-only', '--batch-id', store.location]) {
      expect(refused.r.stderr).toContain(part);
    }
    // Nothing was started.
    await expect(client.workflow.getHandle(batchWorkflowId('ledger-only')).describe()).rejects.toThrow();

    // Restored, it starts.
    await writeFile(file, ORIGINAL);
    const restored = await run(file, 'ledger-only', out);
    expect(restored.r.code, restored.what).toBe(0);
    expect(restored.r.stderr).toContain('started batch ledger-only');
    expect(await batchEvents(out, 'ledger-only')).toHaveLength(1);
  });

  it('a fresh Temporal server with the store the first run wrote: a changed file is refused, the same one starts', async () => {
    const file = path.join(dir, 'reset.csv');
    const out = path.join(dir, 'out-reset');
    await writeFile(file, ORIGINAL);
    const first = await run(file, 'reset-id', out);
    expect(first.r.code, first.what).toBe(0);

    const fresh = await DevServer.start({ ...devServerBase(), uiPort: false });
    try {
      await writeFile(file, CHANGED);
      const refused = await run(file, 'reset-id', out, fresh.address);
      expect(refused.r.code, refused.what).toBe(3);
      expect(refused.r.stderr).toContain('reset-id');
      await writeFile(file, ORIGINAL);
      const same = await run(file, 'reset-id', out, fresh.address);
      expect(same.r.code, same.what).toBe(0);
      expect(same.r.stderr).toContain('started batch reset-id');
    } finally {
      await fresh.stop();
    }
  });

  it('startOrAttachBatch throws a BatchFileChangedError saying what differs and where the old content was', async () => {
    const file = path.join(dir, 'unit.csv');
    const out = path.join(dir, 'out-unit');
    await writeFile(file, ORIGINAL);
    const original = await fileFingerprint(file);
    const base = {
      client,
      ledger: store,
      taskQueue: TASK_QUEUE,
      batchId: 'unit-id',
      file,
      outDir: out,
      defaultModel: 'flux-dev',
    };
    await startOrAttachBatch(base);
    await writeFile(file, CHANGED);
    const err = await startOrAttachBatch(base).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BatchFileChangedError);
    const changed = err as BatchFileChangedError;
    expect(changed.code).toBe('BATCH_FILE_CHANGED');
    expect(changed.batchId).toBe('unit-id');
    for (const part of [...short(original), ...short(await fileFingerprint(file))]) {
      expect(changed.difference).toContain(part);
    }
    expect(changed.recordedIn).toContain('Temporal');
    // The same file with another model: the store refuses it, naming both.
    await writeFile(file, ORIGINAL);
    const model = await startOrAttachBatch({ ...base, defaultModel: 'flux-schnell' }).catch((e: unknown) => e);
    expect(model).toBeInstanceOf(BatchFileChangedError);
    expect((model as BatchFileChangedError).difference).toBe(
      'it asked --model flux-dev, and this asks --model flux-schnell',
    );
    expect((model as BatchFileChangedError).recordedIn).toContain(store.location);
  });

  it('the same id with another --model is refused (exit 3), and nothing of the batch is relabelled', async () => {
    const file = path.join(dir, 'models.csv');
    const out = path.join(dir, 'out-models');
    await writeFile(file, ORIGINAL);
    const first = await run(file, 'models-id', out);
    expect(first.r.code, first.what).toBe(0);
    const other = await run(file, 'models-id', out, undefined, 'flux-schnell');
    expect(other.r.code, other.what).toBe(3);
    expect(other.r.stderr).toContain('it asked --model flux-dev, and this asks --model flux-schnell');
    expect(await batchEvents(out, 'models-id')).toMatchObject([{ defaultModel: 'flux-dev' }]);
  });

  it('without --batch-id, another --model or an edited file under a file name is a batch of its own, in its own folder', async () => {
    const work = await mkdtemp(path.join(dir, 'named-'));
    const file = path.join(work, 'prompts.csv');
    await writeFile(file, ORIGINAL);
    const go = async (model: string) => {
      const args = ['run', file, '--model', model, '--json'];
      const r = await cli(args, { ...env(), cwd: work });
      expect(r.code, describeRun(args, r)).toBe(0);
      return { r, batchId: (JSON.parse(r.stdout) as { batchId: string }).batchId };
    };
    const a = await go('flux-dev');
    expect(a.batchId).toBe('prompts');
    expect(await store.batches('prompts')).toMatchObject([{ outDir: path.join(work, 'out', 'prompts') }]);
    // The same content again: the same batch.
    expect((await go('flux-dev')).batchId).toBe('prompts');
    const b = await go('flux-schnell');
    expect(b.batchId).toMatch(/^prompts-[0-9a-f]{8}$/);
    expect(b.r.stderr).toContain(`this one is batch ${b.batchId}`);
    expect(await store.batches(b.batchId)).toMatchObject([
      { defaultModel: 'flux-schnell', outDir: path.join(work, 'out', b.batchId) },
    ]);
    expect(await store.batches('prompts')).toMatchObject([{ defaultModel: 'flux-dev' }]);
    // And again with that model: the same second batch.
    expect((await go('flux-schnell')).batchId).toBe(b.batchId);
  });

  it('a batch started before fingerprints (a memo without one, no ledger) is not compared', async () => {
    const file = path.join(dir, 'old.csv');
    const out = path.join(dir, 'out-old');
    await writeFile(file, CHANGED);
    await client.workflow.start(batchWorkflow, {
      workflowId: batchWorkflowId('old-id'),
      taskQueue: TASK_QUEUE,
      args: [{ batchId: 'old-id', file, outDir: out, concurrency: 2, maxAttempts: 1 }],
      memo: { batchId: 'old-id', file, outDir: out, defaultModel: '' },
    });
    const attached = await run(file, 'old-id', out);
    expect(attached.r.code, attached.what).toBe(0);
    expect(attached.r.stderr).toContain('attached to batch old-id');
  });

  it('an output folder the CLI cannot write is no error: the batch starts all the same', async () => {
    const file = path.join(dir, 'ro.csv');
    await writeFile(file, ORIGINAL);
    const blocker = path.join(dir, 'not-a-folder');
    await writeFile(blocker, 'a file where the output folder would be');
    const started = await run(file, 'ro-id', path.join(blocker, 'out'));
    expect(started.r.code, started.what).toBe(0);
    expect(started.r.stderr).toContain('started batch ro-id');
  });
});
