/**
 * Fails a test of the unit project that would start `what`: unit tests start no Temporal server and build no dist/
 * (the rule is in vitest.config.mts, which sets IMAGEBATCH_TEST_PROJECT for its unit project).
 */
export function refuseInUnitProject(what: string): void {
  if (process.env.IMAGEBATCH_TEST_PROJECT === 'unit') {
    throw new Error(`a unit test starts ${what}: list its file under integration or e2e in vitest.config.mts`);
  }
}
