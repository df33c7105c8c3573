import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCHEDULED_RUN_CANNOT_START } from '../../src/model';
import { ConfigError, loadServiceConfig } from '../../src/config/service-config';
import { activitiesFor, runActivity, tempDir } from './helpers';

/**
 * A schedule's local source is read by the worker only in the schedule's own output folder or a folder of
 * IMAGEBATCH_SCHEDULE_SOURCES, never when it is (links resolved) a secret setting's file; a file that fails its
 * check never puts a key-like cell into the run's failure reason.
 */
const KEY = 'Zx9kQ2mB7vT4pL8wR3nY6cH1';
let dir: string;
let cleanup: () => Promise<void>;
let keyFile: string;
beforeAll(async () => {
  ({ dir, cleanup } = await tempDir());
  await mkdir(path.join(dir, 'out'), { recursive: true });
  await mkdir(path.join(dir, 'sources'), { recursive: true });
  keyFile = path.join(dir, 'sources', 'api-key');
  await writeFile(keyFile, `${KEY}\n`);
});
afterAll(async () => cleanup());

let runs = 0;
const prepare = (source: string, scheduleSources: string[] = []) => {
  const { activities } = activitiesFor(
    'http://127.0.0.1:9/v1',
    { scheduleSources },
    { outputRoot: dir, secretFiles: [keyFile] },
  );
  runs += 1;
  return runActivity(() =>
    activities.prepareScheduledRun({
      source,
      outDir: path.join(dir, 'out'),
      batchId: `run-${runs}`,
      skipSucceeded: false,
      defaultModel: 'flux-dev',
      check: { defaultModel: 'flux-dev' },
    }),
  );
};

describe("a schedule's local source", () => {
  it('outside its own folder and the allowed ones is refused, unread', async () => {
    const file = path.join(dir, 'elsewhere.csv');
    await writeFile(file, `id,${KEY}\na,a red kite\n`);
    const { failure } = await prepare(file);
    expect(failure).toMatchObject({ type: SCHEDULED_RUN_CANNOT_START, nonRetryable: true });
    expect(failure!.message).toContain(`the batch source ${file} is refused: a schedule reads files only in`);
    expect(failure!.message).toContain('IMAGEBATCH_SCHEDULE_SOURCES');
    expect(failure!.message).not.toContain(KEY);
  });

  it('is read in the schedule folder, and in a folder of IMAGEBATCH_SCHEDULE_SOURCES', async () => {
    const own = path.join(dir, 'out', 'prompts.csv');
    await writeFile(own, 'id,prompt\na,a red kite\n');
    expect((await prepare(own)).value).toMatchObject({ rows: 1 });
    const shared = path.join(dir, 'sources', 'prompts.csv');
    await writeFile(shared, 'id,prompt\na,a red kite\nb,a blue tram\n');
    expect((await prepare(shared, [path.join(dir, 'sources')])).value).toMatchObject({ rows: 2 });
  });

  it("is refused when it is a secret setting's file, also through a link in an allowed folder", async () => {
    const link = path.join(dir, 'out', 'innocent.csv');
    await symlink(keyFile, link);
    for (const source of [keyFile, link]) {
      const { failure } = await prepare(source, [path.join(dir, 'sources')]);
      expect(failure).toMatchObject({ type: SCHEDULED_RUN_CANNOT_START, nonRetryable: true });
      expect(failure!.message).toBe(`the batch source ${source} is refused: it is the file of a secret setting`);
    }
  });

  it('with a key-like column name fails without the key in its reason', async () => {
    const file = path.join(dir, 'out', 'keyed.csv');
    await writeFile(file, `${KEY}\n`);
    const { failure } = await prepare(file);
    expect(failure).toMatchObject({ type: SCHEDULED_RUN_CANNOT_START, nonRetryable: true });
    expect(failure!.message).toContain('unknown column <a value of 24 characters, not shown>');
    expect(failure!.message).not.toContain(KEY);
  });

  it('IMAGEBATCH_SCHEDULE_SOURCES takes absolute folders only', () => {
    expect(loadServiceConfig({ IMAGEBATCH_SCHEDULE_SOURCES: '/srv/a, /srv/b' }).scheduleSources).toEqual([
      '/srv/a',
      '/srv/b',
    ]);
    expect(() => loadServiceConfig({ IMAGEBATCH_SCHEDULE_SOURCES: 'prompts' })).toThrow(ConfigError);
  });
});
