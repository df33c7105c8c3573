import { DefaultLogger, Runtime } from '@temporalio/worker';

// One quiet Temporal runtime per test process: warnings and errors only. A unit test process runs several files
// (vitest.config.mts: isolate off), and the SDK keeps its runtime across them: install it once.
// In-process CLI runs (main(argv, io)) never start local mode's server by accident: a test that means it says so.
process.env.IMAGEBATCH_LOCAL ??= 'off';

if (!Runtime._instance) Runtime.install({ logger: new DefaultLogger('WARN') });
