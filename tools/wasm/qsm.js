#!/usr/bin/env node
// qsm for Node, on the WebAssembly build: the same `onnx info|run` arguments, output files and
// report as the native qsm, then the wasm heap high-water on stderr.
//   node tools/wasm/qsm.js [--single-thread] onnx run MODEL.onnx --in NAME=X.npy --out DIR [--threads N] [--mem-budget B]
// QSM_WASM_DIR picks a build directory other than build-wasm/mt (or build-wasm/st).
'use strict';
const fs = require('fs');
const path = require('path');

const args = process.argv.slice(2);
let variant = 'mt';
if (args[0] === '--single-thread') {
  variant = 'st';
  args.shift();
}
const dir = process.env.QSM_WASM_DIR || path.join(__dirname, '..', '..', 'build-wasm', variant);
const script = path.join(dir, 'qsm-node.js');
if (!fs.existsSync(script)) {
  process.stderr.write(`qsm.js: ${script} is missing: build it with tools/wasm/build.sh ${variant}\n`);
  process.exit(2);
}
const createQsm = require(script);
createQsm({arguments: args});
