import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROW_HAPPY_PATH_EVENTS } from '../helpers/history-events';

/**
 * The README and the pages under docs/ against what they describe: every link between them resolves, the patches
 * the workflows take are the ones docs/patches.md lists, and the history-event counts stated once in
 * docs/design.md are the ones the tests assert and a recorded history holds.
 */
const ROOT = path.join(__dirname, '..', '..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
const PAGES = ['README.md', ...readdirSync(path.join(ROOT, 'docs')).map((f) => `docs/${f}`)].filter((f) =>
  f.endsWith('.md'),
);

/** The text outside fenced code blocks. */
function prose(markdown: string): string {
  return markdown.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '');
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes. */
function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}_\- ]/gu, '')
    .replace(/ /g, '-');
}

function anchorsOf(file: string): Set<string> {
  return new Set([...prose(read(file)).matchAll(/^#{1,6} (.+)$/gm)].map((m) => anchorOf(m[1] ?? '')));
}

describe('docs', () => {
  it('every relative link of the README and docs/ names a file that exists, and a heading of it', () => {
    const broken: string[] = [];
    for (const page of PAGES) {
      for (const [, target = ''] of prose(read(page)).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target)) continue;
        const [file = '', anchor] = target.split('#');
        const resolved = file === '' ? page : path.posix.normalize(path.posix.join(path.posix.dirname(page), file));
        let exists = true;
        try {
          readFileSync(path.join(ROOT, resolved));
        } catch {
          exists = false;
        }
        if (!exists) broken.push(`${page}: ${target} (no file ${resolved})`);
        else if (anchor !== undefined && resolved.endsWith('.md') && !anchorsOf(resolved).has(anchor)) {
          broken.push(`${page}: ${target} (no heading #${anchor} in ${resolved})`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it("the README's test command is `npm test`, the command CI runs", () => {
    const twoCommands = /## Two commands, on a fresh clone\n[\s\S]*?```sh\n([\s\S]*?)```/.exec(read('README.md'));
    expect(twoCommands?.[1]).toMatch(/^npm test +#/m);
    expect(read('.ci/run')).toMatch(/^npm test$/m);
  });

  it('the README runs on a fresh clone: its two commands, the Node it names, no path outside the clone', () => {
    const readme = read('README.md');
    const twoCommands = /## Two commands, on a fresh clone\n[\s\S]*?```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    expect(twoCommands.match(/^\S.*?(?= +#)/gm)).toEqual(['npm run demo', 'npm test']);
    const engines = (JSON.parse(read('package.json')) as { engines: { node: string } }).engines.node;
    expect(engines).toBe('>=20.19');
    expect(readme).toContain('Node 20 ≥ 20.19');
    expect(readme).toMatch(/Node\.js 22 or 24 LTS/);
    expect(prose(readme)).not.toMatch(/\.\.\//);
  });

  it('docs/patches.md lists exactly the patches the workflows take', () => {
    const dir = path.join(ROOT, 'src', 'workflows');
    const sources = readdirSync(dir, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .map((f) => readFileSync(path.join(dir, f), 'utf8'))
      .join('\n');
    const constants = new Map(
      [...sources.matchAll(/const ([A-Z][A-Z0-9_]*) = '([a-z0-9-]+)'/g)].map((m) => [m[1], m[2]]),
    );
    const inCode = new Set(
      [...sources.matchAll(/(?:patched|deprecatePatch)\(([A-Z][A-Z0-9_]*|'[a-z0-9-]+')\)/g)].map(([, arg = '']) =>
        arg.startsWith("'") ? arg.slice(1, -1) : constants.get(arg),
      ),
    );
    expect(inCode.size).toBeGreaterThan(0);
    expect(inCode.has(undefined)).toBe(false);
    const listed = new Set([...read('docs/patches.md').matchAll(/^- `([a-z0-9-]+)`: /gm)].map((m) => m[1]));
    expect([...listed].sort()).toEqual([...inCode].sort());
  });

  it("docs/design.md states the happy path's history events that a recorded history holds", () => {
    const recorded = JSON.parse(read('test/replay/histories/v3-one-to-one-keys-and-ledger-prompt-happy-path.json')) as {
      events: unknown[];
    };
    expect(recorded.events).toHaveLength(ROW_HAPPY_PATH_EVENTS.alone);
    const section = /## A row's history\n([\s\S]*?)(?=\n## |$)/.exec(read('docs/design.md'))?.[1] ?? '';
    expect(section).toContain(`**${ROW_HAPPY_PATH_EVENTS.alone} history events**`);
    expect(section).toContain(`**${ROW_HAPPY_PATH_EVENTS.inBatch}**`);
  });
});
