import { readFileSync } from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * Rooms small enough to read at once (issue 34): no file of src/ over {@link MAX_FILE_LINES} lines, and no function
 * (a declaration, a method, an arrow or a function expression, closures included) over {@link MAX_FUNCTION_LINES}.
 */
const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 120;

const root = path.resolve(__dirname, '..', '..');
const sources = execFileSync('git', ['ls-files', 'src'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter((f) => f.endsWith('.ts'));

/** `file:line name (n lines)` of every function of `text` longer than `max` lines. */
export function longFunctions(file: string, text: string, max: number): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const long: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const name = node.name && ts.isIdentifier(node.name) ? node.name.text : '(anonymous)';
      if (last - first + 1 > max) long.push(`${file}:${first + 1} ${name} (${last - first + 1} lines)`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return long;
}

describe('rooms small enough to read at once', () => {
  it(`src/ has files of TypeScript to measure`, () => {
    expect(sources.length).toBeGreaterThan(100);
  });

  it(`no file of src/ is over ${MAX_FILE_LINES} lines`, () => {
    const long = sources
      .map((f) => ({ f, lines: readFileSync(path.join(root, f), 'utf8').replace(/\n$/, '').split('\n').length }))
      .filter(({ lines }) => lines > MAX_FILE_LINES)
      .map(({ f, lines }) => `${f} (${lines} lines)`);
    expect(long).toEqual([]);
  });

  it(`no function of src/ is over ${MAX_FUNCTION_LINES} lines`, () => {
    const long = sources.flatMap((f) => longFunctions(f, readFileSync(path.join(root, f), 'utf8'), MAX_FUNCTION_LINES));
    expect(long).toEqual([]);
  });

  it('finds a long function, an arrow inside a call included', () => {
    const body = Array.from({ length: 130 }, (_, i) => `  const v${i} = ${i};`).join('\n');
    const text = `export function outer() {\n  return [1].map(() => {\n${body}\n  });\n}\n`;
    expect(longFunctions('x.ts', text, MAX_FUNCTION_LINES)).toEqual([
      'x.ts:1 outer (134 lines)',
      'x.ts:2 (anonymous) (132 lines)',
    ]);
  });
});
