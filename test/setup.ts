import { DefaultLogger, Runtime } from '@temporalio/worker';

// One quiet Temporal runtime per test process: warnings and errors only. A unit test process runs several files
// (vitest.config.mts: isolate off), and the SDK keeps its runtime across them: install it once.
if (!Runtime._instance) Runtime.install({ logger: new DefaultLogger('WARN') });
