import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { describeLedgerLocation } from '../../src/ledger';
import { inProcessCli } from '../cli/in-process';
import { closedPort } from '../helpers/closed-port';

/**
 * Issue 44 point 4: a PostgreSQL password given in the URL's query (`?password=`, which the driver reads) was printed
 * by `ledger show`, the worker's start and their errors: only the `user:pass@` form was masked.
 */

const cli = inProcessCli('ib-location-mask-');

describe('a ledger store location is printed without its password, wherever the URL carries it', () => {
  it('describeLedgerLocation masks password-like query keys and keeps the rest', () => {
    const url = 'postgres://u:pw1@db:5432/ledger?sslmode=require&password=hunter2&sslpassword=pw2&sslkey=/k/key.pem';
    expect(describeLedgerLocation({ kind: 'postgres', url })).toBe(
      'postgres://u:***@db:5432/ledger?sslmode=require&password=***&sslpassword=***&sslkey=***',
    );
    const plain = 'postgres://u@db:5432/ledger?sslmode=require&application_name=ib';
    expect(describeLedgerLocation({ kind: 'postgres', url: plain })).toBe(plain);
  });

  it('ledger show and the worker: neither their output nor their errors hold a ?password= value', async () => {
    const env = {
      HOME: cli.dir,
      XDG_CONFIG_HOME: path.join(cli.dir, 'config'),
      XDG_DATA_HOME: path.join(cli.dir, 'data'),
      IMAGEBATCH_LEDGER: `postgres://u@127.0.0.1:${await closedPort()}/db?password=hunter2`,
      IMAGEGEN_API_KEY: `ig_live_${'a'.repeat(40)}`,
      TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}`,
    };
    expect(await cli.run(env, 'ledger', 'show')).not.toBe(0);
    expect(await cli.run(env, 'worker')).not.toBe(0);
    const printed = [...cli.stdout, ...cli.stderr].join('');
    expect(printed.match(/the ledger store \S+/g)).toEqual([
      expect.stringContaining('?password=***'),
      expect.stringContaining('?password=***'),
    ]);
    expect(printed).not.toContain('hunter2');
  });
});
