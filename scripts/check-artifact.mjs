#!/usr/bin/env node
// Builds, outside Docker, the artefact that the Dockerfile builds, and runs it (no Docker engine runs on the CI
// machines). It reads the Dockerfile's stages and repeats their COPY and RUN lines in a temporary folder:
//
//   build    the COPY lines from the build context; `npm ci` (all dependencies) is the repository's own
//            node_modules, linked rather than installed again; `npm run build` runs as written (tsc, then the
//            workflow bundles), with NODE_PRESERVE_SYMLINKS so that webpack sees the link as a folder of the app.
//   runtime  the COPY lines (the --from=build one from the build above); `npm ci --omit=dev ...` runs as
//            written, from the local npm cache where it can (--prefer-offline), so only production dependencies.
//
// Then it checks that no development-only package was installed, that the artefact's dist/ is byte for byte the
// dist/ the tests run (this checkout's, built from the same src/), and runs the artefact with production
// dependencies only: --help, validate, a simulator, a worker (Temporal settings from a profile file, the service
// key from a file, its workflow code from the build's bundle, not bundled at start) on a Temporal dev server, its
// health check, and a three-row batch through `run --follow`.
//
//   node scripts/check-artifact.mjs [--json] [--keep]     --json: one summary line on stdout; --keep: leave the folder
//
// Exit status 0 when every check passes, 1 otherwise. Each step is bounded in time.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { clearTimeout, setTimeout } from 'node:timers';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const args = new Set(process.argv.slice(2));
const started = Date.now();
const timings = {};

function log(msg) {
  process.stderr.write(`check-artifact: ${msg}\n`);
}

class CheckFailed extends Error {}

/**
 * The image runs as the unprivileged `node` user over root-owned application files. Run as root here, the artefact
 * runs as `nobody` the same way, so that writing into its own folder fails here as it would in the container.
 */
const runAs = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : undefined;

/** Hands a file or folder the artefact must write to (or read, like the key) to the user it runs as. */
function own(p) {
  if (runAs) chownSync(p, runAs.uid, runAs.gid);
}

function fail(msg) {
  throw new CheckFailed(msg);
}

/** Runs `fn`, recording how long it took under `name`. */
async function step(name, fn) {
  const t0 = Date.now();
  log(`${name} ...`);
  const result = await fn();
  timings[name] = Date.now() - t0;
  return result;
}

/**
 * The Dockerfile's stages: each `FROM image AS name` with its WORKDIR, ENV, COPY and RUN lines (continuation lines
 * joined, comments dropped, `${ARG}` in FROM resolved from the ARG lines before the first stage).
 */
function parseDockerfile(text) {
  const argValues = new Map();
  const stages = [];
  for (const line of text.replace(/\\\r?\n/g, ' ').split(/\r?\n/)) {
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!m || line.trim().startsWith('#')) continue;
    const op = m[1].toUpperCase();
    const rest = m[2].trim();
    const stage = stages.at(-1);
    if (op === 'ARG' && !stage) {
      const [k, v = ''] = rest.split('=');
      argValues.set(k.trim(), v.trim());
    } else if (op === 'FROM') {
      const [image, as, name] = rest.split(/\s+/);
      if (as?.toUpperCase() !== 'AS' || !name) fail(`Dockerfile: every stage needs a name (FROM ${rest})`);
      const from = image.replace(/\$\{(\w+)\}/g, (_, k) => argValues.get(k) ?? '');
      stages.push({ name, from, workdir: '/', env: {}, steps: [] });
    } else if (!stage) {
      fail(`Dockerfile: ${op} before the first FROM is not supported here`);
    } else if (op === 'WORKDIR') {
      stage.workdir = path.posix.resolve(stage.workdir, rest);
      stage.steps.push({ op, dir: stage.workdir });
    } else if (op === 'ENV') {
      const [k, ...v] = rest.split('=');
      stage.env[k.trim()] = v.join('=').trim();
    } else if (op === 'COPY') {
      const words = rest.split(/\s+/);
      const from = words.find((w) => w.startsWith('--from='))?.slice('--from='.length);
      const paths = words.filter((w) => !w.startsWith('--'));
      if (paths.length < 2 || paths.some((p) => /[*?[$]/.test(p))) fail(`Dockerfile: COPY ${rest}: plain paths only`);
      stage.steps.push({ op, from, sources: paths.slice(0, -1), dest: paths.at(-1), workdir: stage.workdir });
    } else if (op === 'RUN') {
      stage.steps.push({ op, commands: rest.split('&&').map((c) => c.trim()), workdir: stage.workdir });
    }
  }
  return stages;
}

/** Where a stage's container path lives in the temporary folder. */
function hostPath(tmp, stageName, containerPath) {
  return path.join(tmp, stageName, containerPath);
}

function copyInto(source, destContainer, dest, manySources) {
  const isDir = statSync(source).isDirectory();
  const target = manySources || destContainer.endsWith('/') ? path.join(dest, path.basename(source)) : dest;
  mkdirSync(isDir ? target : path.dirname(target), { recursive: true });
  cpSync(source, target, { recursive: true });
}

function npm(npmArgs, cwd, timeoutMs, env = process.env) {
  const res = spawnSync('npm', npmArgs, { cwd, encoding: 'utf8', timeout: timeoutMs, env });
  if (res.status !== 0) {
    fail(`npm ${npmArgs.join(' ')} failed in ${cwd} (${res.error?.message ?? `exit ${res.status}`}):\n${res.stderr}`);
  }
}

/** Repeats one stage's COPY and RUN lines in `tmp/<stage>/`. */
function buildStage(tmp, stage) {
  const notes = [];
  for (const s of stage.steps) {
    if (s.op === 'WORKDIR') {
      mkdirSync(hostPath(tmp, stage.name, s.dir), { recursive: true });
    } else if (s.op === 'COPY') {
      const destContainer = path.posix.resolve(s.workdir, s.dest) + (s.dest.endsWith('/') ? '/' : '');
      const dest = hostPath(tmp, stage.name, destContainer);
      for (const src of s.sources) {
        const source = s.from ? hostPath(tmp, s.from, src) : path.join(root, src);
        if (!existsSync(source)) fail(`COPY ${s.from ? `--from=${s.from} ` : ''}${src}: ${source} does not exist`);
        copyInto(source, destContainer, dest, s.sources.length > 1);
      }
    } else if (s.op === 'RUN') {
      const cwd = hostPath(tmp, stage.name, s.workdir);
      for (const command of s.commands) {
        if (/^npm (install|ci)\b/.test(command) && !command.includes('--omit=dev')) {
          // Every dependency, for the compiler: the repository's own install of the same lock file.
          symlinkSync(path.join(root, 'node_modules'), path.join(cwd, 'node_modules'), 'dir');
          notes.push(`${stage.name}: "${command}" replaced by a link to ${path.join(root, 'node_modules')}`);
        } else if (/^npm (install|ci)\b/.test(command)) {
          npm([...command.split(/\s+/).slice(1), '--prefer-offline'], cwd, 300_000);
        } else if (command === 'npm run build') {
          // The SDK's webpack loaders through the node_modules link, not at their real path: webpack orders modules by
          // path, and the workflow bundles must be the bytes of a build without the link.
          npm(['run', '-s', 'build'], cwd, 300_000, { ...process.env, NODE_PRESERVE_SYMLINKS: '1' });
        } else if (/^(npm cache clean|mkdir|chown)\b/.test(command)) {
          notes.push(`${stage.name}: "${command}" not repeated (it changes the container, not the artefact)`);
        } else {
          fail(
            `RUN ${command}: check-artifact.mjs does not know how to repeat it (keep RUN lines to npm, mkdir, chown)`,
          );
        }
      }
    }
  }
  return notes;
}

/**
 * Relative path to SHA-256 of every file under `dir` (the workflow bundles too), without dot files: the compiler's
 * incremental-build state (`.tsbuildinfo`) is not build output.
 */
function hashTree(dir) {
  const out = new Map();
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (!e.name.startsWith('.')) out.set(path.relative(dir, p), sha256(readFileSync(p)));
    }
  };
  walk(dir);
  return out;
}

function sha256(data) {
  return createHash('sha256').update(data).digest('hex');
}

function compareDist(artifactDist, repoDist) {
  const a = hashTree(artifactDist);
  const b = hashTree(repoDist);
  const onlyInArtifact = [...a.keys()].filter((k) => !b.has(k));
  const onlyInRepo = [...b.keys()].filter((k) => !a.has(k));
  const differ = [...a.keys()].filter((k) => b.has(k) && a.get(k) !== b.get(k));
  const digest = sha256(
    [...a.entries()]
      .sort(([x], [y]) => x.localeCompare(y))
      .map((e) => e.join(' '))
      .join('\n'),
  );
  return { files: a.size, digest, onlyInArtifact, onlyInRepo, differ };
}

/** Top-level installed packages, and those the lock file marks as development-only. */
function installedPackages(app) {
  const lock = JSON.parse(readFileSync(path.join(app, 'package-lock.json'), 'utf8'));
  const modules = path.join(app, 'node_modules');
  const names = readdirSync(modules)
    .filter((n) => !n.startsWith('.'))
    .flatMap((n) => (n.startsWith('@') ? readdirSync(path.join(modules, n)).map((m) => `${n}/${m}`) : [n]));
  const devOnly = names.filter((n) => lock.packages?.[`node_modules/${n}`]?.dev === true);
  return { count: names.length, devOnly };
}

/** A child process of the artefact's CLI, with its output kept and an exit promise. */
function startCli(app, cliArgs, { env, cwd }) {
  const child = spawn(process.execPath, [path.join(app, 'bin', 'imagebatch.js'), ...cliArgs], {
    cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...runAs,
  });
  const io = { stdout: '', stderr: '' };
  child.stdout.on('data', (d) => (io.stdout += d));
  child.stderr.on('data', (d) => (io.stderr += d));
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
  return { child, io, exited };
}

async function runCli(app, cliArgs, options, timeoutMs) {
  const p = startCli(app, cliArgs, options);
  const timer = setTimeout(() => p.child.kill('SIGKILL'), timeoutMs);
  const code = await p.exited;
  clearTimeout(timer);
  return { code, ...p.io };
}

async function waitFor(what, check, timeoutMs, intervalMs = 250) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

async function stop(p, timeoutMs = 30_000) {
  if (!p || p.child.exitCode !== null || p.child.signalCode !== null) return;
  p.child.kill('SIGTERM');
  const timer = setTimeout(() => p.child.kill('SIGKILL'), timeoutMs);
  await p.exited;
  clearTimeout(timer);
}

function countFiles(dir, suffix) {
  if (!existsSync(dir)) return 0;
  return readdirSync(dir, { withFileTypes: true, recursive: true }).filter((e) => e.isFile() && e.name.endsWith(suffix))
    .length;
}

/** The artefact, run with production dependencies only, against a dev server and its own simulator. */
async function runArtifact(tmp, app, stageEnv) {
  const home = path.join(tmp, 'home');
  const work = path.join(tmp, 'work');
  mkdirSync(home, { recursive: true });
  mkdirSync(work, { recursive: true });
  chmodSync(tmp, 0o755);
  own(home);
  own(work);
  // A clean environment: nothing of this shell (a key, a Temporal address) reaches the artefact by accident.
  const baseEnv = { PATH: process.env.PATH ?? '', HOME: home, ...stageEnv };
  const appRequire = createRequire(path.join(app, 'package.json'));

  const help = await runCli(app, ['--help'], { env: baseEnv, cwd: work }, 60_000);
  if (help.code !== 0 || !help.stdout.includes('worker')) fail(`--help failed (${help.code}): ${help.stderr}`);

  const rows = path.join(work, 'rows.csv');
  writeFileSync(
    rows,
    'id,prompt\n' +
      'lighthouse,a watercolor lighthouse at dawn over a calm sea\n' +
      'orchard,an apple orchard in autumn light with long shadows\n' +
      'harbor,a quiet harbor at night with lanterns on the water\n',
  );
  const validated = await runCli(
    app,
    ['validate', rows, '--model', 'flux-dev', '--json'],
    { env: baseEnv, cwd: work },
    60_000,
  );
  const report = validated.code === 0 ? JSON.parse(validated.stdout).report : undefined;
  if (report?.validRows !== 3)
    fail(`validate: exit ${validated.code}, ${validated.stdout.slice(0, 400)}${validated.stderr}`);

  const repoRequire = createRequire(path.join(root, 'package.json'));
  const { loadToolchainOverrides } = repoRequire('./dist/config/toolchain-config.js');
  const temporalCli = repoRequire('./dist/temporal/toolchain.js').requireTemporalCli(
    loadToolchainOverrides().temporalCli,
  );
  const { DevServer } = appRequire('./dist/temporal/dev-server.js');
  const { devServerEnv } = appRequire('./dist/config/dev-server-env.js');
  const { DEMO_API_KEY } = appRequire('./dist/simulator/config.js');
  let server;
  let simulator;
  let worker;
  try {
    server = await step('start a Temporal dev server', () =>
      DevServer.start({ uiPort: false, executable: temporalCli, startTimeoutMs: 120_000, env: devServerEnv() }),
    );
    simulator = startCli(app, ['simulator', '--port', '0', '--files-port', '0', '--json'], { env: baseEnv, cwd: work });
    const sim = await waitFor('the simulator', () => /^\{.*\}$/m.exec(simulator.io.stdout)?.[0], 60_000);
    const { baseUrl } = JSON.parse(sim);

    // The worker finds Temporal through a profile file, and reads the service key from a file.
    const profileFile = path.join(home, 'temporal.toml');
    writeFileSync(profileFile, `[profile.artifact]\naddress = "${server.address}"\nnamespace = "default"\n`);
    own(profileFile);
    const keyFile = path.join(home, 'imagegen-api-key');
    writeFileSync(keyFile, `${DEMO_API_KEY}\n`, { mode: 0o600 });
    own(keyFile);
    const taskQueue = `artifact-${process.pid}`;
    const workerEnv = {
      ...baseEnv,
      TEMPORAL_CONFIG_FILE: profileFile,
      TEMPORAL_PROFILE: 'artifact',
      TEMPORAL_TASK_QUEUE: taskQueue,
      IMAGEGEN_BASE_URL: baseUrl,
      IMAGEGEN_API_KEY_FILE: keyFile,
    };
    worker = startCli(app, ['worker'], { env: workerEnv, cwd: work });
    await step('start the worker', () =>
      waitFor(
        'the worker to poll',
        () => {
          if (worker.child.exitCode !== null) fail(`the worker exited (${worker.child.exitCode}): ${worker.io.stderr}`);
          return worker.io.stderr.includes('worker polling');
        },
        240_000,
      ),
    );
    // The image makes the workflow bundles at build time: a worker that bundles at start would say so.
    const { BUNDLING_AT_START } = appRequire('./dist/cli/commands/worker.js');
    if (worker.io.stderr.includes(BUNDLING_AT_START)) {
      fail(`the worker bundled its workflow code at start instead of loading dist/'s bundle: ${worker.io.stderr}`);
    }

    const healthEnv = { ...baseEnv, TEMPORAL_CONFIG_FILE: profileFile, TEMPORAL_PROFILE: 'artifact' };
    await step('health check', () =>
      waitFor(
        'the health check to pass',
        async () =>
          (
            await runCli(
              app,
              ['healthcheck'],
              { env: { ...healthEnv, TEMPORAL_TASK_QUEUE: taskQueue }, cwd: work },
              60_000,
            )
          ).code === 0,
        60_000,
        1000,
      ),
    );
    const other = await runCli(
      app,
      ['healthcheck'],
      { env: { ...healthEnv, TEMPORAL_TASK_QUEUE: `${taskQueue}-none` }, cwd: work },
      60_000,
    );
    if (other.code !== 1 || !other.stderr.includes('no worker polls')) {
      fail(`the health check of a queue without a worker: exit ${other.code}, ${other.stderr}`);
    }

    const runEnv = { ...baseEnv, TEMPORAL_ADDRESS: server.address, TEMPORAL_TASK_QUEUE: taskQueue };
    const ran = await step('run a three-row batch', () =>
      runCli(app, ['run', rows, '--model', 'flux-dev', '--follow', '--json'], { env: runEnv, cwd: work }, 240_000),
    );
    const progress = ran.code === 0 ? JSON.parse(ran.stdout.trim().split('\n').at(-1)) : undefined;
    if (progress?.status !== 'completed' || progress.counts?.succeeded !== 3) {
      fail(
        `run: exit ${ran.code}, ${ran.stdout.slice(-600)} ${ran.stderr.slice(-600)}\nworker: ${worker.io.stderr.slice(-2000)}`,
      );
    }
    const images = countFiles(path.join(work, 'out'), '.png');
    if (images < 3) fail(`the batch succeeded, but out/ holds ${images} .png files`);
    return { succeeded: progress.counts.succeeded, images, spentUsd: progress.spentUsd };
  } finally {
    await stop(worker);
    await stop(simulator);
    await server?.stop();
  }
}

async function main() {
  const stages = parseDockerfile(readFileSync(path.join(root, 'Dockerfile'), 'utf8'));
  const runtime = stages.at(-1);
  if (!runtime) fail('the Dockerfile has no stage');
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'imagebatch-artifact-'));
  try {
    const notes = [];
    for (const stage of stages) notes.push(...(await step(`stage ${stage.name}`, () => buildStage(tmp, stage))));
    // The application folder: where the runtime stage copied package.json.
    const appStep = runtime.steps.find((s) => s.op === 'COPY' && !s.from && s.sources.includes('package.json'));
    if (!appStep) fail('the runtime stage copies no package.json');
    const app = hostPath(tmp, runtime.name, appStep.workdir);
    if (!existsSync(path.join(app, 'bin', 'imagebatch.js'))) fail(`no bin/imagebatch.js in the runtime stage (${app})`);

    const packages = installedPackages(app);
    if (packages.devOnly.length > 0)
      fail(`development-only packages in the runtime stage: ${packages.devOnly.join(', ')}`);
    for (const dev of ['typescript', 'vitest', 'eslint']) {
      if (existsSync(path.join(app, 'node_modules', dev))) fail(`${dev} is installed in the runtime stage`);
    }

    const dist = compareDist(path.join(app, 'dist'), path.join(root, 'dist'));
    const same = dist.onlyInArtifact.length + dist.onlyInRepo.length + dist.differ.length === 0;
    if (!same) {
      const list = (label, items) => (items.length ? `\n  ${label}: ${items.slice(0, 10).join(', ')}` : '');
      fail(
        "the artefact's dist/ differs from this checkout's dist/ (rebuild it: rm -rf dist && npm run build)" +
          list('only in the artefact', dist.onlyInArtifact) +
          list('only in dist/', dist.onlyInRepo) +
          list('different', dist.differ),
      );
    }
    if (!existsSync(path.join(app, 'dist', 'workflow-bundles.json'))) {
      fail("no workflow bundles in the artefact's dist/ (`npm run build` makes them: scripts/bundle-workflows.mjs)");
    }
    const run = await step('run the artefact', () => runArtifact(tmp, app, runtime.env));
    const summary = {
      ok: true,
      stages: stages.map((s) => `${s.name} (${s.from})`),
      ranAs: runAs ? 'nobody (uid 65534), over root-owned files' : `uid ${process.getuid?.() ?? '?'}`,
      productionPackages: packages.count,
      distFiles: dist.files,
      distSha256: dist.digest,
      sameDistAsTests: same,
      run,
      notes,
      timingsMs: { ...timings, total: Date.now() - started },
    };
    log(
      `ok: ${dist.files} dist files identical to dist/ (sha256 ${dist.digest.slice(0, 16)}), ${packages.count} ` +
        `production packages, ${run.succeeded} rows succeeded, ${run.images} images, ${summary.timingsMs.total} ms`,
    );
    if (args.has('--json')) process.stdout.write(`${JSON.stringify(summary)}\n`);
  } finally {
    if (args.has('--keep')) log(`kept ${tmp}`);
    else rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch((err) => {
  log(`FAILED: ${err instanceof CheckFailed ? err.message : (err?.stack ?? String(err))}`);
  process.exitCode = 1;
});
