import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/** The files under `src/` whose text holds `process.env`, relative to the clone, with `/` separators. */
function processEnvReaders(): string[] {
  const root = path.join(__dirname, '..', '..');
  return readdirSync(path.join(root, 'src'), { recursive: true, encoding: 'utf8' })
    .map((f) => path.join('src', f))
    .filter((f) => /\.[cm]?[jt]s$/.test(f) && readFileSync(path.join(root, f), 'utf8').includes('process.env'))
    .map((f) => f.split(path.sep).join('/'))
    .sort();
}

describe('the environment', () => {
  it('is read under src/config only: no other file of src names process.env', () => {
    const readers = processEnvReaders();
    expect(readers.length).toBeGreaterThan(0);
    expect(readers.filter((f) => !f.startsWith('src/config/'))).toEqual([]);
  });
});
