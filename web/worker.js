// The Web Worker that owns the qsmcore module (qsm-web, src/wasm/web_api.cpp and
// web_pipeline.cpp). The page posts {cmd: "init" | "demo" | "run" | "plan" | "pipeline"}; the
// worker answers with events: "ready" (the registry, and the networks the pipeline may invert
// with), "progress", "predicted" (the run's predicted peak, before it runs), "done" (reply +
// float32 outputs, or the pipeline's NIfTI files) or "error"; a "plan" (a tiled run's tile plan,
// qsm_web_tile_plan) is answered by {type: "plan", id, reply}. Runs block this worker, never the page.
"use strict";

let qsm = null;  // the module once initialised

// The heap as it is now: with pthreads a pool thread may have grown it, leaving older views
// detached, so views are made from the live memory each time.
function heapBuffer() {
  return qsm.wasmMemory ? qsm.wasmMemory.buffer : qsm.HEAP8.buffer;
}

// The model file in the FS for one call, as {model: {name, blob}} came from the page (a File the
// user chose, or a Blob of fetched or cached bytes). Weights read whole (full residency): a MEMFS
// copy of the bytes, which lives in JS memory, not in the wasm heap, and is removed after the
// call. Streamed weights: the Blob mounted with WORKERFS, whose reads are FileReaderSync reads of
// slices, so only the ranges the engine asks for ever enter the heap.
// putModel returns the path and a function that removes it; withModel holds it for one call.
function putModel(model, streamed) {
  const name = model.name.replace(/[^A-Za-z0-9._-]/g, "_");
  const dir = streamed ? "/blob" : "/models";
  try { qsm.FS.mkdir(dir); } catch (e) { /* exists */ }
  const path = dir + "/" + name;
  if (streamed) qsm.FS.mount(qsm.FS.filesystems.WORKERFS, { blobs: [{ name, data: model.blob }] }, dir);
  else qsm.FS.writeFile(path, new Uint8Array(new FileReaderSync().readAsArrayBuffer(model.blob)));
  return { path, remove: () => (streamed ? qsm.FS.unmount(dir) : qsm.FS.unlink(path)) };
}
function withModel(model, streamed, body) {
  const m = putModel(model, streamed);
  try {
    return body(m.path);
  } finally {
    m.remove();
  }
}
const isStreamed = (residency) => typeof residency === "string" && residency.startsWith("stream");

function copyIn(f32) {
  const ptr = qsm._malloc(f32.length * 4);
  if (!ptr) throw new Error("out of wasm memory copying " + f32.length + " voxels in");
  new Float32Array(heapBuffer(), ptr, f32.length).set(f32);
  return ptr;
}

function outputs(names) {
  const out = {};
  for (const name of names) {
    const n = qsm.ccall("qsm_web_output_size", "number", ["string"], [name]);
    if (!n) continue;
    const ptr = qsm.ccall("qsm_web_output_data", "number", ["string"], [name]);
    out[name] = new Float32Array(heapBuffer(), ptr, n).slice();
  }
  return out;
}

function finish(replyText, names) {
  const reply = JSON.parse(replyText);
  reply.heap8_bytes = heapBuffer().byteLength;  // HEAP8.buffer.byteLength: the heap high-water
  if (reply.error) {
    postMessage({ type: "error", reply });
    return;
  }
  const out = outputs(names);
  postMessage({ type: "done", reply, outputs: out }, Object.values(out).map((a) => a.buffer));
}

async function init(msg) {
  const base = new URL(msg.moduleBase, self.location.href).href;  // folder of qsm-web.js
  const script = base + "qsm-web.js";
  importScripts(script);
  qsm = await createQsm({
    // Pthread workers must load the module's script, not this worker's (docs/wasm.md).
    mainScriptUrlOrBlob: script,
    locateFile: (file) => base + file,
    onEvent: (event) => postMessage(event),
    print: (text) => postMessage({ type: "log", text }),
    printErr: (text) => postMessage({ type: "log", text }),
  });
  const registry = JSON.parse(qsm.UTF8ToString(qsm._qsm_web_registry()));
  // A module built before the pipeline's network inversions has no list: classical ones only.
  const pipelineNetworks = qsm._qsm_web_pipeline_networks ? JSON.parse(qsm.UTF8ToString(qsm._qsm_web_pipeline_networks())) : [];
  postMessage({ type: "ready", registry, pipelineNetworks, heap8_bytes: heapBuffer().byteLength });
}

function demo(msg) {
  withModel(msg.model, isStreamed(msg.residency), (modelPath) => {
    const request = {
      size: msg.size, threads: msg.threads, budget_bytes: msg.budget_bytes,
      model_id: msg.network, model_path: modelPath, residency: msg.residency || "full",
    };
    const text = qsm.ccall("qsm_web_demo", "string", ["string"], [JSON.stringify(request)]);
    finish(text, ["chi", "chi_true", "field", "mask"]);
  });
}

function run(msg) {
  withModel(msg.model, isStreamed(msg.residency), (modelPath) => runWith(msg, modelPath));
}
function runWith(msg, modelPath) {
  const request = {
    network: msg.network, model_path: modelPath, dims: msg.dims, voxel_mm: msg.voxel_mm,
    threads: msg.threads, budget_bytes: msg.budget_bytes, residency: msg.residency || "full",
  };
  if (msg.affine) request.affine = msg.affine;
  if (msg.unit) request.unit = msg.unit;
  if (msg.b0) request.b0 = msg.b0;
  if (msg.te) request.te = msg.te;
  if (msg.tile) request.tile = msg.tile;  // {core, halo}: run tiled, as `qsm run --tile CORE,HALO`
  const field = copyIn(msg.field);
  const mask = msg.mask ? copyIn(msg.mask) : 0;
  try {
    // Each array with its length: the module checks it against dims before reading a value.
    const text = qsm.ccall("qsm_web_run", "string", ["string", "number", "number", "number", "number"],
                           [JSON.stringify(request), field, msg.field.length, mask, msg.mask ? msg.mask.length : 0]);
    const names = msg.outputNames || ["chi", "local_field", "chi_pos", "chi_neg", "chi_total", "r2prime", "mask"];
    finish(text, names);
  } finally {
    qsm._free(field);
    if (mask) qsm._free(mask);
  }
}

// The engine's tile plan for a tiled run (network, dims, tile, threads, budget): tiles, tiles in
// flight (wasm_tiles_in_flight), the predicted peak; nothing of the volume is needed.
function plan(msg) {
  const text = qsm.ccall("qsm_web_tile_plan", "string", ["string"], [JSON.stringify(msg.request)]);
  postMessage({ type: "plan", id: msg.id, reply: JSON.parse(text) });
}

// ---- the pipeline: the scan's files into MEMFS, one call, the maps read back ------------------

async function gunzipIfNeeded(buffer) {
  const u8 = new Uint8Array(buffer);
  if (u8.length < 2 || u8[0] !== 0x1f || u8[1] !== 0x8b) return u8;
  const stream = new Blob([buffer]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

// Removes a MEMFS folder and what it holds (one level: the worker writes no deeper).
function removeDir(dir) {
  let names = [];
  try { names = qsm.FS.readdir(dir); } catch (e) { return; }
  for (const n of names) if (n !== "." && n !== "..") qsm.FS.unlink(dir + "/" + n);
  qsm.FS.rmdir(dir);
}

// A NIfTI file (File or Blob with a name) into `dir`, gzip undone (the module reads plain .nii),
// with its sidecar x.json beside it when the page matched one: x.nii.gz -> dir/x.nii, dir/x.json.
// MEMFS keeps file bytes in JS memory, outside the wasm heap.
async function putNifti(dir, item) {
  try { qsm.FS.mkdir(dir); } catch (e) { /* exists */ }
  const base = item.name.replace(/\.gz$/i, "").replace(/\.nii$/i, "").replace(/[^A-Za-z0-9._-]/g, "_");
  qsm.FS.writeFile(`${dir}/${base}.nii`, await gunzipIfNeeded(await item.file.arrayBuffer()));
  if (item.sidecar) qsm.FS.writeFile(`${dir}/${base}.json`, new Uint8Array(await item.sidecar.arrayBuffer()));
  return `${dir}/${base}.nii`;
}

// A network inversion's weights (msg.model, as for "run") go in the FS for the call: a MEMFS copy,
// or the Blob mounted with WORKERFS when streamed (msg.options.residency "stream…").
async function pipeline(msg) {
  const dirs = ["/scan/magnitude", "/scan/phase", "/scan/mask", "/out"];
  for (const d of dirs) removeDir(d);
  try { qsm.FS.mkdir("/scan"); } catch (e) { /* exists */ }
  let model = null;
  try {
    const request = { ...msg.options, magnitude: [], phase: [] };
    if (msg.model) {
      model = putModel(msg.model, isStreamed(msg.options.residency));
      request.inversion_network_files = [model.path];
    }
    for (const item of msg.magnitude) request.magnitude.push(await putNifti("/scan/magnitude", item));
    for (const item of msg.phase) request.phase.push(await putNifti("/scan/phase", item));
    if (msg.mask) request.mask = await putNifti("/scan/mask", msg.mask);
    request.out_dir = "/out";
    const reply = JSON.parse(qsm.ccall("qsm_web_pipeline", "string", ["string"], [JSON.stringify(request)]));
    reply.heap8_bytes = heapBuffer().byteLength;
    if (reply.error) {
      postMessage({ type: "error", reply });
      return;
    }
    const niftis = {};
    for (const o of reply.outputs || []) niftis[o.name] = qsm.FS.readFile(o.path);  // a copy, out of MEMFS
    postMessage({ type: "done", reply, niftis }, Object.values(niftis).map((a) => a.buffer));
  } finally {
    for (const d of dirs) removeDir(d);
    if (model) model.remove();
  }
}

onmessage = async (e) => {
  const msg = e.data;
  try {
    if (msg.cmd === "init") await init(msg);
    else if (msg.cmd === "demo") demo(msg);
    else if (msg.cmd === "run") run(msg);
    else if (msg.cmd === "plan") plan(msg);
    else if (msg.cmd === "pipeline") await pipeline(msg);
    else throw new Error("unknown command " + msg.cmd);
  } catch (err) {
    const error = String(err && err.message ? err.message : err);
    if (msg.cmd === "plan") postMessage({ type: "plan", id: msg.id, reply: { error } });
    else postMessage({ type: "error", reply: { error } });
  }
};
