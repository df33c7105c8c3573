import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { refuseInUnitProject } from './project';

/** The repository root. */
export const REPO_ROOT = path.resolve(__dirname, '..', '..');

/** The first source file that is newer than its build output in `dist/` (or has none), if any. */
export function firstStaleSource(): string | undefined {
  const srcRoot = path.join(REPO_ROOT, 'src');
  const distRoot = path.join(REPO_ROOT, 'dist');
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)],
    );
  for (const file of walk(srcRoot)) {
    if (!file.endsWith('.ts') || file.endsWith('.test.ts') || file.endsWith('.d.ts')) continue;
    const built = path.join(distRoot, path.relative(srcRoot, file)).replace(/\.ts$/, '.js');
    const builtAt = statSync(built, { throwIfNoEntry: false })?.mtimeMs;
    if (builtAt === undefined || statSync(file).mtimeMs > builtAt) return path.relative(REPO_ROOT, file);
  }
  return undefined;
}

/**
 * The child worker runs `dist/`, so `dist/` must hold the current `src/` (an old build would test old code).
 * `npm test` builds first (scripts/setup.mjs); when a source file is newer than its output, as after an edit
 * followed by a bare `vitest run`, this runs the same incremental build, one test process at a time. A build
 * that fails fails the test.
 */
export async function ensureDistIsFresh(): Promise<void> {
  refuseInUnitProject('the built command or worker (dist/)');
  if (!firstStaleSource()) return;
  const lock = path.join(
    os.tmpdir(),
    `imagebatch-build-${createHash('sha256').update(REPO_ROOT).digest('hex').slice(0, 12)}`,
  );
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`another build held ${lock} for 2 minutes (remove it if stale)`);
      await sleep(200);
    }
  }
  try {
    const stale = firstStaleSource();
    if (!stale) return;
    // `npm run build`: tsc, then the workflow bundles (skipped when the workflow code did not change).
    const tsc = path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    for (const args of [
      [tsc, '-p', 'tsconfig.build.json'],
      [path.join(REPO_ROOT, 'scripts', 'bundle-workflows.mjs')],
    ]) {
      const build = spawnSync(process.execPath, args, { cwd: REPO_ROOT, encoding: 'utf8' });
      if (build.status !== 0) {
        throw new Error(`dist/ is older than ${stale} and the build failed:\n${build.stdout}${build.stderr}`);
      }
    }
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}
