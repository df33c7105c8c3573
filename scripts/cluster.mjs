#!/usr/bin/env node
// A Temporal cluster on PostgreSQL on this machine, without Docker: PostgreSQL (run as an unprivileged user, its data
// in a temporary folder, on loopback), the Temporal schema created and migrated, the Temporal server of
// TEMPORAL_SERVER_VERSION (scripts/cluster-lib.mjs) run with deploy/temporal-cluster.yaml and
// deploy/dynamicconfig/imagebatch.yaml (the files docker-compose.yml gives its server container) as one process or
// as one process per service, and the `default` namespace. Every port is a free one; processes run in the background,
// logging to files in the state folder, and outlive this script. Needs `node scripts/setup.mjs --cluster` first.
//
//   node scripts/cluster.mjs [--split] [--dir <folder>] [--port <n>]  up; prints the frontend address (host:port)
//   node scripts/cluster.mjs --down [--dir <folder>]                  stops it all, deletes the database
//   node scripts/cluster.mjs --kill <process> [--dir <folder>]        SIGKILL, as a crash would
//   node scripts/cluster.mjs --restart <process> [--dir <folder>]     starts it again (stopping it first if it runs)
//   node scripts/cluster.mjs --status [--dir <folder>]                the state, as JSON
//
// <process> is one of frontend, history, matching, worker (--split) or server (one process), or postgres. The state
// folder (default: <tmp>/imagebatch-cluster) holds cluster.json (address, ports, pids), db-password and logs/.
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { createServer, connect } from 'node:net';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { TEMPORAL_SERVER_VERSION, postgresBin, serverTools } from './cluster-lib.mjs';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const CONFIG_FILE = join(root, 'deploy', 'temporal-cluster.yaml');
const DYNAMIC_CONFIG_FILE = join(root, 'deploy', 'dynamicconfig', 'imagebatch.yaml');
const SERVICES = ['frontend', 'history', 'matching', 'worker'];
const DB_USER = 'temporal';
/** The ledger store's database, beside Temporal's two on the same PostgreSQL server. */
const LEDGER_DB = 'imagebatch_ledger';
const NAMESPACE = 'default';
/** Longest wait for one process or step to be ready. */
const READY_MS = 120_000;
/** Time a process gets to stop on SIGTERM (SIGINT for PostgreSQL) before SIGKILL. */
const STOP_GRACE_MS = 20_000;
const started = Date.now();

class ClusterError extends Error {}

function log(msg) {
  process.stderr.write(`cluster: ${msg}\n`);
}

function elapsed() {
  return `${((Date.now() - started) / 1000).toFixed(1)} s`;
}

// ---------------------------------------------------------------------------------------------- state folder

function statePaths(dir) {
  return {
    dir,
    state: join(dir, 'cluster.json'),
    password: join(dir, 'db-password'),
    logs: join(dir, 'logs'),
  };
}

function readState(paths) {
  if (!existsSync(paths.state)) return undefined;
  return JSON.parse(readFileSync(paths.state, 'utf8'));
}

function writeState(paths, state) {
  writeFileSync(paths.state, `${JSON.stringify(state, null, 2)}\n`);
}

function logFile(paths, name) {
  return join(paths.logs, `${name}.log`);
}

/** The last lines of a log, to show why something failed. */
function tail(file, lines = 25) {
  if (!existsSync(file)) return '(no log)';
  return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
}

// ---------------------------------------------------------------------------------------------- processes

/** Whether `pid` is a live process (not a zombie) running `exe`; a recycled pid running anything else is not. */
function isOurs(pid, exe) {
  if (!pid) return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    if (/^\d+ \(.*\) Z/s.test(stat)) return false;
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] === exe;
  } catch {
    return false;
  }
}

/** Starts `exe` in the background (its own process group, surviving this script), appending its output to `log`. */
function startDetached(exe, args, { log: logPath, env, cwd, uid, gid }) {
  const fd = openSync(logPath, 'a');
  writeSync(fd, `\n--- ${new Date().toISOString()} starting ${exe} ${args.join(' ')}\n`);
  try {
    const child = spawn(exe, args, { detached: true, stdio: ['ignore', fd, fd], env, cwd, uid, gid });
    child.once('error', () => {}); // a spawn failure leaves no pid, thrown below
    child.unref();
    if (!child.pid) throw new ClusterError(`could not start ${exe}`);
    return child.pid;
  } finally {
    closeSync(fd);
  }
}

function signal(pid, sig) {
  try {
    process.kill(pid, sig);
  } catch {
    // gone already
  }
}

/** Sends `sig`, waits up to the grace for the process to end, then SIGKILLs it. */
async function stopProcess(proc, sig = 'SIGTERM') {
  if (!isOurs(proc.pid, proc.exe)) return;
  signal(proc.pid, sig);
  const deadline = Date.now() + STOP_GRACE_MS;
  while (isOurs(proc.pid, proc.exe) && Date.now() < deadline) await sleep(100);
  if (isOurs(proc.pid, proc.exe)) {
    log(`${proc.name} (pid ${proc.pid}) still runs after ${STOP_GRACE_MS / 1000} s: SIGKILL`);
    await killProcess(proc);
  }
}

async function killProcess(proc) {
  signal(proc.pid, 'SIGKILL');
  const deadline = Date.now() + 10_000;
  while (isOurs(proc.pid, proc.exe) && Date.now() < deadline) await sleep(20);
}

/** Waits until `check()` is true, failing early when `proc` has exited. */
async function waitFor(what, proc, check) {
  const deadline = Date.now() + READY_MS;
  for (;;) {
    if (await check()) return;
    if (proc && !isOurs(proc.pid, proc.exe)) {
      throw new ClusterError(`${proc.name} exited while waiting for ${what}; its log ends:\n${tail(proc.log)}`);
    }
    if (Date.now() > deadline) {
      const where = proc ? `; ${proc.name}'s log ends:\n${tail(proc.log)}` : '';
      throw new ClusterError(`timed out after ${READY_MS / 1000} s waiting for ${what}${where}`);
    }
    await sleep(250);
  }
}

function portAccepts(port) {
  return new Promise((res) => {
    const sock = connect({ host: '127.0.0.1', port });
    sock.setTimeout(1000);
    sock.once('connect', () => {
      sock.destroy();
      res(true);
    });
    sock.once('timeout', () => {
      sock.destroy();
      res(false);
    });
    sock.once('error', () => res(false));
  });
}

/**
 * `n` distinct free loopback ports, held together while picked so no two are the same. Below 32768: the cluster
 * membership table stores a service's port as SMALLINT in PostgreSQL (a port from the kernel's ephemeral range,
 * what port 0 gives, stops the server at start with "out of range for type smallint").
 */
async function freePorts(n) {
  const servers = [];
  try {
    for (let tries = 0; servers.length < n; tries++) {
      if (tries > 1000) throw new ClusterError(`could not find ${n} free ports between 20000 and 32767`);
      const port = 20000 + Math.floor(Math.random() * 12768);
      const srv = createServer();
      const ok = await new Promise((res) => {
        srv.once('error', () => res(false));
        srv.listen(port, '127.0.0.1', () => res(true));
      });
      if (ok) servers.push(srv);
    }
    return servers.map((s) => s.address().port);
  } finally {
    await Promise.all(servers.map((s) => new Promise((res) => s.close(() => res()))));
  }
}

// ---------------------------------------------------------------------------------------------- PostgreSQL

function isRoot() {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

/** uid and gid of `user`, for running PostgreSQL, which refuses to run as root. */
function idsOf(user) {
  const uid = spawnSync('id', ['-u', user], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', user], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) throw new ClusterError(`no user ${user} to run PostgreSQL as`);
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

function postgresProcess(state, paths) {
  return { name: 'postgres', exe: join(state.pgBin, 'postgres'), log: logFile(paths, 'postgres') };
}

function startPostgres(state, paths) {
  const proc = postgresProcess(state, paths);
  const args = [
    '-D',
    join(state.pgBase, 'data'),
    '-p',
    String(state.ports.postgres),
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'unix_socket_directories=',
    // Every Temporal service keeps up to 30 connections (deploy/temporal-cluster.yaml); four of them need 120.
    '-c',
    'max_connections=200',
  ];
  const ids = state.pgUser ? idsOf(state.pgUser) : {};
  const env = { PATH: process.env.PATH ?? '', LC_ALL: 'C' };
  proc.pid = startDetached(proc.exe, args, { log: proc.log, env, cwd: state.pgBase, ...ids });
  return proc;
}

async function waitPostgres(state, proc) {
  const isReady = join(state.pgBin, 'pg_isready');
  const args = ['-h', '127.0.0.1', '-p', String(state.ports.postgres), '-U', DB_USER, '-d', 'postgres', '-q'];
  await waitFor('PostgreSQL', proc, () => spawnSync(isReady, args).status === 0);
}

/** A fresh database cluster in a new temporary folder owned by the PostgreSQL user; its superuser is `temporal`. */
function initPostgres(state, paths, password) {
  state.pgBase = mkdtempSync(join(tmpdir(), 'imagebatch-pg-'));
  chmodSync(state.pgBase, 0o700);
  const ids = state.pgUser ? idsOf(state.pgUser) : {};
  if (state.pgUser) chownSync(state.pgBase, ids.uid, ids.gid);
  const pwfile = join(state.pgBase, 'pwfile');
  writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
  if (state.pgUser) chownSync(pwfile, ids.uid, ids.gid);
  const fd = openSync(logFile(paths, 'initdb'), 'a');
  try {
    const res = spawnSync(
      join(state.pgBin, 'initdb'),
      [
        '-D',
        join(state.pgBase, 'data'),
        '-U',
        DB_USER,
        `--pwfile=${pwfile}`,
        '--auth=scram-sha-256',
        '--encoding=UTF8',
        '--locale=C',
        '--no-sync',
      ],
      { stdio: ['ignore', fd, fd], env: { PATH: process.env.PATH ?? '', LC_ALL: 'C' }, cwd: state.pgBase, ...ids },
    );
    if (res.error || res.status !== 0) {
      throw new ClusterError(`initdb failed; its log ends:\n${tail(logFile(paths, 'initdb'))}`);
    }
  } finally {
    closeSync(fd);
    rmSync(pwfile, { force: true });
  }
}

// ---------------------------------------------------------------------------------------------- Temporal

/** The Temporal CLI, found as src/temporal/toolchain.ts finds it. */
function temporalCli() {
  const candidates = [
    process.env.IMAGEBATCH_TEMPORAL_CLI,
    join(root, '.tools', 'venv', 'bin', 'temporal'),
    join(root, '.tools', 'bin', 'temporal'),
  ];
  return candidates.find((p) => p && existsSync(p));
}

/** This process's environment without Temporal client settings, which would redirect the CLI. */
function cleanEnv() {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('TEMPORAL_')));
}

function cli(state, args) {
  const res = spawnSync(
    state.temporalCli,
    [...args, '--address', state.address, '--disable-config-file', '--disable-config-env'],
    { encoding: 'utf8', env: cleanEnv(), timeout: 30_000 },
  );
  return { ok: res.status === 0, out: `${res.stdout ?? ''}${res.stderr ?? ''}`.trim() };
}

/** The settings deploy/temporal-cluster.yaml reads, under the names docker-compose.yml gives the container. */
function serverEnv(state, password) {
  const p = state.ports;
  return {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? tmpdir(),
    POSTGRES_SEEDS: '127.0.0.1',
    DB_PORT: String(p.postgres),
    POSTGRES_USER: DB_USER,
    POSTGRES_PWD: password,
    BIND_ON_IP: '127.0.0.1',
    TEMPORAL_BROADCAST_ADDRESS: '127.0.0.1',
    DYNAMIC_CONFIG_FILE_PATH: DYNAMIC_CONFIG_FILE,
    FRONTEND_GRPC_PORT: String(p.frontendGrpc),
    FRONTEND_HTTP_PORT: String(p.frontendHttp),
    FRONTEND_MEMBERSHIP_PORT: String(p.frontendMembership),
    HISTORY_GRPC_PORT: String(p.historyGrpc),
    HISTORY_MEMBERSHIP_PORT: String(p.historyMembership),
    MATCHING_GRPC_PORT: String(p.matchingGrpc),
    MATCHING_MEMBERSHIP_PORT: String(p.matchingMembership),
    WORKER_GRPC_PORT: String(p.workerGrpc),
    WORKER_MEMBERSHIP_PORT: String(p.workerMembership),
  };
}

/** The server processes of a mode: one per service (split), or `server` running all four. */
function serverProcesses(mode) {
  return mode === 'split'
    ? SERVICES.map((s) => ({ name: s, services: [s] }))
    : [{ name: 'server', services: SERVICES }];
}

function startServerProcess(state, paths, name, password) {
  const def = serverProcesses(state.mode).find((d) => d.name === name);
  const proc = { name, exe: state.serverBin, log: logFile(paths, name), services: def.services };
  const args = [
    '--config-file',
    CONFIG_FILE,
    '--allow-no-auth',
    'start',
    ...def.services.flatMap((s) => ['--service', s]),
  ];
  proc.pid = startDetached(proc.exe, args, { log: proc.log, env: serverEnv(state, password), cwd: paths.dir });
  return proc;
}

async function waitServerProcess(state, proc) {
  for (const svc of proc.services) {
    const port = state.ports[`${svc}Grpc`];
    await waitFor(`the ${svc} service on port ${port}`, proc, () => portAccepts(port));
  }
  if (proc.services.includes('frontend')) {
    await waitFor(
      'the frontend to answer `cluster health`',
      proc,
      () => cli(state, ['operator', 'cluster', 'health']).ok,
    );
  }
}

function sqlTool(state, paths, password, db, args) {
  const fd = openSync(logFile(paths, 'schema'), 'a');
  try {
    writeSync(fd, `\n--- ${db}: temporal-sql-tool ${args.join(' ')}\n`);
    const res = spawnSync(state.sqlTool, args, {
      stdio: ['ignore', fd, fd],
      env: {
        PATH: process.env.PATH ?? '',
        SQL_PLUGIN: 'postgres12',
        SQL_HOST: '127.0.0.1',
        SQL_PORT: String(state.ports.postgres),
        SQL_USER: DB_USER,
        SQL_PASSWORD: password,
        SQL_DATABASE: db,
      },
    });
    if (res.error || res.status !== 0) {
      throw new ClusterError(
        `temporal-sql-tool ${args[0]} on ${db} failed; its log ends:\n${tail(logFile(paths, 'schema'))}`,
      );
    }
  } finally {
    closeSync(fd);
  }
}

/**
 * The two databases, each set up and migrated to the newest schema embedded in the SQL tool, as admin-tools does; and
 * the ledger store's database, whose tables the store makes itself (`ledger` in cluster.json: its URL and the
 * password file, for IMAGEBATCH_LEDGER and IMAGEBATCH_LEDGER_PASSWORD_FILE).
 */
function createSchema(state, paths, password) {
  for (const [db, schema] of [
    ['temporal', 'temporal'],
    ['temporal_visibility', 'visibility'],
  ]) {
    sqlTool(state, paths, password, db, ['create-database']);
    sqlTool(state, paths, password, db, ['setup-schema', '-v', '0.0']);
    sqlTool(state, paths, password, db, ['update-schema', '--schema-name', `postgresql/v12/${schema}`]);
  }
  sqlTool(state, paths, password, LEDGER_DB, ['create-database']);
  state.ledger = {
    url: `postgres://${DB_USER}@127.0.0.1:${state.ports.postgres}/${LEDGER_DB}`,
    passwordFile: paths.password,
  };
}

async function registerNamespace(state) {
  if (cli(state, ['operator', 'namespace', 'describe', '-n', NAMESPACE]).ok) return;
  const created = cli(state, ['operator', 'namespace', 'create', '-n', NAMESPACE, '--retention', '72h']);
  if (!created.ok && !/already/i.test(created.out)) throw new ClusterError(`namespace create failed: ${created.out}`);
  await waitFor(
    `namespace ${NAMESPACE}`,
    undefined,
    () => cli(state, ['workflow', 'list', '-n', NAMESPACE, '--limit', '1']).ok,
  );
}

// ---------------------------------------------------------------------------------------------- commands

function allProcesses(state) {
  return Object.values(state.processes ?? {});
}

async function up(paths, opts) {
  const previous = readState(paths);
  if (previous) {
    const running = allProcesses(previous).filter((p) => isOurs(p.pid, p.exe));
    if (running.length > 0) {
      throw new ClusterError(
        `a cluster already runs from ${paths.dir} (${previous.address}; ${running.map((p) => p.name).join(', ')}): ` +
          'stop it with --down first',
      );
    }
    await down(paths);
  }
  const tools = serverTools(root);
  const pgBin = postgresBin();
  const cliPath = temporalCli();
  const missing = [
    !existsSync(tools.server) || !existsSync(tools.sqlTool) ? `the Temporal server ${TEMPORAL_SERVER_VERSION}` : '',
    !pgBin ? 'PostgreSQL (initdb, postgres, pg_isready)' : '',
    !cliPath ? 'the Temporal CLI' : '',
  ].filter(Boolean);
  if (missing.length > 0) {
    throw new ClusterError(`missing ${missing.join(', ')}: run \`node scripts/setup.mjs --cluster\` first`);
  }
  mkdirSync(paths.logs, { recursive: true });
  const portNames = [
    'postgres',
    'frontendGrpc',
    'frontendHttp',
    'frontendMembership',
    'historyGrpc',
    'historyMembership',
    'matchingGrpc',
    'matchingMembership',
    'workerGrpc',
    'workerMembership',
  ];
  const picked = await freePorts(portNames.length);
  const ports = Object.fromEntries(portNames.map((n, i) => [n, picked[i]]));
  if (opts.port) ports.frontendGrpc = opts.port;
  const password = randomBytes(18).toString('base64url');
  writeFileSync(paths.password, `${password}\n`, { mode: 0o600 });
  const state = {
    version: TEMPORAL_SERVER_VERSION,
    mode: opts.split ? 'split' : 'single',
    address: `127.0.0.1:${ports.frontendGrpc}`,
    namespace: NAMESPACE,
    configFile: CONFIG_FILE,
    dynamicConfigFile: DYNAMIC_CONFIG_FILE,
    ports,
    pgBin,
    pgUser: isRoot() ? opts.pgUser : undefined,
    pgBase: undefined,
    serverBin: tools.server,
    sqlTool: tools.sqlTool,
    temporalCli: cliPath,
    processes: {},
  };
  writeState(paths, state);
  try {
    log(`PostgreSQL (${pgBin}) on 127.0.0.1:${ports.postgres}${state.pgUser ? `, as ${state.pgUser}` : ''}`);
    initPostgres(state, paths, password);
    writeState(paths, state);
    const pg = startPostgres(state, paths);
    state.processes.postgres = pg;
    writeState(paths, state);
    await waitPostgres(state, pg);
    log(`schema: temporal and temporal_visibility, and the ledger store's database (${elapsed()})`);
    createSchema(state, paths, password);
    writeState(paths, state);
    log(
      `Temporal server ${TEMPORAL_SERVER_VERSION}, ${state.mode === 'split' ? 'one process per service' : 'one process'} (${elapsed()})`,
    );
    // The first process to start writes the cluster metadata record into the new database; processes started at
    // once race to insert it, and the losers exit (duplicate key on cluster_metadata_info). So the first one's gRPC
    // port opens (its record written) before the others start.
    for (const [i, def] of serverProcesses(state.mode).entries()) {
      const proc = startServerProcess(state, paths, def.name, password);
      state.processes[def.name] = proc;
      writeState(paths, state);
      if (i === 0) {
        const port = state.ports[`${def.services[0]}Grpc`];
        await waitFor(`the ${def.services[0]} service on port ${port}`, proc, () => portAccepts(port));
      }
    }
    for (const def of serverProcesses(state.mode)) await waitServerProcess(state, state.processes[def.name]);
    log(`namespace ${NAMESPACE} (${elapsed()})`);
    await registerNamespace(state);
  } catch (err) {
    log('start failed: stopping what was started');
    await down(paths);
    throw err;
  }
  const pids = allProcesses(state)
    .map((p) => `${p.name} ${p.pid}`)
    .join(', ');
  log(`up in ${elapsed()}: frontend ${state.address} (${pids}); logs in ${paths.logs}`);
  log(`stop it with: node scripts/cluster.mjs --down --dir ${paths.dir}`);
  process.stdout.write(`${state.address}\n`);
}

async function down(paths) {
  const state = readState(paths);
  if (!state) {
    log(`no cluster state in ${paths.dir}: nothing to stop`);
    return;
  }
  const servers = allProcesses(state).filter((p) => p.name !== 'postgres');
  await Promise.all(servers.map((p) => stopProcess(p)));
  if (state.processes?.postgres) await stopProcess(state.processes.postgres, 'SIGINT');
  if (state.pgBase) rmSync(state.pgBase, { recursive: true, force: true });
  rmSync(paths.state, { force: true });
  rmSync(paths.password, { force: true });
  log(`stopped; the database is deleted, the logs stay in ${paths.logs}`);
}

function requireProcess(paths, name) {
  const state = readState(paths);
  if (!state) throw new ClusterError(`no cluster state in ${paths.dir}`);
  const proc = state.processes?.[name];
  if (!proc) {
    throw new ClusterError(
      `no process ${name} in this cluster; it has ${Object.keys(state.processes ?? {}).join(', ')}`,
    );
  }
  return { state, proc };
}

async function kill(paths, name) {
  const { proc } = requireProcess(paths, name);
  if (!isOurs(proc.pid, proc.exe)) {
    log(`${name} (pid ${proc.pid}) does not run`);
    return;
  }
  await killProcess(proc);
  log(`${name} (pid ${proc.pid}) killed with SIGKILL`);
}

async function restart(paths, name) {
  const { state, proc } = requireProcess(paths, name);
  await stopProcess(proc, name === 'postgres' ? 'SIGINT' : 'SIGTERM');
  const password = readFileSync(paths.password, 'utf8').trim();
  const next = name === 'postgres' ? startPostgres(state, paths) : startServerProcess(state, paths, name, password);
  state.processes[name] = next;
  writeState(paths, state);
  if (name === 'postgres') await waitPostgres(state, next);
  else await waitServerProcess(state, next);
  log(`${name} runs again (pid ${next.pid}) after ${elapsed()}`);
}

function status(paths) {
  const state = readState(paths);
  if (!state) throw new ClusterError(`no cluster state in ${paths.dir}`);
  for (const p of allProcesses(state)) p.running = isOurs(p.pid, p.exe);
  process.stdout.write(`${JSON.stringify(state, null, 2)}\n`);
}

async function main() {
  const { values } = parseArgs({
    options: {
      split: { type: 'boolean', default: false },
      dir: { type: 'string', default: join(tmpdir(), 'imagebatch-cluster') },
      port: { type: 'string' },
      'pg-user': { type: 'string', default: 'nobody' },
      down: { type: 'boolean', default: false },
      kill: { type: 'string' },
      restart: { type: 'string' },
      status: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    const header = readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\nimport ')[0];
    process.stdout.write(`${header.replace(/^#!.*\n/, '').replace(/^\/\/ ?/gm, '')}\n`);
    return;
  }
  const paths = statePaths(resolve(values.dir));
  const port = values.port === undefined ? undefined : Number(values.port);
  if (port !== undefined && !(Number.isInteger(port) && port > 0 && port < 32768)) {
    throw new ClusterError(
      `--port must be a port number below 32768 (PostgreSQL stores service ports as SMALLINT), not ${values.port}`,
    );
  }
  if (values.down) await down(paths);
  else if (values.kill) await kill(paths, values.kill);
  else if (values.restart) await restart(paths, values.restart);
  else if (values.status) status(paths);
  else await up(paths, { split: values.split, port, pgUser: values['pg-user'] });
}

main().catch((err) => {
  const usage = typeof err?.code === 'string' && err.code.startsWith('ERR_PARSE_ARGS');
  log(err instanceof ClusterError || usage ? `${err.message}${usage ? ' (--help)' : ''}` : (err?.stack ?? String(err)));
  process.exit(1);
});
