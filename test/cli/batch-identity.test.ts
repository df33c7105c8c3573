import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchFileChangedError, startOrAttachBatch } from '../../src/cli/batches';
import { appendLedger, fileFingerprint, ledgerFileOf, type BatchEvent } from '../../src/ledger';
import { DevServer } from '../../src/temporal/dev-server';
import { batchWorkflow } from '../../src/workflows';
import { batchWorkflowId } from '../../src/model';
import { baseEnv, cli, describeRun, ensureDistIsFresh } from './helpers';

/**
 * A batch id is bound to its file: `run` with the same id and a different file is refused (exit 3, nothing
 * started) whether the old fingerprint is in Temporal (the batch workflow's memo) or only in the output folder's
 * ledger (Temporal reset, or past its retention); the same file again attaches as before. No worker runs: the
 * batches started here just wait on their task queue.
 */

let dir: string;
let server: DevServer;
let connection: Connection;
let client: Client;

beforeAll(async () => {
  await ensureDistIsFresh();
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-identity-'));
  server = await DevServer.start({ uiPort: false });
  connection = await Connection.connect({ address: server.address });
  client = new Client({ connection });
});

afterAll(async () => {
  await connection?.close();
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const TASK_QUEUE = 'imagebatch-identity';
const env = (address = server.address) => ({
  env: baseEnv({ TEMPORAL_ADDRESS: address, TEMPORAL_TASK_QUEUE: TASK_QUEUE }),
});

const ORIGINAL = 'id,prompt\nr1,a lighthouse at dusk\nr2,a fox in the snow\n';
const CHANGED = 'id,prompt\nr1,a lighthouse at dawn\nr2,a fox in the snow\nr3,a tram in the rain\n';

async function batchEvents(out: string, batchId: string): Promise<BatchEvent[]> {
  const text = await readFile(ledgerFileOf(out), 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as BatchEvent)
    .filter((e) => e.type === 'batch' && e.batchId === batchId);
}

/** `run FILE --batch-id ID --out OUT`, no --follow: starts (or attaches) and returns. */
function run(file: string, batchId: string, out: string, address?: string) {
  const args = ['run', file, '--batch-id', batchId, '--out', out, '--model', 'flux-dev'];
  return cli(args, env(address)).then((r) => ({ r, what: describeRun(args, r) }));
}

const short = (fp: { size: number; sha256: string }) => [String(fp.size), fp.sha256.slice(0, 12)];

describe('run: a batch id is bound to its file', { timeout: 120_000 }, () => {
  it('records the file in the ledger, attaches with the same file, refuses a changed one (exit 3, both fingerprints)', async () => {
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

    // A changed file under the same id, with another output folder (no ledger there): Temporal's memo refuses it.
    await writeFile(file, CHANGED);
    const changed = await fileFingerprint(file);
    const refused = await run(file, 'same-id', path.join(dir, 'out-elsewhere'));
    expect(refused.r.code, refused.what).toBe(3);
    const line = refused.r.stderr.trim();
    expect(line.split('\n')).toHaveLength(1);
    for (const part of [...short(original), ...short(changed), 'same-id', '--batch-id']) expect(line).toContain(part);
    expect(refused.r.stderr).not.toContain('attached');

    // And with the batch's own folder: still refused, and the ledger records nothing for the changed file.
    const refusedToo = await run(file, 'same-id', out);
    expect(refusedToo.r.code, refusedToo.what).toBe(3);
    expect(await batchEvents(out, 'same-id')).toHaveLength(1);
  });

  it('refuses a changed file when only the ledger knows the batch (Temporal reset)', async () => {
    const file = path.join(dir, 'ledger-only.csv');
    const out = path.join(dir, 'out-ledger');
    await writeFile(file, ORIGINAL);
    const original = await fileFingerprint(file);
    await appendLedger(ledgerFileOf(out), [
      { type: 'batch', batchId: 'ledger-only', file, fingerprint: original, defaultModel: 'flux-dev' },
    ]);
    await writeFile(file, CHANGED);
    const changed = await fileFingerprint(file);

    const refused = await run(file, 'ledger-only', out);
    expect(refused.r.code, refused.what).toBe(3);
    for (const part of [...short(original), ...short(changed), 'ledger-only', '--batch-id', ledgerFileOf(out)]) {
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

  it('a fresh Temporal server with the ledger the first run wrote: a changed file is refused, the same one starts', async () => {
    const file = path.join(dir, 'reset.csv');
    const out = path.join(dir, 'out-reset');
    await writeFile(file, ORIGINAL);
    const first = await run(file, 'reset-id', out);
    expect(first.r.code, first.what).toBe(0);

    const fresh = await DevServer.start({ uiPort: false });
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

  it('startOrAttachBatch throws a BatchFileChangedError with both fingerprints and where the old one was', async () => {
    const file = path.join(dir, 'unit.csv');
    const out = path.join(dir, 'out-unit');
    await writeFile(file, ORIGINAL);
    const original = await fileFingerprint(file);
    const base = { client, taskQueue: TASK_QUEUE, batchId: 'unit-id', file, outDir: out, defaultModel: 'flux-dev' };
    await startOrAttachBatch(base);
    await writeFile(file, CHANGED);
    const err = await startOrAttachBatch(base).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BatchFileChangedError);
    const changed = err as BatchFileChangedError;
    expect(changed.code).toBe('BATCH_FILE_CHANGED');
    expect(changed.batchId).toBe('unit-id');
    expect(changed.recorded).toEqual(original);
    expect(changed.current).toEqual(await fileFingerprint(file));
    expect(changed.recordedIn).toContain('Temporal');
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
