import { defineConfig } from 'vitest/config';

/**
 * Three kinds of test, by what a test file starts (`npm run test:unit`, `test:integration`, `test:e2e`; `vitest run`
 * runs them all):
 *
 * - unit (projects unit-alone and unit-shared): no Temporal server (neither the time-skipping test server nor the
 *   dev server), no `imagebatch` command or worker as a child process (so no build of dist/), no browser, no
 *   Docker. Servers in the test's own process on loopback (the simulator, stub HTTP servers, the codec server) and
 *   small helper processes (the ledger's claim race) are fine: they start in milliseconds. Every file not listed
 *   below is a unit test; the helpers that start a Temporal server or build dist/ refuse to run in the unit projects
 *   (IMAGEBATCH_TEST_PROJECT).
 * - integration: starts a Temporal server; the workers run in the test's process or as worker processes.
 * - e2e: runs the product as a user does: the `imagebatch` command, the built artefact, Docker, a browser, the
 *   chaos run, and test/e2e.
 */
const integration = [
  'test/integration/**/*.test.ts',
  'test/smoke.test.ts',
  'test/activities/durable-retry.test.ts',
  'test/activities/heartbeat-dev-server.test.ts',
  'test/activities/row-lookup.test.ts',
  'test/metrics/metrics.test.ts',
  'test/workflows/batch-deadline.test.ts',
  'test/workflows/batch-endings.test.ts',
  'test/workflows/batch-workflow.test.ts',
  'test/workflows/stop-loss-batch.test.ts',
  'test/workflows/prompt-workflow.test.ts',
  'test/workflows/unreported-rows.test.ts',
  'test/ledger/store-postgres.test.ts',
];

/**
 * Unit test files that need a process of their own, since the other unit files share their processes and modules:
 * they replace modules (`vi.mock`) or measure the process's memory. Vitest runs projects in the order of their names:
 * unit-alone first, so that its long files do not trail at the end.
 */
const unitIsolated = [
  'test/cli/doctor.test.ts',
  'test/cli/help.test.ts',
  'test/cli/options.test.ts',
  'test/cli/terminal-text.test.ts',
  'test/batch/large-file.test.ts',
  'test/fuzz/csv-limits.test.ts',
];

const e2e = [
  'test/e2e/**/*.test.ts',
  'test/deploy/**/*.test.ts',
  'test/chaos/chaos.test.ts',
  'test/cli/batch.test.ts',
  'test/cli/batch-identity.test.ts',
  'test/cli/demo.test.ts',
  'test/cli/files-as-people-have-them.test.ts',
  'test/cli/gallery-browser.test.ts',
  'test/cli/identity-by-content.test.ts',
  'test/cli/offline.test.ts',
  'test/cli/reconcile.test.ts',
  'test/cli/rerun-after-retention.test.ts',
  'test/cli/results-ledger.test.ts',
  'test/cli/spend-cap-price-unknown.test.ts',
  'test/cli/run-service-check.test.ts',
  'test/cli/run-outcomes.test.ts',
  'test/cli/unknown-settings.test.ts',
  'test/security/codec.test.ts',
  'test/security/codec-server.test.ts',
  'test/security/codec-server-access.test.ts',
  'test/security/secret-scan.test.ts',
];

/**
 * The cluster test brings up a Temporal cluster on PostgreSQL (scripts/cluster.mjs, built by `node scripts/setup.mjs
 * --cluster`): only `npm run test:cluster` runs it, which sets IMAGEBATCH_TEST_CLUSTER; a plain `vitest run` does not.
 */
const cluster = ['test/cluster/**/*.test.ts'];
const clusterSelected = process.env.IMAGEBATCH_TEST_CLUSTER === '1';

export default defineConfig({
  test: {
    setupFiles: ['test/setup.ts'],
    // Temporal's native bridge and child servers are happiest in separate processes.
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    teardownTimeout: 30_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'unit-shared',
          include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
          exclude: [...integration, ...e2e, ...unitIsolated, ...cluster],
          env: { IMAGEBATCH_TEST_PROJECT: 'unit' },
          // Files share a process and its loaded modules: the SDK, undici and fast-check load once per process
          // rather than once per file, which halves the CPU time of the unit tests.
          isolate: false,
        },
      },
      {
        extends: true,
        test: { name: 'unit-alone', include: unitIsolated, env: { IMAGEBATCH_TEST_PROJECT: 'unit' } },
      },
      { extends: true, test: { name: 'integration', include: integration } },
      { extends: true, test: { name: 'e2e', include: e2e } },
      ...(clusterSelected ? [{ extends: true as const, test: { name: 'cluster', include: cluster } }] : []),
    ],
  },
});
