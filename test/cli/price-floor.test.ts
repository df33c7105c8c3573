import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { checkDeclaredPrices, PriceBelowChargedError } from '../../src/cli/price-floor';
import { openLedgerStore } from '../../src/ledger';
import { inProcessCli } from './in-process';

/**
 * A price declared below what the ledger store saw the service charge for its model is refused (issue 43, point 3),
 * on every command that takes one: `resume --price`, `schedule create --prices`. Through the real entry, `main()`,
 * with Temporal's address on a closed port: the refusal comes before anything connects.
 */

const cli = inProcessCli('imagebatch-price-floor-');
let env: Record<string, string>;
let file: string;
/** When the store saw flux-dev charged 0.08 for 2 images (0.04 each). */
const CHARGED_AT = Date.UTC(2026, 10, 28, 9, 30);

beforeAll(async () => {
  const ledgerFile = path.join(cli.dir, 'ledger.sqlite');
  env = { TEMPORAL_ADDRESS: '127.0.0.1:1', IMAGEBATCH_LEDGER: ledgerFile };
  const store = await openLedgerStore({ kind: 'sqlite', file: ledgerFile });
  const ids = { batchId: 'b0', rowId: 'r7', idempotencyKey: 'ib/b0/r7/a1' };
  await store.decide(
    {
      ...ids,
      request: { prompt: 'a red kite', model: 'flux-dev', num_images: 2 },
      requestSha256: 'body',
      fingerprint: 'fp',
      outDir: '/out/b0',
      reuse: true,
    },
    CHARGED_AT,
  );
  await store.append([{ type: 'accepted', ...ids, creationId: 'c1', costUsd: 0.08 }]);
  await store.close();
  file = path.join(cli.dir, 'prompts.csv');
  await writeFile(file, 'id,prompt,model\na,a red kite,flux-dev\n');
});

/** The one line of the refusal, naming the charge, its date, batch and row, and the price to give. */
function expectRefused(code: number) {
  const printed = cli.stderr.join('');
  expect(code, printed).toBe(2);
  expect(printed.trimEnd().split('\n'), printed).toHaveLength(1);
  expect(printed).toMatch(/^imagebatch: --price: a price is below what the ledger store .*ledger\.sqlite saw/);
  expect(printed).toContain(
    'flux-dev at $0.01 per image, and the service charged $0.04 on 2026-11-28 (batch b0, row r7)',
  );
  expect(printed).toContain('give --price flux-dev=0.04 or more');
  expect(printed).not.toMatch(/connect|deadline/i);
}

describe('a declared price below a charge the store saw', () => {
  it('resume --price: exit 2 before the batch is asked anything', async () => {
    expectRefused(await cli.run(env, 'resume', 'b1', '--price', 'flux-dev=0.01'));
  });

  it('schedule create --prices: exit 2, no schedule created', async () => {
    const prices = path.join(cli.dir, 'prices.csv');
    await writeFile(prices, 'model,price_usd\nflux-dev,0.01\n');
    expectRefused(
      await cli.run(env, 'schedule', 'create', 'nightly', '--file', file, '--every', '1h', '--prices', prices),
    );
  });

  it('a price at the charge or above, or of a model never charged, passes', async () => {
    const store = await openLedgerStore({ kind: 'sqlite', file: env.IMAGEBATCH_LEDGER! });
    try {
      await expect(checkDeclaredPrices(store, { 'flux-dev': 0.04, sdxl: 0.001 })).resolves.toBeUndefined();
      await expect(checkDeclaredPrices(store, { 'flux-dev': 0.05 })).resolves.toBeUndefined();
      await expect(checkDeclaredPrices(store, { 'flux-dev': 0.039 })).rejects.toBeInstanceOf(PriceBelowChargedError);
    } finally {
      await store.close();
    }
  });
});
