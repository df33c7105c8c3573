#!/usr/bin/env node
// The second half of `npm run build`, after tsc: bundles the built workflow code (dist/workflows) with webpack, as
// the Temporal SDK documents (bundleWorkflowCode at build time), into the bundles the built worker loads at start
// (WORKFLOW_BUNDLES in src/worker.ts: one per data converter). Writes dist/workflow-bundles.json, the manifest the
// worker checks, and skips the work when the bundles of dist/ are already the current build's.
//
// The bundles are the same bytes whatever folder the build runs in (scripts/check-artifact.mjs compares the
// Docker build's dist/ with this checkout's): webpack names modules relative to the package, does not follow
// symbolic links (check-artifact links node_modules, and runs this with NODE_PRESERVE_SYMLINKS=1 so that the
// SDK's loaders are found through the link too), and the folder's path is taken out of the source map.
import { Buffer } from 'node:buffer';
import { readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const dist = path.join(root, 'dist');
const require = createRequire(path.join(root, 'package.json'));
const { BUNDLE_MANIFEST, WORKFLOW_BUNDLES, bundleManifest, bundlesAreFresh } = require('./dist/worker.js');

function log(msg) {
  process.stderr.write(`bundle-workflows: ${msg}\n`);
}

/** `code` with its inline source map naming files relative to the package (the SDK's entry point quotes paths). */
function withRelativeSourceMap(code, file) {
  const marker = '//# sourceMappingURL=data:application/json;charset=utf-8;base64,';
  const at = code.lastIndexOf(marker);
  if (at < 0) return code;
  const map = JSON.parse(Buffer.from(code.slice(at + marker.length), 'base64').toString());
  const json = JSON.stringify({ ...map, file })
    .replaceAll(`${root}${path.sep}`, '')
    .replaceAll(root, '.');
  return `${code.slice(0, at)}${marker}${Buffer.from(json).toString('base64')}`;
}

if (bundlesAreFresh(dist, true)) {
  log('dist/ workflow bundles are up to date');
} else {
  const { bundleWorkflowCode } = require('@temporalio/worker');
  const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: console.error };
  const inputs = new Set();
  const recordInputs = {
    apply: (compiler) =>
      compiler.hooks.done.tap('imagebatch-inputs', (stats) => {
        // Every file read, source maps and the sources they quote too; not the SDK's entry point (in memory).
        for (const f of stats.compilation.fileDependencies)
          if (statSync(f, { throwIfNoEntry: false })?.isFile()) inputs.add(f);
      }),
  };
  for (const variant of WORKFLOW_BUNDLES) {
    const t0 = Date.now();
    const { code } = await bundleWorkflowCode({
      workflowsPath: path.join(dist, 'workflows'),
      ...(variant.failureConverterPath ? { failureConverterPath: variant.failureConverterPath } : {}),
      logger: quiet,
      webpackConfigHook: (config) => ({
        ...config,
        context: root,
        // Lines only: a column of the SDK's generated entry point depends on the length of this folder's path.
        devtool: 'inline-cheap-module-source-map',
        resolve: { ...config.resolve, symlinks: false },
        resolveLoader: { ...config.resolveLoader, symlinks: false },
        output: { ...config.output, devtoolModuleFilenameTemplate: 'webpack://imagebatch/[resource-path]' },
        plugins: [...(config.plugins ?? []), recordInputs],
      }),
    });
    writeFileSync(path.join(dist, variant.file), withRelativeSourceMap(code, variant.file));
    log(`dist/${variant.file} (${Math.round(code.length / 1024)} KiB, ${Date.now() - t0} ms)`);
  }
  writeFileSync(path.join(dist, BUNDLE_MANIFEST), `${JSON.stringify(bundleManifest(dist, inputs), null, 2)}\n`);
  // The bundles that workers used to write at start (dist/.workflow-bundle-<hash>.js), from before this script.
  for (const f of readdirSync(dist)) if (f.startsWith('.workflow-bundle-')) rmSync(path.join(dist, f), { force: true });
}
