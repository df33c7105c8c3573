import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localHome, localModeAllowed, localPaths } from '../../src/local/home';
import { stopLocal } from '../../src/local/local';
import { withLock } from '../../src/local/lock';
import { pidAlive, stopPid } from '../../src/local/processes';
import { differingSettings, settingsPrint } from '../../src/local/settings';
import { readState, writeState } from '../../src/local/state';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-local-state-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('local home', () => {
  it('is IMAGEBATCH_HOME, else imagebatch/local under the data folder of each platform (beside the ledger store)', () => {
    expect(localHome({ IMAGEBATCH_HOME: 'rel/home' })).toBe(path.resolve('rel/home'));
    expect(localHome({ HOME: '/h' }, 'linux')).toBe('/h/.local/share/imagebatch/local');
    expect(localHome({ HOME: '/h', XDG_DATA_HOME: '/data' }, 'linux')).toBe('/data/imagebatch/local');
    // The XDG spec ignores a relative XDG_DATA_HOME.
    expect(localHome({ HOME: '/h', XDG_DATA_HOME: 'data' }, 'linux')).toBe('/h/.local/share/imagebatch/local');
    expect(localHome({ HOME: '/h' }, 'darwin')).toBe('/h/Library/Application Support/imagebatch/local');
    expect(localHome({ HOME: '/h', LOCALAPPDATA: 'C:\\L' }, 'win32')).toBe(path.join('C:\\L', 'imagebatch', 'local'));
  });

  it('local mode is on unless IMAGEBATCH_LOCAL turns it off; another value is refused by name', () => {
    expect(localModeAllowed({})).toBe(true);
    expect(localModeAllowed({ IMAGEBATCH_LOCAL: ' ' })).toBe(true);
    expect(localModeAllowed({ IMAGEBATCH_LOCAL: 'off' })).toBe(false);
    expect(localModeAllowed({ IMAGEBATCH_LOCAL: '0' })).toBe(false);
    expect(() => localModeAllowed({ IMAGEBATCH_LOCAL: 'maybe' })).toThrow(/^IMAGEBATCH_LOCAL: must be on or off/);
  });
});

describe('worker settings print', () => {
  const env = { IMAGEGEN_API_KEY: 'img_live_first', IMAGEGEN_BASE_URL: 'http://127.0.0.1:1', PATH: '/bin' };

  it('names the variables that differ, set in one and not the other too, and holds no value', () => {
    const running = settingsPrint(env);
    expect(Object.keys(running.hashes)).toEqual(['IMAGEGEN_API_KEY', 'IMAGEGEN_BASE_URL']);
    expect(JSON.stringify(running)).not.toContain('img_live_first');
    expect(differingSettings(running, { ...env, PATH: '/usr/bin' })).toEqual([]);
    expect(differingSettings(running, { ...env, IMAGEGEN_API_KEY: 'img_live_other' })).toEqual(['IMAGEGEN_API_KEY']);
    expect(differingSettings(running, { IMAGEGEN_API_KEY: 'img_live_first', IMAGEBATCH_RATE_LIMIT: '5' })).toEqual([
      'IMAGEBATCH_RATE_LIMIT',
      'IMAGEGEN_BASE_URL',
    ]);
  });

  it('salts each print: the same settings hash differently in two homes', () => {
    expect(settingsPrint(env).hashes.IMAGEGEN_API_KEY).not.toBe(settingsPrint(env).hashes.IMAGEGEN_API_KEY);
  });
});

describe('state files', () => {
  it('a torn file reads as missing; a written one is whole', async () => {
    const file = path.join(dir, 'server.json');
    await writeFile(file, '{"pid": 12');
    expect(readState(file)).toBeUndefined();
    writeState(file, { pid: 12 });
    expect(readState(file)).toEqual({ pid: 12 });
  });
});

describe('home lock', () => {
  it('runs one holder at a time', async () => {
    const lock = path.join(dir, 'one-at-a-time.lock');
    let inside = 0;
    let most = 0;
    await Promise.all(
      Array.from({ length: 5 }, () =>
        withLock(lock, async () => {
          most = Math.max(most, ++inside);
          await sleep(20);
          inside--;
        }),
      ),
    );
    expect(most).toBe(1);
  });

  it("takes over the lock of a process that is gone (kill -9), and waits for a live one's", async () => {
    const lock = path.join(dir, 'stale.lock');
    const gone = spawn(process.execPath, ['-e', '']);
    await new Promise((resolve) => gone.once('exit', resolve));
    await writeFile(lock, `${gone.pid}\n`);
    expect(await withLock(lock, async () => readFile(lock, 'utf8'))).toBe(`${process.pid}\n`);

    const live = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)']);
    await writeFile(lock, `${live.pid}\n`);
    await expect(withLock(lock, async () => 'got it', 300)).rejects.toThrow(/held by process \d+/);
    await stopPid(live.pid!, 1_000);
    expect(pidAlive(live.pid!)).toBe(false);
    expect(await withLock(lock, async () => 'got it', 5_000)).toBe('got it');
  });
});

describe('local stop after a reboot', () => {
  it('never stops a process that merely has the recorded pid (a reboot reused it)', async () => {
    const paths = localPaths(path.join(dir, 'rebooted'));
    const stranger = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)']);
    try {
      const at = new Date(Date.now() - 3_600_000).toISOString();
      writeState(paths.serverState, {
        pid: stranger.pid,
        address: '127.0.0.1:1',
        port: 1,
        uiPort: 2,
        uiUrl: 'http://127.0.0.1:2',
        startedAt: at,
      });
      writeState(paths.workerState, {
        pid: stranger.pid,
        address: '127.0.0.1:1',
        startedAt: at,
        beatAt: at,
        settings: { salt: 's', hashes: {} },
      });
      expect(await stopLocal(paths)).toEqual({});
      expect(pidAlive(stranger.pid!)).toBe(true);
    } finally {
      stranger.kill('SIGKILL');
    }
  });
});
