import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { assertApiKeyFormat } from '../../src/api/api-key';
import { durationMs } from '../../src/config/duration';
import { loadTemporalConfig } from '../../src/config/temporal-config';
import { DEMO_API_KEY, simulatorConfigSchema } from '../../src/simulator/config';
import { REPO_ROOT } from '../helpers/dist';

/**
 * docker-compose.yml and the Dockerfile, checked without a Docker engine (none runs on these machines):
 * `docker-compose config` (Debian's docker-compose 1.29, installed by `node scripts/setup.mjs --compose`)
 * validates the file against the Compose schema and resolves it; the tests then read the resolved services.
 */

interface Healthcheck {
  test?: string[];
  disable?: boolean;
}
interface Service {
  image?: string;
  build?: { context: string };
  container_name?: string;
  hostname?: string;
  ports?: unknown[];
  command?: string[];
  entrypoint?: string[];
  environment?: Record<string, string>;
  stop_grace_period?: string;
  secrets?: { source: string; target?: string }[] | string[];
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: Healthcheck;
  init?: boolean;
  profiles?: string[];
}
interface ComposeConfig {
  services: Record<string, Service>;
  secrets?: Record<string, { file?: string }>;
  volumes?: Record<string, unknown>;
}

const composeBinary = process.env.IMAGEBATCH_DOCKER_COMPOSE || 'docker-compose';
const scratch = mkdtempSync(path.join(os.tmpdir(), 'imagebatch-compose-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Runs docker-compose in the repository with a clean environment (so no variable of this shell changes the file). */
function compose(...args: string[]): string {
  return composeWith({}, ...args);
}

/** {@link compose} with these variables set. */
function composeWith(vars: Record<string, string>, ...args: string[]): string {
  const res = spawnSync(composeBinary, ['-f', 'docker-compose.yml', ...args], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', HOME: scratch, ...vars },
    timeout: 60_000,
  });
  if (res.error && (res.error as NodeJS.ErrnoException).code === 'ENOENT') {
    throw new Error(
      `${composeBinary} is not installed, so docker-compose.yml cannot be validated. Install Debian's package ` +
        '(`node scripts/setup.mjs --compose` does it as root; or `apt-get install docker-compose`), or set ' +
        'IMAGEBATCH_DOCKER_COMPOSE to a docker-compose binary.',
    );
  }
  if (res.error) throw res.error;
  expect(res.stderr, `docker-compose ${args.join(' ')} failed`).not.toMatch(/invalid|error/i);
  expect(res.status, `docker-compose ${args.join(' ')}:\n${res.stderr}`).toBe(0);
  return res.stdout;
}

/** YAML to JSON with PyYAML, which Debian's docker-compose depends on (this project has no YAML parser). */
function yamlToJson(yaml: string): unknown {
  const res = spawnSync('python3', ['-c', 'import sys, json, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)'], {
    input: yaml,
    encoding: 'utf8',
    timeout: 30_000,
  });
  expect(res.status, `python3 could not read the YAML: ${res.stderr}`).toBe(0);
  return JSON.parse(res.stdout);
}

/** The Dockerfile's instructions by stage, continuation lines joined, comments dropped. */
function dockerfileStages(): { name: string; from: string; instructions: { op: string; args: string }[] }[] {
  const text = readFileSync(path.join(REPO_ROOT, 'Dockerfile'), 'utf8').replace(/\\\n/g, ' ');
  const args = new Map<string, string>();
  const stages: { name: string; from: string; instructions: { op: string; args: string }[] }[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*([A-Z]+)\s+(.*)$/.exec(line);
    if (!m || line.trim().startsWith('#')) continue;
    const [, op = '', rest = ''] = m;
    if (op === 'ARG' && stages.length === 0) {
      const [k = '', v = ''] = rest.split('=');
      args.set(k.trim(), v.trim());
    } else if (op === 'FROM') {
      const [image = '', , name = ''] = rest.split(/\s+/);
      stages.push({ name, from: image.replace(/^\$\{(\w+)\}$/, (_, k: string) => args.get(k) ?? k), instructions: [] });
    } else stages.at(-1)?.instructions.push({ op, args: rest.trim() });
  }
  return stages;
}

let resolved: ComposeConfig | undefined;
/** The resolved file, read once; without docker-compose every test of it fails, saying how to install it. */
function composeConfig(): ComposeConfig {
  return (resolved ??= yamlToJson(compose('config')) as ComposeConfig);
}

const service = (name: string): Service => {
  const s = composeConfig().services[name];
  if (!s) throw new Error(`docker-compose.yml has no service ${name}`);
  return s;
};

/** The host path a service's bind mount gives at `target` (a file, or a file under a mounted folder), or undefined. */
function hostPathOf(s: Service, target: string): string | undefined {
  for (const v of s.volumes ?? []) {
    const [source = '', at = ''] = v.split(':');
    if (!path.isAbsolute(source)) continue; // a named volume
    if (target === at) return source;
    if (target.startsWith(`${at}/`)) return path.join(source, target.slice(at.length + 1));
  }
  return undefined;
}

/** The version of an image reference (`temporalio/server:1.31.5` gives 1.31.5). */
const versionOf = (image: string | undefined) => image?.split(':').at(-1);

describe('docker-compose.yml (validated by docker-compose config)', { timeout: 90_000 }, () => {
  it('has PostgreSQL, the Temporal server with its schema and namespace jobs, the UI, the simulator, worker and CLI', () => {
    const expected = [
      'postgresql',
      'temporal-schema',
      'temporal',
      'temporal-namespace',
      'temporal-ui',
      'simulator',
      'worker',
      'cli',
    ];
    expect(Object.keys(composeConfig().services).sort()).toEqual([...expected].sort());
    expect(compose('config', '--services').trim().split('\n').sort()).toEqual([...expected].sort());
  });

  it('pins every image by version (no latest, no bare major)', () => {
    for (const [name, s] of Object.entries(composeConfig().services)) {
      if (s.build) {
        expect(s.build.context, name).toBe(REPO_ROOT);
        continue;
      }
      expect(s.image, name).toMatch(/^[\w./-]+:\d+\.\d+(\.\d+)?(-[\w.]+)?$/);
    }
    expect(service('temporal-schema').image).toBe(service('temporal-namespace').image);
  });

  it("the Temporal server and admin-tools are one version, the native cluster's (scripts/cluster-lib.mjs)", () => {
    const server = service('temporal').image;
    // 1.31.0 is not served by the Go module proxy and 1.31.3-1.31.5 cannot be built from it (scripts/cluster-lib.mjs).
    expect(server).toMatch(/^temporalio\/server:\d+\.\d+\.\d+$/);
    expect(server).not.toMatch(/^temporalio\/server:1\.31\.[0-5]$/);
    expect(service('temporal-schema').image).toBe(`temporalio/admin-tools:${versionOf(server)}`);
    const native = /TEMPORAL_SERVER_VERSION = '([\d.]+)'/.exec(
      readFileSync(path.join(REPO_ROOT, 'scripts', 'cluster-lib.mjs'), 'utf8'),
    )?.[1];
    expect(native).toBe(versionOf(server));
  });

  it('the Temporal server gets its settings and dynamic config file from deploy/, as the native cluster does', () => {
    const temporal = service('temporal');
    const env = temporal.environment ?? {};
    // Without a dynamic config file temporalio/server (not auto-setup) exits at start.
    expect(env.DYNAMIC_CONFIG_FILE_PATH).toBe('/etc/temporal/config/dynamicconfig/imagebatch.yaml');
    expect(temporal.volumes).toContain(
      `${path.join(REPO_ROOT, 'deploy', 'dynamicconfig')}:/etc/temporal/config/dynamicconfig:ro`,
    );
    const dynamicConfig = hostPathOf(temporal, env.DYNAMIC_CONFIG_FILE_PATH!);
    expect(dynamicConfig).toBe(path.join(REPO_ROOT, 'deploy', 'dynamicconfig', 'imagebatch.yaml'));
    // Workflow ids up to PostgreSQL's VARCHAR(255), refused beyond it at the front end.
    const limits = yamlToJson(readFileSync(dynamicConfig!, 'utf8')) as Record<string, { value: unknown }[]>;
    expect(limits['limit.maxIDLength']?.map((c) => c.value)).toEqual([255]);
    const serverConfig = hostPathOf(temporal, env.TEMPORAL_SERVER_CONFIG_FILE_PATH ?? '');
    expect(serverConfig).toBe(path.join(REPO_ROOT, 'deploy', 'temporal-cluster.yaml'));
    expect(readFileSync(serverConfig!, 'utf8')).toContain('DYNAMIC_CONFIG_FILE_PATH');
  });

  it('health checks on postgres, temporal, the UI, the simulator and the worker; start-up waits on them', () => {
    for (const name of ['postgresql', 'temporal', 'temporal-ui', 'simulator', 'worker']) {
      const test = service(name).healthcheck?.test ?? [];
      expect(test.length, name).toBeGreaterThan(1);
      expect(test[0], name).toMatch(/^CMD(-SHELL)?$/);
    }
    expect(service('worker').healthcheck?.test).toEqual(['CMD', 'node', '/app/bin/imagebatch.js', 'healthcheck']);
    const waits = (name: string) =>
      Object.fromEntries(Object.entries(service(name).depends_on ?? {}).map(([k, v]) => [k, v.condition]));
    // Over TCP: during its first start PostgreSQL runs a set-up server on the unix socket only.
    expect(service('postgresql').healthcheck?.test?.[1]).toMatch(/^pg_isready -h 127\.0\.0\.1 /);
    expect(waits('temporal-schema')).toEqual({ postgresql: 'service_healthy' });
    expect(waits('temporal')).toEqual({ 'temporal-schema': 'service_completed_successfully' });
    expect(waits('temporal-namespace')).toEqual({ temporal: 'service_healthy' });
    expect(waits('temporal-ui')).toEqual({ temporal: 'service_healthy' });
    expect(waits('worker')).toEqual({
      'temporal-namespace': 'service_completed_successfully',
      simulator: 'service_healthy',
    });
  });

  it('the worker scales (--scale worker=N): no container name, host name or host port', () => {
    const worker = service('worker');
    expect(worker.container_name).toBeUndefined();
    expect(worker.hostname).toBeUndefined();
    expect(worker.ports).toBeUndefined();
    expect(worker.command).toEqual(['worker']);
    expect(worker.init).toBe(true);
    expect(worker.environment).toMatchObject({ TEMPORAL_ADDRESS: 'temporal:7233', TEMPORAL_TASK_QUEUE: 'imagebatch' });
  });

  it("Docker's SIGKILL comes at least 5 s after the worker's own shutdown grace (IMAGEBATCH_SHUTDOWN_GRACE) ends", () => {
    const worker = service('worker');
    const stopGraceMs = durationMs(worker.stop_grace_period ?? '10s'); // Docker's default: 10 s
    const workerGraceMs = loadTemporalConfig({ ...worker.environment, HOME: scratch }).shutdownGraceMs;
    expect(worker.environment?.IMAGEBATCH_SHUTDOWN_GRACE).toBeDefined();
    expect(workerGraceMs).toBeGreaterThan(10_000);
    expect(stopGraceMs - workerGraceMs).toBeGreaterThanOrEqual(5_000);
  });

  it('the database password is a secret file, in no environment variable', () => {
    const secretFile = composeConfig().secrets?.temporal_db_password?.file;
    expect(secretFile).toBe(path.join(REPO_ROOT, 'deploy', 'secrets', 'temporal-db-password'));
    expect(readFileSync(secretFile!, 'utf8').trim()).not.toBe('');
    const holders = Object.entries(composeConfig().services)
      .filter(([, s]) =>
        (s.secrets ?? []).some((x) => (typeof x === 'string' ? x : x.source) === 'temporal_db_password'),
      )
      .map(([name]) => name);
    // The workers and the CLI read it for the ledger store's database (IMAGEBATCH_LEDGER_PASSWORD_FILE).
    expect(holders.sort()).toEqual(['cli', 'postgresql', 'temporal', 'temporal-schema', 'worker']);
    expect(service('postgresql').environment?.POSTGRES_PASSWORD_FILE).toBe('/run/secrets/temporal_db_password');
    for (const [name, s] of Object.entries(composeConfig().services)) {
      expect(Object.keys(s.environment ?? {}), name).not.toContainEqual(
        expect.stringMatching(/^(POSTGRES_PASSWORD|POSTGRES_PWD|SQL_PASSWORD|TEMPORAL_DB_PASSWORD)$/),
      );
    }
    // A password of one's own: named by its file, never in the resolved file.
    const own = path.join(scratch, 'db-password');
    writeFileSync(own, 'Own-db-password-7f3a\n');
    const withOwn = composeWith({ TEMPORAL_DB_PASSWORD_SECRET_FILE: own }, 'config');
    expect(withOwn).not.toContain('Own-db-password-7f3a');
    expect((yamlToJson(withOwn) as ComposeConfig).secrets?.temporal_db_password?.file).toBe(own);
    // temporalio/server and temporal-sql-tool read the password from a variable only: set from the file inside.
    for (const name of ['temporal', 'temporal-schema']) {
      expect(service(name).entrypoint, name).toEqual(['/bin/sh', '-c']);
      expect(service(name).command?.[0], name).toContain('"$$(cat /run/secrets/temporal_db_password)"');
    }
    expect(service('temporal').command?.[0]).toMatch(/\nexec \/etc\/temporal\/entrypoint\.sh\n/);
  });

  it('the image service key reaches the worker only, as a secret file, never as a variable', () => {
    const secretFile = composeConfig().secrets?.imagegen_api_key?.file;
    expect(secretFile).toBe(path.join(REPO_ROOT, 'deploy', 'secrets', 'simulator-api-key'));
    const worker = service('worker');
    expect((worker.secrets ?? []).map((s) => (typeof s === 'string' ? s : s.source))).toEqual([
      'imagegen_api_key',
      'temporal_db_password',
    ]);
    expect(worker.environment?.IMAGEGEN_API_KEY_FILE).toBe('/run/secrets/imagegen_api_key');
    for (const [name, s] of Object.entries(composeConfig().services)) {
      expect(Object.keys(s.environment ?? {}), name).not.toContain('IMAGEGEN_API_KEY');
      if (name !== 'worker') expect(JSON.stringify(s.secrets ?? []), name).not.toContain('imagegen_api_key');
    }
    // The default secret is the simulator's demo key, in the format the worker checks at start.
    const key = readFileSync(secretFile!, 'utf8').replace(/\n$/, '');
    expect(key).toBe(DEMO_API_KEY);
    expect(() => assertApiKeyFormat(key)).not.toThrow();
  });

  it('the batch folder is one named volume mounted at the same path in the worker and the CLI', () => {
    expect(Object.keys(composeConfig().volumes ?? {})).toContain('batches');
    expect(service('worker').volumes).toContain('batches:/batches:rw');
    expect(service('cli').volumes).toContain('batches:/batches:rw');
    expect(service('cli').profiles).toEqual(['cli']);
  });

  it('the workers and the CLI share one ledger store: a database of its own, its password the secret file', () => {
    const secretNames = (name: string) =>
      (service(name).secrets ?? []).map((s) => (typeof s === 'string' ? s : s.source));
    for (const name of ['worker', 'cli']) {
      const env = service(name).environment ?? {};
      expect(env.IMAGEBATCH_LEDGER, name).toBe('postgres://temporal@postgresql:5432/imagebatch_ledger');
      expect(env.IMAGEBATCH_LEDGER_PASSWORD_FILE, name).toBe('/run/secrets/temporal_db_password');
      expect(secretNames(name), name).toContain('temporal_db_password');
    }
    // The CLI never gets the image service's key.
    expect(secretNames('cli')).toEqual(['temporal_db_password']);
    // The schema job makes the ledger's database beside Temporal's two.
    expect(service('temporal-schema').command?.[0]).toContain('--db imagebatch_ledger create');
  });

  it("the simulator listens on its service name and ports, where the worker's base URL points", () => {
    const mounted = (service('simulator').volumes ?? []).find((v) => v.endsWith(':/etc/imagebatch/simulator.json:ro'));
    expect(mounted).toBeDefined();
    const simConfig = simulatorConfigSchema.parse(JSON.parse(readFileSync(mounted!.split(':')[0]!, 'utf8')));
    expect(simConfig.host).toBe('simulator');
    const baseUrl = new URL(service('worker').environment?.IMAGEGEN_BASE_URL ?? '');
    expect([baseUrl.hostname, Number(baseUrl.port)]).toEqual(['simulator', simConfig.port]);
    expect(simConfig.stateFile?.startsWith('/var/lib/imagebatch/')).toBe(true);
    expect(service('simulator').volumes).toContain('simulator-state:/var/lib/imagebatch:rw');
    expect(service('simulator').healthcheck?.test?.join(' ')).toContain(`http://simulator:${simConfig.port}/`);
  });
});

describe('Dockerfile', () => {
  const stages = dockerfileStages();
  const runtime = stages.at(-1)!;
  const ops = (op: string) => runtime.instructions.filter((i) => i.op === op).map((i) => i.args);

  it('is multi-stage on a pinned Node image', () => {
    expect(stages.map((s) => s.name)).toEqual(['build', 'runtime']);
    for (const s of stages) expect(s.from).toMatch(/^node:\d+\.\d+\.\d+-bookworm-slim$/);
  });

  it('runs as the unprivileged node user, with a health check and the CLI as entry point', () => {
    expect(ops('USER')).toEqual(['node']);
    const userAt = runtime.instructions.findIndex((i) => i.op === 'USER');
    const lastRunAt = runtime.instructions.map((i) => i.op).lastIndexOf('RUN');
    expect(userAt).toBeGreaterThan(lastRunAt);
    expect(ops('ENTRYPOINT')).toEqual(['["node", "/app/bin/imagebatch.js"]']);
    expect(ops('CMD')).toEqual(['["worker"]']);
    expect(ops('HEALTHCHECK')).toHaveLength(1);
    expect(ops('HEALTHCHECK')[0]).toContain('"/app/bin/imagebatch.js", "healthcheck"');
  });

  it('the runtime stage has production dependencies only and takes only dist/ from the build', () => {
    expect(ops('RUN').filter((r) => /^npm (ci|install)\b/.test(r))).toEqual([
      expect.stringMatching(/^npm ci .*--omit=dev/) as string,
    ]);
    const copies = ops('COPY');
    expect(copies.filter((c) => c.startsWith('--from='))).toEqual(['--from=build /app/dist ./dist']);
    expect(copies.some((c) => /\b(src|node_modules|test)\b/.test(c))).toBe(false);
  });

  it('.dockerignore lets in only what the Dockerfile copies', () => {
    const ignore = readFileSync(path.join(REPO_ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .filter((l) => l.trim() && !l.startsWith('#'));
    expect(ignore[0]).toBe('*');
    const allowed = ignore.slice(1).map((l) => l.replace(/^!/, '').replace(/\/$/, ''));
    const copied = stages
      .flatMap((s) => s.instructions.filter((i) => i.op === 'COPY' && !i.args.startsWith('--from=')))
      .flatMap((i) => i.args.split(/\s+/).slice(0, -1));
    expect(allowed.sort()).toEqual([...new Set(copied)].sort());
    for (const p of allowed) expect(existsSync(path.join(REPO_ROOT, p)), p).toBe(true);
  });
});
