// The Temporal server and its SQL tool, built from the Go module proxy and cached in .tools/, for scripts/cluster.mjs
// (a Temporal cluster on PostgreSQL, natively) and `node scripts/setup.mjs --cluster`. Plain Node, no dependencies.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { delimiter, join } from 'node:path';

/**
 * The Temporal server version, in step with the `temporalio/server` and `temporalio/admin-tools` image tags of
 * docker-compose.yml: change the three together. (1.31.3 to 1.31.5 cannot be built from the module proxy: they
 * require go.temporal.io/auto-scaled-workers versions it does not serve.)
 */
export const TEMPORAL_SERVER_VERSION = '1.32.2';

/** The `go` line of go.temporal.io/server's go.mod at that version: an older local Go fetches this toolchain. */
const GO_MIN_VERSION = '1.26.10';

/** Where the server binaries of {@link TEMPORAL_SERVER_VERSION} live, named as in the Temporal images. */
export function serverTools(root) {
  const dir = join(root, '.tools', `temporal-server-${TEMPORAL_SERVER_VERSION}`);
  return { dir, server: join(dir, 'temporal-server'), sqlTool: join(dir, 'temporal-sql-tool') };
}

/** -1, 0 or 1 as dotted version `a` is older than, the same as or newer than `b`. */
function compareVersions(a, b) {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return Math.sign(d);
  }
  return 0;
}

/**
 * Builds `temporal-server` and `temporal-sql-tool` with `go install` from the module proxy, as Temporal's own
 * Makefile does (CGO off, tag `disable_grpc_modules`), into {@link serverTools}().dir; nothing when both are there.
 * 4 to 6 minutes on 2 cores from a cold Go build cache. Throws when there is no Go toolchain or the build fails.
 */
export function buildServerTools(root, log) {
  const tools = serverTools(root);
  if (existsSync(tools.server) && existsSync(tools.sqlTool)) return tools;
  const go = spawnSync('go', ['env', 'GOVERSION'], { encoding: 'utf8' });
  if (go.error || go.status !== 0) {
    throw new Error(
      `building the Temporal server ${TEMPORAL_SERVER_VERSION} needs a Go toolchain (\`go\` on PATH, Go 1.21 or ` +
        'newer; it fetches the Go release the server needs from the module proxy)',
    );
  }
  const local = go.stdout.trim().replace(/^go/, '');
  const toolchain = compareVersions(local, GO_MIN_VERSION) >= 0 ? 'local' : `go${GO_MIN_VERSION}`;
  // Built into a scratch folder, then renamed: a build cut short never looks complete.
  const scratch = join(tools.dir, '.gobin');
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  const mod = `go.temporal.io/server`;
  log(
    `building the Temporal server ${TEMPORAL_SERVER_VERSION} and its SQL tool with go install ` +
      `(Go ${toolchain === 'local' ? local : GO_MIN_VERSION}; 4 to 6 minutes on 2 cores the first time)`,
  );
  const started = Date.now();
  const res = spawnSync(
    'go',
    [
      'install',
      '-trimpath',
      '-tags',
      'disable_grpc_modules',
      `${mod}/cmd/server@v${TEMPORAL_SERVER_VERSION}`,
      `${mod}/cmd/tools/sql@v${TEMPORAL_SERVER_VERSION}`,
    ],
    {
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...process.env, GOBIN: scratch, CGO_ENABLED: '0', GOTOOLCHAIN: toolchain },
    },
  );
  if (res.error || res.status !== 0) {
    throw new Error(`go install of ${mod}@v${TEMPORAL_SERVER_VERSION} failed (${res.error?.message ?? res.status})`);
  }
  const built = readdirSync(scratch);
  if (!built.includes('server') || !built.includes('sql')) {
    throw new Error(`go install left ${built.join(', ') || 'nothing'} in ${scratch}, not server and sql`);
  }
  renameSync(join(scratch, 'sql'), tools.sqlTool);
  renameSync(join(scratch, 'server'), tools.server);
  rmSync(scratch, { recursive: true, force: true });
  log(`built ${tools.dir} in ${Math.round((Date.now() - started) / 1000)} s`);
  return tools;
}

/** The first folder of `dirs` that holds every one of `names`. */
function folderWith(dirs, names) {
  return dirs.find((d) => d && names.every((n) => existsSync(join(d, n))));
}

/**
 * The folder of PostgreSQL's server programs (initdb, postgres, pg_isready): PATH first, else Debian's
 * /usr/lib/postgresql/<major>/bin, newest first; undefined when there is none.
 */
export function postgresBin(env = process.env) {
  const names = ['initdb', 'postgres', 'pg_isready'];
  const fromPath = folderWith((env.PATH ?? '').split(delimiter), names);
  if (fromPath) return fromPath;
  const debian = '/usr/lib/postgresql';
  if (!existsSync(debian)) return undefined;
  const majors = readdirSync(debian)
    .filter((v) => /^\d+$/.test(v))
    .sort((a, b) => Number(b) - Number(a));
  return folderWith(
    majors.map((v) => join(debian, v, 'bin')),
    names,
  );
}
