#!/usr/bin/env node
// A registry network's run through the web page's C API (src/wasm/web_api.cpp) under Node, on
// volumes read from files: the request the page's Worker sends (web/worker.js), so a tiled run
// here is the page's tiled run (qsm_web_tile_plan, then qsm_web_run with a tile, i.e. `qsm run
// --tile`'s path), and its heap high-water can be measured and compared with the native run's
// (bench/tile_budget.sh, tests/wasm/web_tiled_run_test.js; issue #54).
//
//   node tools/wasm/web_run.js NETWORK --model FILE.onnx --field FILE [--mask FILE] [--tile CORE,HALO]
//        [--threads N] [--budget BYTES] [--unit ppm|hz|rad] [--b0 T] [--te S] [--out DIR] [--single-thread]
//
// FILE: NIfTI-1 (.nii or .nii.gz; float32, float64, int16 or uint8 voxels, scl_slope applied), or
// .npy (float32/float64, 3-D; fortran_order True with shape (x, y, z), or C order with shape
// (z, y, x): x fastest either way). Voxel sizes and the sform (sform_code > 0) come from a NIfTI
// header, 1 mm without one. --out DIR: each output as DIR/NAME.npy (float32, fortran order,
// shape (x, y, z)). Prints one JSON object: the plan (a tiled run only), the run's reply, and the
// heap: the linear memory's size once the module is ready (`start_bytes`: static data, stacks,
// the runtime's own allocations; no call made yet) and after the run (`end_bytes`; the memory
// never shrinks, so this is the high-water), and `growth_bytes` = end − start, what `qsm measure
// --wasm` measures for a whole run (docs/wasm.md); also the program break (sbrk(0), where
// malloc's heap ends) when the module is ready (`break_start_bytes`) and its rise over the run
// (`break_rise_bytes`): the heap the run took, without the free room the memory had at the start
// (7.2 MB in the pthread build), which hides that much of it from `growth_bytes`. QSM_WASM_DIR:
// the build folder (default build-wasm/mt, or build-wasm/st with --single-thread). Exit status
// 1 on an error reply.
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

function usage(message) {
  process.stderr.write(`web_run.js: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const o = {network: null, threads: 2, variant: 'mt'};
  const valued = ['--model', '--field', '--mask', '--tile', '--threads', '--budget', '--unit', '--b0', '--te', '--out'];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--single-thread')
      o.variant = 'st';
    else if (valued.includes(a)) {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      o[a.slice(2)] = argv[++i];
    } else if (a.startsWith('--'))
      usage(`unknown option ${a}`);
    else if (o.network === null)
      o.network = a;
    else
      usage(`one network only (also got ${a})`);
  }
  if (!o.network || !o.model || !o.field) usage('NETWORK, --model and --field are required');
  return o;
}

// ---- volumes from files -------------------------------------------------------------------

function readNifti(file) {
  let b = fs.readFileSync(file);
  if (b[0] === 0x1f && b[1] === 0x8b) b = zlib.gunzipSync(b);
  if (b.readInt32LE(0) !== 348) throw new Error(`${file}: not a little-endian NIfTI-1 file`);
  const dims = [b.readInt16LE(42), b.readInt16LE(44), b.readInt16LE(46)];
  if (b.readInt16LE(40) > 3 && b.readInt16LE(48) > 1) throw new Error(`${file}: more than one volume`);
  const type = b.readInt16LE(70);
  const offset = Math.round(b.readFloatLE(108));
  const slope = b.readFloatLE(112) || 1, inter = b.readFloatLE(116);
  const voxel = [b.readFloatLE(80), b.readFloatLE(84), b.readFloatLE(88)].map(Math.abs);
  const n = dims[0] * dims[1] * dims[2];
  const data = new Float32Array(n);
  const read = {
    16: (i) => b.readFloatLE(offset + 4 * i),
    64: (i) => b.readDoubleLE(offset + 8 * i),
    4: (i) => b.readInt16LE(offset + 2 * i),
    2: (i) => b.readUInt8(offset + i)
  }[type];
  if (!read) throw new Error(`${file}: NIfTI datatype ${type} not read here`);
  const scaled = type === 4 || type === 2;
  for (let i = 0; i < n; i++) data[i] = scaled ? read(i) * slope + inter : read(i);
  let affine = null;
  if (b.readInt16LE(254) > 0) {  // sform: srow_x/y/z at 280/296/312, row-major 4x4
    affine = [];
    for (let r = 0; r < 3; r++)
      for (let c = 0; c < 4; c++) affine.push(b.readFloatLE(280 + 16 * r + 4 * c));
    affine.push(0, 0, 0, 1);
  }
  return {dims, voxel, affine, data};
}

function readNpy(file) {
  const b = fs.readFileSync(file);
  if (b.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = b[6];
  const hlen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = b.toString('latin1', start, start + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const fortran = /'fortran_order':\s*True/.test(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  if (shape.length !== 3) throw new Error(`${file}: shape (${shape}) is not 3-D`);
  const dims = fortran ? shape : shape.slice().reverse();
  const n = dims[0] * dims[1] * dims[2], at = start + hlen;
  const data = new Float32Array(n);
  if (descr === '<f4')
    for (let i = 0; i < n; i++) data[i] = b.readFloatLE(at + 4 * i);
  else if (descr === '<f8')
    for (let i = 0; i < n; i++) data[i] = b.readDoubleLE(at + 8 * i);
  else
    throw new Error(`${file}: dtype ${descr} not read here (float32 or float64)`);
  return {dims, voxel: [1, 1, 1], affine: null, data};
}

const readVolume = (file) => (file.endsWith('.npy') ? readNpy(file) : readNifti(file));

function writeNpy(file, data, dims) {
  let header = `{'descr': '<f4', 'fortran_order': True, 'shape': (${dims.join(', ')}), }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';  // 64-byte aligned, ends in \n
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  fs.writeFileSync(
      file,
      Buffer.concat([head, Buffer.from(header, 'latin1'), Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

// ---- the page's calls -------------------------------------------------------------------

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const dir = process.env.QSM_WASM_DIR || path.join(__dirname, '..', '..', 'build-wasm', o.variant);
  const script = path.resolve(dir, 'qsm-web-node.js');
  if (!fs.existsSync(script)) usage(`${script} is missing: ninja -C ${dir} qsm-web-node`);
  const qsm = await require(script)(
      {print: (t) => process.stderr.write(t + '\n'), printErr: (t) => process.stderr.write(t + '\n')});
  // As web/worker.js: a pool thread may have grown the memory, so views come from the live buffer.
  const heap = () => (qsm.wasmMemory ? qsm.wasmMemory.buffer : qsm.HEAP8.buffer);
  const start = heap().byteLength;  // before any call: what the module holds once loaded
  const brk = () => qsm.ccall('qsm_web_break_bytes', 'number', [], []);
  const breakStart = brk();

  const field = readVolume(o.field);
  const mask = o.mask ? readVolume(o.mask) : null;
  if (mask && mask.dims.join() !== field.dims.join())
    usage(`the mask is ${mask.dims.join('x')}, the field ${field.dims.join('x')}`);
  const request = {
    network: o.network,
    model_path: path.resolve(o.model),
    dims: field.dims,
    voxel_mm: field.voxel,
    threads: Number(o.threads),
    residency: 'full'
  };
  if (field.affine) request.affine = field.affine;
  if (o.budget) request.budget_bytes = Number(o.budget);
  if (o.unit) request.unit = o.unit;
  if (o.b0) request.b0 = Number(o.b0);
  if (o.te) request.te = Number(o.te);
  const result = {network: o.network, dims: field.dims, threads: request.threads, variant: o.variant};
  if (o.tile) {
    const [core, halo] = o.tile.split(',').map(Number);
    request.tile = halo === undefined || Number.isNaN(halo) ? {core} : {core, halo};
    // The page asks for the plan before it reads the volume (web/app.js); so does this.
    result.plan = JSON.parse(
        qsm.ccall('qsm_web_tile_plan', 'string', ['string'], [JSON.stringify({...request, mask: Boolean(mask)})]));
  }
  const copyIn = (f32) => {
    const ptr = qsm._malloc(f32.length * 4);
    if (!ptr) throw new Error(`out of wasm memory copying ${f32.length} voxels in`);
    new Float32Array(heap(), ptr, f32.length).set(f32);
    return ptr;
  };
  const fptr = copyIn(field.data), mptr = mask ? copyIn(mask.data) : 0;
  const text = qsm.ccall(
      'qsm_web_run', 'string', ['string', 'number', 'number', 'number', 'number'],
      [JSON.stringify(request), fptr, field.data.length, mptr, mask ? mask.data.length : 0]);
  result.reply = JSON.parse(text);
  const end = heap().byteLength;
  result.heap = {start_bytes: start, end_bytes: end, growth_bytes: end - start, break_start_bytes: breakStart,
                 break_rise_bytes: brk() - breakStart};
  result.outputs = [];
  for (const o2 of result.reply.outputs || []) {
    const n = qsm.ccall('qsm_web_output_size', 'number', ['string'], [o2.name]);
    const ptr = qsm.ccall('qsm_web_output_data', 'number', ['string'], [o2.name]);
    if (!n || !o.out) continue;
    fs.mkdirSync(o.out, {recursive: true});
    const file = path.join(o.out, `${o2.name}.npy`);
    writeNpy(file, new Float32Array(heap(), ptr, n).slice(), field.dims);
    result.outputs.push(file);
  }
  process.stdout.write(JSON.stringify(result) + '\n');
  process.exit(result.reply.error ? 1 : 0);
}

main().catch((e) => {
  process.stderr.write(`web_run.js: ${e.stack || e}\n`);
  process.exit(1);
});
