#!/usr/bin/env node
// Reference runner on ONNX Runtime (CPU) for qsmcore tests and benchmarks.
//   node tools/ort/run.js MODEL.onnx --in NAME=FILE.npy [...] --out DIR
//        [--threads N] [--repeat K] [--arena off]
// Reads NumPy .npy (v1/v2/v3 headers, C order; float32/float64/int64/int32/bool/uint8), runs the
// model with intraOpNumThreads=N (default 1), writes DIR/<output>.npy (float32, or int64/bool
// natively) and prints one JSON line: median run time (ms) over K runs and peak RSS (bytes).
// 'onnxruntime-node' resolves from the repository root's node_modules (or NODE_PATH).
'use strict';
const fs = require('fs');
const path = require('path');

function die(msg) { process.stderr.write(`run.js: ${msg}\n`); process.exit(2); }

function loadOrt() {
  const tries = [path.resolve(__dirname, '..', '..', 'node_modules', 'onnxruntime-node'), 'onnxruntime-node'];
  for (const t of tries) { try { return require(t); } catch (e) { if (e.code !== 'MODULE_NOT_FOUND') throw e; } }
  die("cannot load 'onnxruntime-node' (npm install at the repository root, or set NODE_PATH)");
}

const DTYPES = {
  '<f4': ['float32', Float32Array, 4], '<f8': ['float64', Float64Array, 8],
  '<i8': ['int64', BigInt64Array, 8], '<i4': ['int32', Int32Array, 4],
  '|b1': ['bool', Uint8Array, 1], '|u1': ['uint8', Uint8Array, 1], '<u1': ['uint8', Uint8Array, 1],
};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.toString('latin1', 0, 6) !== '\x93NUMPY') die(`${file}: not a .npy file`);
  const major = buf[6];
  let hlen, off;
  if (major === 1) { hlen = buf.readUInt16LE(8); off = 10; }
  else if (major === 2 || major === 3) { hlen = buf.readUInt32LE(8); off = 12; }
  else die(`${file}: unsupported .npy version ${major}`);
  const header = buf.toString(major === 3 ? 'utf8' : 'latin1', off, off + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header);
  const fortran = /'fortran_order':\s*(True|False)/.exec(header);
  const shapeM = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shapeM) die(`${file}: malformed header ${header}`);
  if (fortran[1] === 'True') die(`${file}: fortran_order arrays are not supported (save C order)`);
  const dt = DTYPES[descr[1]];
  if (!dt) die(`${file}: unsupported dtype '${descr[1]}' (float32/float64/int64/int32/bool/uint8, little-endian)`);
  const shape = shapeM[1].split(',').map(s => s.trim()).filter(s => s.length).map(Number);
  const n = shape.reduce((a, b) => a * b, 1);
  const start = off + hlen;
  if (buf.length - start < n * dt[2]) die(`${file}: truncated data`);
  const bytes = new Uint8Array(buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + start + n * dt[2]));
  let data = new dt[1](bytes.buffer);
  let type = dt[0];
  if (type === 'bool') data = Uint8Array.from(data, v => (v ? 1 : 0));
  return { type, data, shape };
}

function writeNpy(file, tensor) {
  let descr, data;
  if (tensor.type === 'int64') { descr = '<i8'; data = tensor.data; }
  else if (tensor.type === 'bool') { descr = '|b1'; data = Uint8Array.from(tensor.data, v => (v ? 1 : 0)); }
  else { descr = '<f4'; data = tensor.data instanceof Float32Array ? tensor.data : Float32Array.from(tensor.data, Number); }
  const shape = tensor.dims.length === 1 ? `(${tensor.dims[0]},)` : `(${tensor.dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  const pad = 64 - ((10 + header.length + 1) % 64);
  header += ' '.repeat(pad % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1'); pre[6] = 1; pre[7] = 0; pre.writeUInt16LE(header.length, 8);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'),
    Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

function parseArgs(argv) {
  const a = { model: null, inputs: [], out: null, threads: 1, repeat: 1, arena: true };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const val = () => { if (i + 1 >= argv.length) die(`${k} needs a value`); return argv[++i]; };
    if (k === '--in') { const v = val(); const eq = v.indexOf('='); if (eq < 1) die(`--in wants NAME=FILE.npy, got ${v}`); a.inputs.push([v.slice(0, eq), v.slice(eq + 1)]); }
    else if (k === '--out') a.out = val();
    else if (k === '--threads') a.threads = parseInt(val(), 10);
    else if (k === '--repeat') a.repeat = parseInt(val(), 10);
    else if (k === '--arena') { const v = val(); if (v !== 'on' && v !== 'off') die('--arena on|off'); a.arena = v === 'on'; }
    else if (k === '-h' || k === '--help') { process.stdout.write(fs.readFileSync(__filename, 'utf8').split('\n').slice(1, 8).join('\n') + '\n'); process.exit(0); }
    else if (k.startsWith('--')) die(`unknown option ${k}`);
    else if (!a.model) a.model = k;
    else die(`unexpected argument ${k}`);
  }
  if (!a.model) die('no model given');
  if (!(a.threads >= 1) || !(a.repeat >= 1)) die('--threads and --repeat must be >= 1');
  return a;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const ort = loadOrt();
  const opts = { executionProviders: ['cpu'], intraOpNumThreads: a.threads, interOpNumThreads: 1,
    graphOptimizationLevel: 'all', enableCpuMemArena: a.arena, enableMemPattern: a.arena };
  const session = await ort.InferenceSession.create(a.model, opts);
  const feeds = {};
  for (const [name, file] of a.inputs) {
    if (!session.inputNames.includes(name)) die(`model has no input '${name}' (inputs: ${session.inputNames.join(', ')})`);
    const t = readNpy(file);
    feeds[name] = new ort.Tensor(t.type, t.data, t.shape);
  }
  const missing = session.inputNames.filter(n => !(n in feeds));
  if (missing.length) die(`missing inputs: ${missing.join(', ')}`);
  const times = [];
  let result;
  for (let r = 0; r < a.repeat; r++) {
    const t0 = process.hrtime.bigint();
    result = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  if (a.out) {
    fs.mkdirSync(a.out, { recursive: true });
    // Same file-name rule as `qsm onnx run`: keep [A-Za-z0-9._-], replace the rest with '_'.
    for (const name of session.outputNames)
      writeNpy(path.join(a.out, `${name.replace(/[^A-Za-z0-9._-]/g, '_') || 'output'}.npy`), result[name]);
  }
  times.sort((x, y) => x - y);
  const mid = times.length >> 1;
  const median = times.length % 2 ? times[mid] : (times[mid - 1] + times[mid]) / 2;
  process.stdout.write(JSON.stringify({
    model: a.model, threads: a.threads, repeat: a.repeat, arena: a.arena, median_ms: median, times_ms: times,
    peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
    outputs: Object.fromEntries(session.outputNames.map(n => [n, result[n].dims])),
  }) + '\n');
}

main().catch(e => { process.stderr.write(`run.js: ${e && e.stack || e}\n`); process.exit(1); });
