import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { estimateOf, parsePriceOption, priceModels, readPriceFile, userPrices } from '../../src/cli/prices';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'imagebatch-prices-cli-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('prices the user gives', () => {
  it('--price <model>=<usd>, repeatable; a model name may hold "="', () => {
    expect(parsePriceOption('sdxl=0.02', parsePriceOption('a=b=0.5'))).toEqual({ 'a=b': 0.5, sdxl: 0.02 });
    expect(() => parsePriceOption('=0.02')).toThrow(/expected <model>=<usd per image>/);
    expect(() => parsePriceOption('sdxl=-1')).toThrow(/the price of sdxl must be a decimal number of USD/);
  });

  it('a price file: JSON, or lines model,usd with an optional header; a bad line is named with its number', async () => {
    const json = path.join(dir, 'p.json');
    await writeFile(json, '{ "sdxl": 0.02, "flux-dev": 0.04 }');
    expect(await readPriceFile(json)).toEqual({ sdxl: 0.02, 'flux-dev': 0.04 });
    const csv = path.join(dir, 'p.csv');
    await writeFile(csv, 'model,price_usd\nsdxl,0.02\n\nflux-dev, 0.04\n');
    expect(await readPriceFile(csv)).toEqual({ sdxl: 0.02, 'flux-dev': 0.04 });
    const bad = path.join(dir, 'bad.csv');
    await writeFile(bad, 'sdxl,0.02\nflux-dev,free\n');
    await expect(readPriceFile(bad)).rejects.toThrow(`--prices: ${bad}:2: expected <model>,<usd per image>`);
    const badJson = path.join(dir, 'bad.json');
    await writeFile(badJson, '{ "sdxl": "0.02" }');
    await expect(readPriceFile(badJson)).rejects.toThrow(/the price of sdxl must be a number of USD/);
    // --price wins over the file for a model both name.
    expect(await userPrices({ prices: json, price: { sdxl: 0.03 } })).toEqual({ sdxl: 0.03, 'flux-dev': 0.04 });
  });

  it("a model is priced as a batch prices it: the catalog's first, then the user's, else unknown", () => {
    const models = {
      sdxl: { rows: 2, images: 3 },
      'flux-dev': { rows: 1, images: 1 },
      mystery: { rows: 1, images: 2 },
    };
    const priced = priceModels(models, [{ id: 'sdxl', priceUsd: 0.02 }, { id: 'flux-dev' }], {
      sdxl: 0.5,
      'flux-dev': 0.04,
    });
    expect(priced).toEqual([
      { model: 'sdxl', rows: 2, images: 3, available: true, priceUsd: 0.02, source: 'catalog' },
      { model: 'flux-dev', rows: 1, images: 1, available: true, priceUsd: 0.04, source: 'user' },
      { model: 'mystery', rows: 1, images: 2, available: false },
    ]);
    expect(estimateOf(priced)).toEqual({ knownUsd: 0.1, unknownModels: ['mystery'] });
  });
});
