import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_NAMES, SETTING_NAMES } from '../../src/config/known-settings';

/**
 * The worker and every command refuse an `IMAGEGEN_*` or `IMAGEBATCH_*` variable they do not know
 * (src/config/known-settings.ts), so the registry must not fall behind: every such name that the repository's code,
 * tests, scripts, docs, Compose file and CI name is in it.
 */
const ROOT = path.join(__dirname, '..', '..');

/** The tests of the refusal itself: their names are misspelt on purpose. */
const MISSPELT_ON_PURPOSE = ['test/config/known-settings.test.ts', 'test/cli/unknown-settings.test.ts'];

const NAME = /\b(?:IMAGEGEN|IMAGEBATCH)_[A-Z0-9_]+/g;
/** A constant of the code named like a variable (`IMAGEBATCH_LEDGER_ENV`), which is not one. */
const DECLARED = /\b(?:const|let|var|function|class|enum|type|interface)\s+((?:IMAGEGEN|IMAGEBATCH)_[A-Z0-9_]+)/g;

/** The text of each file git has or would add (tracked, or new and not ignored), binary files left out. */
function repositoryTexts(): Map<string, string> {
  const res = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: ROOT,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  expect(res.error).toBeUndefined();
  const texts = new Map<string, string>();
  for (const file of res.stdout.split('\0')) {
    if (file === '' || MISSPELT_ON_PURPOSE.includes(file)) continue;
    let text: string;
    try {
      text = readFileSync(path.join(ROOT, file), 'utf8');
    } catch {
      continue; // deleted from the work tree, not yet from the index
    }
    if (!text.includes('\0')) texts.set(file, text);
  }
  return texts;
}

describe('the names of settings', () => {
  it('every IMAGEGEN_* and IMAGEBATCH_* name the repository holds is one imagebatch knows', () => {
    const texts = repositoryTexts();
    expect(texts.size).toBeGreaterThan(300);
    const declared = new Set([...texts.values()].flatMap((text) => [...text.matchAll(DECLARED)].map((m) => m[1])));
    const known = new Set([...SETTING_NAMES, ...PROJECT_NAMES, ...declared]);
    const unknown = new Map<string, string>();
    for (const [file, text] of texts) {
      for (const [name] of text.matchAll(NAME)) if (!known.has(name) && !unknown.has(name)) unknown.set(name, file);
    }
    // Add one to the table that reads it (SERVICE_CONFIG_ENV and the like), or to the lists of known-settings.ts.
    expect([...unknown].map(([name, file]) => `${name} (${file})`)).toEqual([]);
  });
});
