// Preloaded into a worker (`node -r`) by bench/memory.ts, in its main thread and in each of its worker threads (the
// SDK runs workflows in one): every HEAP_PROBE_EVERY_MS, a full GC (the worker runs with --expose-gc), then one JSON
// line per thread appended to HEAP_PROBE_OUT: its V8 heap, and the process's resident set. A heap snapshot of each
// thread at the samples HEAP_PROBE_SNAPSHOTS lists (1-based, comma-separated), beside that file.
'use strict';
const { appendFileSync } = require('node:fs');
const v8 = require('node:v8');
const { threadId } = require('node:worker_threads');
const { setInterval } = require('node:timers');

const out = process.env.HEAP_PROBE_OUT;
if (out) {
  const every = Number(process.env.HEAP_PROBE_EVERY_MS || 5000);
  const snapshots = new Set((process.env.HEAP_PROBE_SNAPSHOTS || '').split(',').filter(Boolean).map(Number));
  const mb = (bytes) => Math.round((bytes / 1048576) * 10) / 10;
  let n = 0;
  setInterval(() => {
    n += 1;
    if (typeof globalThis.gc === 'function') globalThis.gc();
    const m = process.memoryUsage();
    const line = {
      thread: threadId,
      at: Date.now(),
      rssMb: mb(m.rss),
      heapUsedMb: mb(m.heapUsed),
      heapTotalMb: mb(m.heapTotal),
      externalMb: mb(m.external),
      arrayBuffersMb: mb(m.arrayBuffers),
      contexts: v8.getHeapStatistics().number_of_native_contexts,
    };
    appendFileSync(out, `${JSON.stringify(line)}\n`);
    if (snapshots.has(n)) v8.writeHeapSnapshot(`${out}.thread${threadId}.${n}.heapsnapshot`);
  }, every).unref();
}
