import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { describeLedgerLocation, ledgerLocation, openLedgerStore, LedgerSettingError } from '../../src/ledger';
import { storeContract } from './store-contract';

storeContract('SQLite', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ib-store-'));
  return openLedgerStore({ kind: 'sqlite', file: path.join(dir, 'ledger.sqlite') });
});

describe('IMAGEBATCH_LEDGER', () => {
  it('defaults to one file in the user data folder, whatever the home of local mode', () => {
    const env = { HOME: '/home/u', IMAGEBATCH_HOME: '/elsewhere' };
    expect(ledgerLocation(env, 'linux')).toEqual({
      kind: 'sqlite',
      file: '/home/u/.local/share/imagebatch/ledger.sqlite',
    });
    expect(ledgerLocation({ ...env, XDG_DATA_HOME: '/data' }, 'linux')).toEqual({
      kind: 'sqlite',
      file: '/data/imagebatch/ledger.sqlite',
    });
  });

  it('takes an absolute file or a postgres URL, and names what is wrong with anything else', () => {
    expect(ledgerLocation({ IMAGEBATCH_LEDGER: '/var/lib/ib.sqlite' })).toEqual({
      kind: 'sqlite',
      file: '/var/lib/ib.sqlite',
    });
    expect(ledgerLocation({ IMAGEBATCH_LEDGER: 'postgres://u:p@db:5432/ledger' })).toEqual({
      kind: 'postgres',
      url: 'postgres://u:p@db:5432/ledger',
    });
    expect(() => ledgerLocation({ IMAGEBATCH_LEDGER: 'out/ledger.sqlite' })).toThrow(LedgerSettingError);
    expect(() => ledgerLocation({ IMAGEBATCH_LEDGER: 'out/ledger.sqlite' })).toThrow(
      /IMAGEBATCH_LEDGER: must be an absolute path/,
    );
    expect(() => ledgerLocation({ IMAGEBATCH_LEDGER: 'mysql://h/db' })).toThrow(
      /postgres:\/\/ URL or the absolute path/,
    );
  });

  it('takes the password of a postgres URL from IMAGEBATCH_LEDGER_PASSWORD_FILE, and names a file it cannot read', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'ib-pw-'));
    const file = path.join(dir, 'password');
    await writeFile(file, 's3cret/with:chars\n');
    const env = { IMAGEBATCH_LEDGER: 'postgres://ib@db:5432/ledger', IMAGEBATCH_LEDGER_PASSWORD_FILE: file };
    const at = ledgerLocation(env);
    expect(at.kind === 'postgres' && decodeURIComponent(new URL(at.url).password)).toBe('s3cret/with:chars');
    expect(describeLedgerLocation(at)).toBe('postgres://ib:***@db:5432/ledger');
    expect(() => ledgerLocation({ ...env, IMAGEBATCH_LEDGER_PASSWORD_FILE: path.join(dir, 'none') })).toThrow(
      'IMAGEBATCH_LEDGER: its password file (IMAGEBATCH_LEDGER_PASSWORD_FILE) cannot be read: ENOENT',
    );
  });

  it('says where a store it cannot open is, without a password', async () => {
    const err = await openLedgerStore({ kind: 'postgres', url: 'postgres://u:secret@127.0.0.1:1/ledger' }).catch(
      (e: unknown) => e,
    );
    expect(String(err)).toMatch(/ledger store postgres:\/\/u:\*\*\*@127\.0\.0\.1:1\/ledger/);
    expect(String(err)).not.toContain('secret');
  });
});
