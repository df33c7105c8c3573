import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { validate } from '../../src/cli/commands/validate';
import { keyAtHand } from '../../src/cli/direct-catalog';
import { loadApiKey } from '../../src/config/api-key';

/**
 * `validate` against the account's catalog when the key is at hand (read in the command's own process): a model the
 * account lacks fails the file; a catalog whose list gave no id (the service names its models under another field)
 * refuses nothing and says the models were not checked.
 */
async function file(): Promise<string> {
  const at = path.join(await mkdtemp(path.join(os.tmpdir(), 'imagebatch-validate-catalog-')), 'prompts.csv');
  await writeFile(at, 'prompt\na red fox\nan owl\n');
  return at;
}

describe('validate with a key at hand', () => {
  it('a model the account lacks fails the file and names the account list', async () => {
    const res = await validate({
      file: await file(),
      defaultModel: 'flux-pro',
      catalog: { read: () => Promise.resolve({ models: [{ id: 'flux-dev' }] }), implicit: true },
    });
    expect(res.ok).toBe(false);
    expect(res.accountModels).toEqual(['flux-dev']);
  });

  it('a list with no id read: the file is fine, the models not checked, and why', async () => {
    const res = await validate({
      file: await file(),
      defaultModel: 'flux-pro',
      catalog: { read: () => Promise.resolve({ models: [] }), implicit: true },
    });
    expect(res.ok).toBe(true);
    expect(res.catalogProblem).toMatch(/no model id where the settings read them \(IMAGEGEN_MODEL_ID_FIELDS/);
  });
});

describe('whether a key is at hand', () => {
  const local = { IMAGEBATCH_LOCAL: 'on' };

  it('is what the worker reads as set: IMAGEGEN_API_KEY, or a file named in IMAGEGEN_API_KEY_FILE', () => {
    expect(keyAtHand({ ...local })).toBe(false);
    expect(keyAtHand({ ...local, IMAGEGEN_API_KEY: '', IMAGEGEN_API_KEY_FILE: '  ' })).toBe(false);
    expect(keyAtHand({ ...local, IMAGEGEN_API_KEY_FILE: '/run/secrets/key' })).toBe(true);
    // A key of blanks is a key the worker refuses for its whitespace, not a missing one: validate says so too.
    expect(keyAtHand({ ...local, IMAGEGEN_API_KEY: ' ' })).toBe(true);
    expect(() => loadApiKey({ IMAGEGEN_API_KEY: ' ' })).toThrow(/contains whitespace/);
  });
});
