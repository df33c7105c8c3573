import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SETTING_NAMES } from '../../src/config/known-settings';
import { SERVICE_CONFIG_ENV } from '../../src/config/service-config';

const ROOT = path.join(__dirname, '..', '..');

/**
 * Every variable src/ names in a constant of its own (`export const X_ENV = 'NAME'`), every service setting's, and
 * every setting the worker and the commands know (src/config/known-settings.ts).
 */
function variablesRead(): string[] {
  const names = new Set<string>([...Object.values(SERVICE_CONFIG_ENV), ...SETTING_NAMES]);
  for (const file of readdirSync(path.join(ROOT, 'src'), { recursive: true, encoding: 'utf8' })) {
    if (!file.endsWith('.ts')) continue;
    const text = readFileSync(path.join(ROOT, 'src', file), 'utf8');
    for (const m of text.matchAll(/export const [A-Z_]+_ENV = '([A-Z][A-Z0-9_]*)'/g)) names.add(m[1]!);
  }
  return [...names].sort();
}

describe('docs/settings.md', () => {
  it('names every variable the code reads', () => {
    const names = variablesRead();
    expect(names.length).toBeGreaterThan(40);
    const page = readFileSync(path.join(ROOT, 'docs', 'settings.md'), 'utf8');
    expect(names.filter((name) => !page.includes(`\`${name}\``))).toEqual([]);
  });
});
