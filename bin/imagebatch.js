#!/usr/bin/env node
'use strict';
// Entry point: the only place that sets the process's exit status. Run `node scripts/setup.mjs` first
// (the README's commands do) so that dist/ exists.
const { main } = require('../dist/cli/main.js');

main(process.argv).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`imagebatch: ${err && err.message ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
