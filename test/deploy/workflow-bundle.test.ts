import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type * as SrcCodec from '../../src/codec';
import * as srcWorker from '../../src/worker';
import { ensureDistIsFresh, REPO_ROOT } from '../helpers/dist';

/**
 * The workflow bundles `npm run build` makes (scripts/bundle-workflows.mjs): the built worker loads the one of its
 * data converter instead of running webpack at start, and they hold the workflow code that the tests run.
 */
const dist = path.join(REPO_ROOT, 'dist');
const load = createRequire(path.join(REPO_ROOT, 'package.json'));
let built: typeof srcWorker;
let builtCodec: typeof SrcCodec;

beforeAll(async () => {
  await ensureDistIsFresh();
  built = load('./dist/worker.js') as typeof srcWorker;
  builtCodec = load('./dist/codec/index.js') as typeof SrcCodec;
});

const tmp = mkdtempSync(path.join(os.tmpdir(), 'imagebatch-bundle-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('the prebuilt workflow bundles', () => {
  it('a worker started from dist/ loads the bundle of its data converter; from src/ it bundles at start', () => {
    expect(built.bundlesAreFresh(dist)).toBe(true);
    expect(built.prebuiltWorkflowBundle()).toEqual({ codePath: path.join(dist, 'workflow-bundle.js') });
    const codec = builtCodec.payloadCodecFromEnv({ IMAGEBATCH_PAYLOAD_KEY: Buffer.alloc(32, 7).toString('base64') });
    expect(built.prebuiltWorkflowBundle(builtCodec.workerDataConverter(codec!))).toEqual({
      codePath: path.join(dist, 'workflow-bundle-encrypted.js'),
    });
    // A converter no bundle was made for.
    expect(built.prebuiltWorkflowBundle({ payloadConverterPath: path.join(dist, 'x') })).toBeUndefined();
    expect(srcWorker.prebuiltWorkflowBundle()).toBeUndefined();
  });

  it('each bundle holds the failure converter of its data converter', () => {
    const modules = (file: string) => readFileSync(path.join(dist, file), 'utf8');
    const failureConverter = '"./dist/codec/failure-converter.js"';
    expect(modules('workflow-bundle-encrypted.js')).toContain(failureConverter);
    expect(modules('workflow-bundle.js')).not.toContain(failureConverter);
    // Nor any path of the folder it was built in (the artefact's must be the same bytes).
    expect(modules('workflow-bundle.js')).not.toContain(REPO_ROOT);
  });

  it('the bundle replays every recorded history (test/replay) without nondeterminism', async () => {
    const dir = path.join(REPO_ROOT, 'test', 'replay', 'histories');
    const histories = readdirSync(dir)
      .filter((f) => f.endsWith('.json'))
      .map((f) => {
        const json = JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as Record<string, unknown>;
        const history = temporal.api.history.v1.History.fromObject(json);
        return { workflowId: history.events[0]!.workflowExecutionStartedEventAttributes!.workflowId!, history };
      });
    const errors: string[] = [];
    const codePath = path.join(dist, 'workflow-bundle.js');
    for await (const r of Worker.runReplayHistories({ workflowBundle: { codePath } }, histories)) {
      if (r.error) errors.push(`${r.workflowId}: ${String(r.error)}`);
    }
    expect(histories.length).toBeGreaterThan(0);
    expect(errors).toEqual([]);
  });

  it('bundles of an older build are not used: the manifest holds the hash of each file they were made from', () => {
    const input = path.join(tmp, 'workflows', 'index.js');
    expect(srcWorker.bundlesAreFresh(tmp)).toBe(false); // no manifest
    mkdirSync(path.dirname(input), { recursive: true });
    writeFileSync(input, 'exports.a = 1;\n');
    const manifest = srcWorker.bundleManifest(tmp, [input, path.join(REPO_ROOT, 'node_modules', 'x.js')]);
    expect(Object.keys(manifest.inputs)).toEqual(['workflows/index.js']);
    writeFileSync(path.join(tmp, srcWorker.BUNDLE_MANIFEST), JSON.stringify(manifest));
    expect(srcWorker.bundlesAreFresh(tmp)).toBe(true);
    writeFileSync(input, 'exports.a = 2;\n');
    expect(srcWorker.bundlesAreFresh(tmp)).toBe(false);
  });
});
