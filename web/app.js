// The page's behaviour: reads NIfTI volumes (NiiVue's reader, gzip undone with the browser's
// DecompressionStream), gets a network's weights (the shipped file, the registry's URL with its
// SHA-256 checked and kept in IndexedDB, or a local ONNX file), runs qsmcore in a Web Worker
// (worker.js) and shows the input and χ with NiiVue; χ is written back as NIfTI by NiiVue's writer.
// Pipeline mode: a scan's magnitude and phase NIfTIs (+ JSON sidecars), or DICOM files converted
// here by dcm2niix's WebAssembly build (@niivue/dcm2niix), go to the engine's pipeline
// (src/wasm/web_pipeline.cpp), which returns χ, R2*, the fields and the masks as NIfTI files; its
// inversion is a classical method or a registry network on the local field (qsmcore InvNet's
// shipped file, or a network's ONNX file the user chooses or the registry hosts).
// The pthread build runs when the page is crossOriginIsolated (tools/web/serve.js sends COOP/COEP),
// else the single-threaded one; ?variant=mt|st forces one.
import { Niivue, NVImage, MULTIPLANAR_TYPE, SHOW_RENDER } from "/niivue/index.js";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const variant = params.get("variant") || (self.crossOriginIsolated ? "mt" : "st");
const MiB = 1024 * 1024;
// What the registry's wasm figures predict: the heap in use at the run's peak (malloc's view), not
// the memory size the browser reports, which only grows (docs/wasm.md).
const PREDICTED_HEAP_LABEL = "predicted heap in use at the peak (malloc)";

let registry = [];
let pipelineNetworks = [];  // the ids the pipeline's inversion may name (network_inversion_ids())
let worker = null;
let last = null;  // the last result: {dims, voxel, affine, chi: Float32Array, reply}
// For the browser test (tests/web): the last reply, the χ NIfTI bytes, and the worker's events
// of the last run in order ("progress", "predicted", "done" / "error").
// Pipeline runs add `predicted` (the prediction as the page showed it, before the run) and
// `niftis` (the maps' NIfTI bytes by name).
// `call` posts a message to the worker as the page's buttons do (the tests send what the UI
// cannot: arrays whose length is not their dims').
// Tiled runs: `plan`, the last tile plan the page showed (qsm_web_tile_plan's reply); the
// counters `workerCalls` (runs posted to the worker) and `volumesRead` (NIfTI volumes read whole)
// show that a refused plan neither ran nor read anything.
window.qsmPage = { variant, reply: null, chiNifti: null, events: [], predicted: null, niftis: null, plan: null,
                   workerCalls: 0, volumesRead: 0, shownVolumes: () => shownVolumes(), call: (message) => call(message) };

// ---- small helpers -------------------------------------------------------------------------

function setState(state) { document.body.dataset.state = state; }
function fmtBytes(b) { return b == null ? "–" : b >= 1024 * MiB ? (b / 1024 / MiB).toFixed(2) + " GiB" : (b / MiB).toFixed(1) + " MiB"; }
function say(text, kind = "") { const m = $("message"); m.textContent = text; m.className = "message " + kind; }
function facts(rows) {
  const body = $("facts").tBodies[0];
  body.replaceChildren(...rows.map(([k, v]) => {
    const tr = document.createElement("tr");
    for (const t of [k, v]) { const td = document.createElement("td"); td.textContent = t; tr.append(td); }
    return tr;
  }));
}
function progress(fraction, stage) { $("progress").value = fraction; $("stage").textContent = stage; }

async function sha256(bytes) {
  const digest = await crypto.subtle.digest("SHA-256", bytes);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function gunzipIfNeeded(buffer) {
  const u8 = new Uint8Array(buffer);
  if (u8.length < 2 || u8[0] !== 0x1f || u8[1] !== 0x8b) return buffer;
  const stream = new Blob([buffer]).stream().pipeThrough(new DecompressionStream("gzip"));
  return await new Response(stream).arrayBuffer();
}
async function gzip(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

// ---- weights: the shipped file, the registry URL (+ IndexedDB cache), or a local file ---------

function idb() {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open("qsmcore-weights", 1);
    req.onupgradeneeded = () => req.result.createObjectStore("files");
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}
async function idbGet(key) {
  const db = await idb();
  return new Promise((resolve, reject) => {
    const r = db.transaction("files").objectStore("files").get(key);
    r.onsuccess = () => resolve(r.result || null);
    r.onerror = () => reject(r.error);
  });
}
async function idbPut(key, value) {
  const db = await idb();
  return new Promise((resolve, reject) => {
    const tx = db.transaction("files", "readwrite");
    tx.objectStore("files").put(value, key);
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error);
  });
}

// The one ONNX file of registry network `spec`, SHA-256 checked: {name, blob, sha}.
async function registryWeights(spec) {
  if (spec.files.length !== 1) throw new Error(`${spec.id} has ${spec.files.length} ONNX files; the page runs one-file networks`);
  const file = spec.files[0];
  // The bytes are checked here, then handed on as a Blob: the Worker reads it whole or, for
  // streamed weights, mounts it and reads ranges, so the wasm heap never holds a second copy.
  const check = async (bytes, where) => {
    const got = await sha256(bytes);
    if (got !== file.sha256) throw new Error(`${file.name} from ${where}: SHA-256 ${got}, the registry says ${file.sha256}`);
    return new Blob([bytes]);
  };
  if (file.shipped) {
    progress(0, `loading ${file.name} (shipped with qsmcore)`);
    const r = await fetch("models/" + file.name);
    if (!r.ok) throw new Error(`models/${file.name}: HTTP ${r.status}`);
    return { name: file.name, blob: await check(await r.arrayBuffer(), "the server"), sha: file.sha256 };
  }
  if (!file.url) throw new Error(`${spec.id}: its weights are not hosted (status ${spec.status}); choose a local ONNX file`);
  const key = `${spec.id}:${file.sha256}`;
  const cached = await idbGet(key);
  // Cached as a Blob (older pages cached the ArrayBuffer): checked again, the cache may be stale.
  if (cached) {
    const bytes = cached instanceof Blob ? await cached.arrayBuffer() : cached;
    return { name: file.name, blob: await check(bytes, "the IndexedDB cache"), sha: file.sha256 };
  }
  // ?mirror=URL: the file from URL + its name instead of the registry's URL (as $QSM_MODEL_BASE_URL
  // does for `qsm fetch`); checked the same way.
  const mirror = params.get("mirror");
  const url = mirror ? new URL(file.name, new URL(mirror, location.href)).href : file.url;
  progress(0, `downloading ${file.name} (${fmtBytes(file.bytes)})`);
  let r;
  try {
    r = await fetch(url);
  } catch (e) {  // offline, or the host refused the page (CORS): fetch says only "Failed to fetch"
    throw new Error(`${spec.id}'s weights could not be downloaded from ${url} (${e.message}); choose its ONNX file instead`);
  }
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  const blob = await check(await r.arrayBuffer(), url);
  await idbPut(key, blob);
  return { name: file.name, blob, sha: file.sha256 };
}

// The weights of `spec`: the ONNX file chosen in the input `inputId` (checked against the registry's
// SHA-256 and run with a note when it is another file), else registryWeights.
async function chosenWeights(spec, inputId = "onnx-file") {
  const local = $(inputId).files[0];
  if (!local) return registryWeights(spec);
  const bytes = await local.arrayBuffer();
  const sha = await sha256(bytes);
  const known = spec.files.some((f) => f.sha256 === sha);
  const note = known ? "" : `${local.name}: SHA-256 ${sha.slice(0, 12)}… is not ${spec.id}'s registered file; running it with ${spec.id}'s recipe (results are only as good as these weights).`;
  if (note) say(note);
  return { name: local.name, blob: local, sha, note };  // the File itself: streamed weights read it in place
}

// ---- NIfTI in and out (NiiVue) --------------------------------------------------------------

// A 3-D NIfTI file as float32 (scaling applied), with its grid. A 4-D or 5-D file (echoes,
// frames) is refused by name: taking its first volume would run on one echo without saying so.
async function readNifti(file) {
  window.qsmPage.volumesRead++;
  const buffer = await gunzipIfNeeded(await file.arrayBuffer());
  const name = file.name.replace(/\.gz$/i, "");
  const img = await NVImage.new(buffer, name.endsWith(".nii") ? name : name + ".nii");
  const h = img.hdr;
  const dims = [h.dims[1], h.dims[2], h.dims[3]].map((d) => Math.max(1, d));
  const extra = h.dims.slice(4, Math.max(4, h.dims[0] + 1)).map((d) => Math.max(1, d));
  const volumes = extra.reduce((a, d) => a * d, 1);
  if (volumes > 1)
    throw new Error(`${file.name} holds ${volumes} volumes of ${dims.join("×")} (dims ${[...dims, ...extra].join("×")}); ` +
                    "the page runs one 3-D field: choose one echo, or a field map combined from the echoes");
  const n = dims[0] * dims[1] * dims[2];
  const slope = !Number.isFinite(h.scl_slope) || h.scl_slope === 0 ? 1 : h.scl_slope;
  const inter = Number.isFinite(h.scl_inter) ? h.scl_inter : 0;
  const data = new Float32Array(n);
  for (let i = 0; i < n; i++) data[i] = img.img[i] * slope + inter;
  return { image: img, dims, voxel: [h.pixDims[1], h.pixDims[2], h.pixDims[3]], affine: h.affine.flat(), data };
}

function niftiBytes(data, dims, voxel, affine) {
  return NVImage.createNiftiArray(dims, voxel, affine, 16 /* float32 */, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
}

// ---- viewers --------------------------------------------------------------------------------

const viewers = {};
// One canvas per volume: axial, coronal and sagittal slices in a row, no 3-D render.
function viewer(id) {
  if (!viewers[id]) {
    const nv = new Niivue({ backColor: [0, 0, 0, 1], isColorbar: true, crosshairColor: [0.35, 0.65, 1, 0.6], crosshairWidth: 0.5,
                            multiplanarLayout: MULTIPLANAR_TYPE.ROW, multiplanarShowRender: SHOW_RENDER.NEVER, textHeight: 0.04,
                            loadingText: "" /* an empty viewer has no result, the caption says why */ });
    nv.attachTo(id);
    nv.setSliceType(nv.sliceTypeMultiplanar);
    viewers[id] = nv;
  }
  return viewers[id];
}
// Before a run, the previous result leaves the page: a refused or failed run must not sit above
// the χ of the run before it, as if it were its own.
function clearResults(caption) {
  last = null;
  window.qsmPage.chiNifti = null;
  for (const id of Object.keys(viewers)) {
    const nv = viewers[id];
    while (nv.volumes.length) nv.removeVolume(nv.volumes[0]);
    nv.drawScene();
  }
  window.qsmPage.predicted = window.qsmPage.niftis = null;
  $("input-caption").textContent = "Input";
  $("chi-caption").textContent = caption;
  $("extra-figure").hidden = $("r2star-figure").hidden = $("download-r2star").hidden = true;
}
function shownVolumes() { return Object.values(viewers).reduce((n, nv) => n + nv.volumes.length, 0); }
async function show(canvasId, data, dims, voxel, affine, name, range) {
  const bytes = niftiBytes(data, dims, voxel, affine);
  const img = await NVImage.new(bytes.buffer, name + ".nii");
  const nv = viewer(canvasId);
  while (nv.volumes.length) nv.removeVolume(nv.volumes[0]);
  nv.addVolume(img);
  if (range) { nv.volumes[0].cal_min = range[0]; nv.volumes[0].cal_max = range[1]; }
  nv.updateGLVolume();
}

// ---- the worker -----------------------------------------------------------------------------

function startWorker() {
  worker = new Worker("worker.js");
  worker.onmessage = (e) => onWorker(e.data);
  worker.onerror = (e) => { say("worker: " + e.message, "error"); setState("error"); };
  worker.postMessage({ cmd: "init", moduleBase: `build-wasm/${variant}/` });
}

let pending = null;  // {resolve, reject, predicted}
function onWorker(msg) {
  if (msg.type !== "log") window.qsmPage.events.push(msg.type);
  if (msg.type === "ready") {
    registry = msg.registry;
    pipelineNetworks = msg.pipelineNetworks || [];
    fillNetworks();
    fillPipelineNetworks();
    showHeap(msg.heap8_bytes);
    progress(0, "Ready");
    $("run-demo").disabled = $("run-user").disabled = $("run-pipeline").disabled = false;
    setState("ready");
  } else if (msg.type === "plan") {
    const resolve = planWaiting.get(msg.id);
    planWaiting.delete(msg.id);
    if (resolve) resolve(msg.reply);
  } else if (msg.type === "progress") {
    progress(msg.fraction, msg.stage);
  } else if (msg.type === "predicted" && msg.stages) {
    // The pipeline's prediction, from the files' headers: shown before a voxel is read.
    if (pending) pending.predicted = msg;
    window.qsmPage.predicted = { ...msg, shownAt: performance.now() };
    facts([["scan", `${msg.dims.join("×")} × ${msg.echoes} echo(es)`],
           ["predicted peak (whole run, engine)", `${fmtBytes(msg.predicted_peak_bytes)}: the scan ${fmtBytes(msg.scan_bytes)}, then ${fmtBytes(msg.stages_peak_bytes)} in ${msg.peak_stage}`],
           [PREDICTED_HEAP_LABEL, fmtBytes(msg.predicted_heap_bytes)], ["budget", fmtBytes(msg.budget_bytes)]]);
  } else if (msg.type === "predicted") {
    if (pending) pending.predicted = msg;
    const tiles = msg.tiles > 1 ? [["tiles (the run's plans)", `${msg.tiles} tiles, ${msg.tiles_in_flight} in flight`]] : [];
    facts([...tiles, ["predicted peak (engine)", fmtBytes(msg.predicted_peak_bytes)],
           [PREDICTED_HEAP_LABEL, fmtBytes(msg.predicted_heap_bytes)], ["budget", fmtBytes(msg.budget_bytes)]]);
  } else if (msg.type === "log") {
    console.log(msg.text);
  } else if (msg.type === "done" || msg.type === "error") {
    const p = pending;
    pending = null;
    if (!p) return;
    if (msg.type === "done") p.resolve(msg);
    else p.reject(Object.assign(new Error(msg.reply.error), { reply: msg.reply }));
  }
}
function call(message, transfer) {
  window.qsmPage.events = [];
  window.qsmPage.workerCalls++;
  return new Promise((resolve, reject) => {
    pending = { resolve, reject, predicted: null };
    worker.postMessage(message, transfer || []);
  });
}

function engineSettings() {
  // At most the pool qsm-web.js starts with (hardwareConcurrency + 2, less the prefetch worker and
  // one spare): a thread beyond it would wait for a Worker that starts only after the call.
  const threads = variant === "mt" ? Math.min(navigator.hardwareConcurrency, Math.max(1, Number($("threads").value) || navigator.hardwareConcurrency)) : 1;
  const mib = Number($("budget").value);
  return { threads, budget_bytes: mib > 0 ? Math.round(mib * MiB) : 0, residency: $("residency").value };
}

function showHeap(bytes) {
  $("build").textContent = `${variant === "mt" ? "pthread build" : "single-threaded build"} · wasm heap ${fmtBytes(bytes)}`;
}

function memoryFacts(reply) {
  showHeap(reply.heap8_bytes);
  const w = reply.weights || {};
  const weights = w.execution_residency === "dense_disk_stream"
    ? `streamed from the file: ${fmtBytes(w.read_bytes)} read, at most ${fmtBytes(w.largest_window_bytes)} in the heap`
    : "in the wasm heap";
  return [["weights", weights],["predicted peak (engine)", fmtBytes(reply.predicted_peak_bytes)],
          ["measured peak (engine)", fmtBytes(reply.measured_peak_bytes)],
          [PREDICTED_HEAP_LABEL, fmtBytes(reply.predicted_heap_bytes)],
          ["wasm heap high-water (HEAP8.buffer.byteLength)", fmtBytes(reply.heap8_bytes)],
          ...inUseFacts(reply),
          ["budget", fmtBytes(reply.budget_bytes)]];
}

// A tiled run as the engine ran it, beside its tile plan; nothing for a whole-volume run.
function tileFacts(reply, plan) {
  if (!plan) return [];
  return [["tiles (run)", `${reply.tiles} tiles, ${reply.tiles_in_flight} in flight (tile plan: ${plan.tiles_in_flight}; ` +
                          `the run's own prediction: ${reply.predicted_tiles_in_flight})`],
          ["predicted peak (tile plan, registry figures)", fmtBytes(plan.predicted_peak_bytes)]];
}

// What the heap holds once the call returned: in use (the engine's freed blocks kept for the next
// run are free, not in use), and of that the engine's accounted bytes.
function inUseFacts(reply) {
  if (reply.heap_in_use_bytes == null) return [];
  return [["wasm heap in use after the run (of it, the engine's)",
           `${fmtBytes(reply.heap_in_use_bytes)} (${fmtBytes(reply.engine_in_use_bytes)})`]];
}

async function guarded(body) {
  window.qsmPage.runs = (window.qsmPage.runs || 0) + 1;  // the browser tests wait for this run's end
  $("run-demo").disabled = $("run-user").disabled = $("run-pipeline").disabled = $("download").disabled = true;
  $("download-r2star").disabled = true;
  setState("running");
  say("");
  clearResults("χ (running…)");
  try {
    await body();
    setState("done");
  } catch (err) {
    const r = err.reply || {};
    say((r.kind === "OutOfBudget" ? "Refused before allocating: " : "Error: ") + err.message, "error");
    progress(0, r.kind === "OutOfBudget" ? "Refused" : "Failed");
    if (r.plan) {
      facts([["tile plan: heap at the peak", fmtBytes(r.plan.predicted_heap_bytes)], ["budget", fmtBytes(r.plan.budget_bytes)],
             ["wasm heap high-water (HEAP8.buffer.byteLength)", fmtBytes(r.heap_bytes)]]);
    } else if (r.heap_bytes) {
      facts(r.stages_peak_bytes != null ? pipelineMemoryFacts(r) : r.predicted_peak_bytes ? memoryFacts(r)
        : [["budget", fmtBytes(r.budget_bytes)], ["wasm heap high-water (HEAP8.buffer.byteLength)", fmtBytes(r.heap8_bytes || r.heap_bytes)]]);
    }
    window.qsmPage.reply = r;
    clearResults(r.kind === "OutOfBudget" ? "χ: none, the run was refused" : "χ: none, the run failed");
    setState("error");
  } finally {
    $("run-demo").disabled = $("run-user").disabled = $("run-pipeline").disabled = false;
  }
}

// ---- tiles: the control, and the engine's tile plan before a tiled run -----------------------

// The field's unit as the run takes it: a phase network takes wrapped phase in radians (as
// `qsm run` assumes for it).
const unitFor = (spec) => (spec.needs.field_kind === "wrapped phase" ? "rad" : $("unit").value);

// The tile request of the "Your data" card, as `qsm run --tile CORE,HALO`: {core, halo} when tiles
// are on for a tiled network, else null (the whole volume).
function tileRequest(spec) {
  if (!spec || !spec.tiled || $("tile-mode").value !== "on") return null;
  const core = Number($("tile-core").value), halo = Number($("tile-halo").value);
  if (!Number.isInteger(core) || core < 1) throw new Error(`tile core "${$("tile-core").value}": a whole number of voxels, 1 or more`);
  if (!Number.isInteger(halo) || halo < 0) throw new Error(`tile halo "${$("tile-halo").value}": a whole number of voxels, 0 or more`);
  return { core, halo };
}

// The grid of a NIfTI-1 or NIfTI-2 file from its header alone (gzip undone only as far as the
// header), so that a run can be planned, and refused, before the volume is read.
async function niftiDims(file) {
  const magic = new Uint8Array(await file.slice(0, 2).arrayBuffer());
  let stream = file.stream();
  if (magic[0] === 0x1f && magic[1] === 0x8b) stream = stream.pipeThrough(new DecompressionStream("gzip"));
  const reader = stream.getReader();
  const head = new Uint8Array(540);
  let n = 0;
  while (n < head.length) {
    const { done, value } = await reader.read();
    if (done) break;
    const k = Math.min(value.length, head.length - n);
    head.set(value.subarray(0, k), n);
    n += k;
  }
  reader.cancel().catch(() => {});
  const v = new DataView(head.buffer);
  for (const little of [true, false]) {
    const size = n >= 4 ? v.getInt32(0, little) : 0;
    // dim[0] is the number of dimensions; dims past it are 1. NIfTI-1: int16 dim[8] at 40; NIfTI-2: int64 at 16.
    const dim = size === 348 && n >= 348 ? (i) => v.getInt16(40 + 2 * i, little)
      : size === 540 && n >= 540 ? (i) => Number(v.getBigInt64(16 + 8 * i, little)) : null;
    if (!dim) continue;
    const nd = dim(0);
    return { dims: [1, 2, 3].map((i) => (i <= nd ? Math.max(1, dim(i)) : 1)) };
  }
  throw new Error(`${file.name}: no NIfTI-1 or NIfTI-2 header`);
}

// Plans go to the Worker beside runs, each answered by its id.
let planIds = 0;
const planWaiting = new Map();
function askPlan(request) {
  const id = ++planIds;
  return new Promise((resolve) => {
    planWaiting.set(id, resolve);
    worker.postMessage({ cmd: "plan", id, request });
  });
}

// The engine's plan for `spec` tiled with `tile` on `fieldFile`'s grid under the page's budget
// and threads: tiles, tiles in flight (wasm_tiles_in_flight), the predicted peak. Shown at once.
async function tilePlan(spec, fieldFile, tile) {
  const { dims } = await niftiDims(fieldFile);
  const e = engineSettings();
  const plan = await askPlan({ network: spec.id, dims, tile, threads: e.threads, budget_bytes: e.budget_bytes,
                               mask: Boolean($("mask-file").files[0]), unit: unitFor(spec) });
  window.qsmPage.plan = plan;
  showPlan(plan);
  return plan;
}

function showPlan(p, note) {
  const box = $("tile-plan");
  box.hidden = false;
  const verdict = (text, kind) => Object.assign(document.createElement("div"), { className: "verdict " + kind, textContent: text });
  if (!p || p.error) {
    box.replaceChildren(verdict(p ? `No tile plan: ${p.error}` : note, p ? "bad" : ""));
    return;
  }
  const core = p.core.every((c) => c === p.core[0]) ? String(p.core[0]) : p.core.join("×");
  const lowered = p.tiles_in_flight < Math.min(p.wasm_tiles_in_flight, p.tiles) ? ", fewer for the budget" : "";
  const rows = [
    ["tile plan", `the engine's, before the volume is read (${p.dims.join("×")})`],
    ["tiles", `${p.tiles} of ${p.patch.join("×")} (core ${core}, halo ${p.halo}; a tile with no mask voxel is skipped)`],
    ["tiles in flight", `${p.tiles_in_flight} (wasm_tiles_in_flight: ${p.wasm_tiles_in_flight} for ${p.pool} thread(s)${lowered})`],
    ["one tile", `${fmtBytes(p.tile_bytes)} (${p.tile_figure}, what the tiles in flight are decided with); native ${fmtBytes(p.native_tile_bytes)}`],
    ["predicted peak", `${fmtBytes(p.predicted_peak_bytes)} with ${p.tiles_in_flight} in flight (the registry's ${p.peak_figure === "wasm32" ? "wasm32 tiled-run" : "native"} figures: model and plan, whole-volume buffers, tiles)`],
    ["heap at the peak", `${fmtBytes(p.predicted_heap_bytes)} (in use ${fmtBytes(p.heap_in_use_bytes)}, input volumes ${fmtBytes(p.inputs_bytes)})`],
    ["budget", fmtBytes(p.budget_bytes)],
  ];
  const table = document.createElement("table");
  for (const [k, val] of rows) {
    const tr = table.insertRow();
    tr.insertCell().textContent = k;
    tr.insertCell().textContent = val;
  }
  box.replaceChildren(table, p.fits ? verdict(`Fits the budget: ${p.tiles_in_flight} tile(s) in flight.`, "ok")
    : verdict(`Over the budget: a run is refused before the volume is read. ${p.refusal}`, "bad"));
}

// The plan again whenever what it depends on changes (network, tiles, files, threads, budget).
let planTimer = null;
function planSoon() {
  showTileControls();
  clearTimeout(planTimer);
  planTimer = setTimeout(() => refreshPlan().catch((e) => showPlan({ error: e.message })), 150);
}
function showTileControls() {
  const spec = registry.find((x) => x.id === $("network").value);
  $("tile-controls").hidden = !(spec && spec.tiled);
  $("tile-core").disabled = $("tile-halo").disabled = $("tile-mode").value !== "on";
  return spec;
}
async function refreshPlan() {
  const spec = showTileControls();
  const tile = tileRequest(spec);
  if (!tile) { $("tile-plan").hidden = true; return; }
  const field = $("field-file").files[0];
  if (!field) { showPlan(null, "Choose a field NIfTI: the tile plan needs its grid."); return; }
  await tilePlan(spec, field, tile);
}
for (const id of ["tile-mode", "tile-core", "tile-halo", "field-file", "mask-file", "unit", "threads", "budget"])
  $(id).addEventListener("change", planSoon);

// ---- the two actions ------------------------------------------------------------------------

async function runDemo() {
  await guarded(async () => {
    const spec = registry.find((s) => s.id === "qsmcore-invnet");
    const model = await registryWeights(spec);
    const size = Number($("demo-size").value);
    const t0 = performance.now();
    const { reply, outputs } = await call({ cmd: "demo", size, network: spec.id, model, ...engineSettings() });
    const seconds = (performance.now() - t0) / 1000;
    reply.worker_seconds = seconds;
    const dims = reply.dims, voxel = reply.voxel_mm;
    const affine = [voxel[0], 0, 0, 0, 0, voxel[1], 0, 0, 0, 0, voxel[2], 0, 0, 0, 0, 1];
    const m = reply.metrics, t = reply.tkd.metrics;
    facts([["network", `${reply.network} (${model.sha.slice(0, 12)}…, SHA-256 checked)`],
           ["χ vs ground truth", `NRMSE ${m.nrmse_percent.toFixed(1)} %, XSIM ${m.xsim.toFixed(3)}, HFEN ${m.hfen.toFixed(3)}`],
           [`TKD (t = ${reply.tkd.threshold})`, `NRMSE ${t.nrmse_percent.toFixed(1)} %, XSIM ${t.xsim.toFixed(3)}`],
           ["time", `network ${reply.network_seconds.toFixed(2)} s, whole demo ${seconds.toFixed(2)} s`],
           ...memoryFacts(reply)]);
    await finishRun(reply, outputs.chi, dims, voxel, affine, `phantom ${dims.join("×")}`, outputs.field, "local field (ppm)");
    say(`Done: ${reply.network} on the ${dims[0]}³ head phantom.`, "ok");
  });
}

async function runUser() {
  await guarded(async () => {
    const fieldFile = $("field-file").files[0];
    if (!fieldFile) throw new Error("choose a field NIfTI first");
    const spec = registry.find((s) => s.id === $("network").value);
    // A tiled run: the engine's tile plan from the header first; over the budget nothing is read.
    const tile = tileRequest(spec);
    let plan = null;
    if (tile) {
      progress(0, `tile plan for ${fieldFile.name}`);
      plan = await tilePlan(spec, fieldFile, tile);
      if (plan.error) throw Object.assign(new Error("tile plan: " + plan.error), { reply: { ...plan, plan } });
      if (!plan.fits)
        throw Object.assign(new Error(`${fieldFile.name} was not read: ${plan.refusal}`), { reply: { ...plan, kind: "OutOfBudget", plan } });
    }
    progress(0, `reading ${fieldFile.name}`);
    const tRead = performance.now();
    const field = await readNifti(fieldFile);
    if (plan && field.dims.join() !== plan.dims.join())
      throw new Error(`${fieldFile.name} is ${field.dims.join("×")}, its header said ${plan.dims.join("×")}`);
    let mask = null;
    if ($("mask-file").files[0]) {
      mask = await readNifti($("mask-file").files[0]);
      if (mask.dims.join() !== field.dims.join()) throw new Error(`the mask is ${mask.dims.join("×")}, the field ${field.dims.join("×")}`);
    }
    const model = await chosenWeights(spec);
    const readSeconds = (performance.now() - tRead) / 1000;
    const msg = { cmd: "run", network: spec.id, model, field: field.data, mask: mask ? mask.data : null, dims: field.dims,
                  voxel_mm: field.voxel, affine: field.affine, unit: unitFor(spec), tile,
                  b0: Number($("b0").value) || null, te: Number($("te").value) || null, ...engineSettings() };
    const t0 = performance.now();
    const { reply, outputs } = await call(msg);
    reply.read_seconds = readSeconds;
    reply.worker_seconds = (performance.now() - t0) / 1000;
    reply.plan = plan;
    const chi = outputs.chi || Object.values(outputs)[0];
    if (!chi) throw new Error(`${spec.id} returned no volume`);
    facts([["network", `${spec.name} (${model.sha.slice(0, 12)}…)`],
           ["time", `network ${reply.network_seconds.toFixed(2)} s, whole run ${((performance.now() - t0) / 1000).toFixed(2)} s`],
           ...tileFacts(reply, plan), ...memoryFacts(reply)]);
    await finishRun(reply, chi, field.dims, field.voxel, field.affine, fieldFile.name, field.data, "input field");
    say(`Done: ${spec.name} on ${fieldFile.name}.${reply.warnings && reply.warnings.length ? "\n" + reply.warnings.join("\n") : ""}`, "ok");
  });
}

// ---- pipeline mode: a scan to χ -----------------------------------------------------------

const niceName = (name) => name.replace(/\.gz$/i, "").replace(/\.(nii|json)$/i, "");
// "x_e2" before "x_e10": digits compared as numbers.
const naturalOrder = (a, b) => a.name.localeCompare(b.name, undefined, { numeric: true });

async function sidecarsByName(files) {
  const byName = new Map();
  for (const f of files) {
    let json = null;
    try { json = JSON.parse(await f.text()); } catch (e) { throw new Error(`${f.name}: not JSON (${e.message})`); }
    byName.set(niceName(f.name), { file: f, json });
  }
  return byName;
}

// One series (magnitude or phase) as the worker takes it: each file with its sidecar (x.json for
// x.nii[.gz]), per-echo files in echo order: by the sidecars' EchoNumber, else EchoTime, when
// every file has one, else by name (x_e1, x_e2, …, x_e10).
function series(files, sidecars, what) {
  const items = Array.from(files, (file) => {
    const car = sidecars.get(niceName(file.name));
    return { name: file.name, file, sidecar: car ? car.file : null, json: car ? car.json : null };
  });
  const key = (it, k) => (it.json && typeof it.json[k] === "number" ? it.json[k] : null);
  const by = ["EchoNumber", "EchoTime"].find((k) => items.every((it) => key(it, k) != null));
  items.sort(by ? (a, b) => key(a, by) - key(b, by) : naturalOrder);
  if (!items.length) throw new Error(`choose the ${what} NIfTI file(s)`);
  return { items, order: items.length > 1 ? (by ? `by ${by}` : "by name") : "one file" };
}

// DICOM files to NIfTI + sidecars with dcm2niix's WebAssembly build, sorted into magnitude and
// phase by the sidecars' ImageType (P/PHASE, M/MAGNITUDE; dcm2niix's _ph postfix), as
// `qsm pipeline --dicom` sorts dcm2niix's output (src/scan/dicom.cpp).
async function convertDicom(files) {
  progress(0, `converting ${files.length} DICOM file(s) with dcm2niix`);
  let Dcm2niix;
  try {
    ({ Dcm2niix } = await import("/dcm2niix/index.js"));
  } catch (e) {
    throw new Error("dcm2niix's WebAssembly build is not served here (npm's @niivue/dcm2niix): " + e.message);
  }
  const d = new Dcm2niix();
  await d.init();
  const out = await d.input(files).run();
  const niftis = out.filter((f) => /\.nii(\.gz)?$/i.test(f.name));
  const sidecars = await sidecarsByName(out.filter((f) => /\.json$/i.test(f.name)));
  const parts = { magnitude: [], phase: [] };
  for (const f of niftis) {
    const car = sidecars.get(niceName(f.name));
    const type = car && Array.isArray(car.json.ImageType) ? car.json.ImageType.map(String) : [];
    const phase = type.includes("P") || type.includes("PHASE") || /_ph$/i.test(niceName(f.name));
    const magnitude = !phase && (type.includes("M") || type.includes("MAGNITUDE"));
    if (phase) parts.phase.push(f);
    else if (magnitude) parts.magnitude.push(f);
  }
  if (!parts.phase.length || !parts.magnitude.length)
    throw new Error(`dcm2niix made ${niftis.length} NIfTI file(s) (${niftis.map((f) => f.name).join(", ")}), ` +
                    `${parts.magnitude.length} magnitude and ${parts.phase.length} phase: the pipeline needs both`);
  return { magnitude: parts.magnitude, phase: parts.phase, sidecars, note: `dcm2niix: ${niftis.map((f) => f.name).join(", ")}` };
}

// The network the pipeline's inversion names, or null for a classical one.
const pipelineNetwork = () => (pipelineNetworks.includes($("pl-inversion").value) ? registry.find((s) => s.id === $("pl-inversion").value) : null);

function pipelineOptions() {
  const o = { mask_method: $("pl-mask-method").value, unwrap: $("pl-unwrap").value, inversion: $("pl-inversion").value,
              r2star: $("pl-r2star").checked, ...engineSettings() };
  if (!pipelineNetwork()) delete o.residency;  // Engine → Weights: a network's weights only
  if ($("pl-bfr").value) o.bfr = $("pl-bfr").value;
  const te = $("pl-te").value.trim();
  if (te) {
    o.te = te.split(/[,\s]+/).map(Number);
    if (o.te.some((t) => !(t > 0))) throw new Error(`TE "${te}": echo times in seconds, comma-separated`);
  }
  if (Number($("pl-b0").value) > 0) o.b0 = Number($("pl-b0").value);
  return o;
}

// A symmetric window ±w for a signed map: w the 99th percentile of |v| inside the mask, to two
// significant digits, so a few extreme voxels do not grey out the rest.
function symmetricWindow(img, maskImg) {
  const v = img.img, m = maskImg ? maskImg.img : null;
  const a = [];
  for (let i = 0; i < v.length; i++) if (!m || m[i] > 0) a.push(Math.abs(v[i]));
  if (!a.length) return 1;
  a.sort((x, y) => x - y);
  const w = a[Math.min(a.length - 1, Math.floor(0.99 * a.length))];
  return w > 0 ? Number(w.toPrecision(2)) : 1;
}

// A mask image's voxels kept only on its border (inside, with a face neighbour outside), so the
// map under it stays readable.
function outline(img) {
  const [nx, ny, nz] = [img.hdr.dims[1], img.hdr.dims[2], img.hdr.dims[3]];
  const m = img.img, inside = Uint8Array.from(m, (v) => (v > 0.5 ? 1 : 0));
  const at = (i, j, k) => (i < 0 || j < 0 || k < 0 || i >= nx || j >= ny || k >= nz ? 0 : inside[i + nx * (j + ny * k)]);
  for (let k = 0; k < nz; k++)
    for (let j = 0; j < ny; j++)
      for (let i = 0; i < nx; i++) {
        const idx = i + nx * (j + ny * k);
        const edge = inside[idx] && !(at(i - 1, j, k) && at(i + 1, j, k) && at(i, j - 1, k) && at(i, j + 1, k) && at(i, j, k - 1) && at(i, j, k + 1));
        m[idx] = edge ? 1 : 0;
      }
}

async function showNifti(canvasId, bytes, name, range, overlay) {
  const nv = viewer(canvasId);
  while (nv.volumes.length) nv.removeVolume(nv.volumes[0]);
  const img = await NVImage.new(bytes.slice().buffer, name + ".nii");
  nv.addVolume(img);
  if (range) { img.cal_min = range[0]; img.cal_max = range[1]; }
  if (overlay) {
    const o = await NVImage.new(overlay.slice().buffer, name + "_mask.nii", "red", 1);
    outline(o);
    o.cal_min = 0.5; o.cal_max = 1;
    o.colorbarVisible = false;
    nv.addVolume(o);
  }
  nv.updateGLVolume();
  return img;
}

const mibText = (b) => fmtBytes(b);
function pipelineMemoryFacts(r) {
  showHeap(r.heap8_bytes);
  const rows = [["predicted peak (shown before the run)", `${mibText(r.predicted_peak_bytes)} (${r.peak_stage})`]];
  if (r.measured_peak_bytes != null)
    rows.push(["measured peak (engine, accounted)", `${mibText(r.measured_peak_bytes)} (${(r.measured_peak_bytes / r.predicted_peak_bytes * 100).toFixed(1)} % of the prediction)`]);
  rows.push([PREDICTED_HEAP_LABEL, fmtBytes(r.predicted_heap_bytes)],
            ["wasm heap high-water (HEAP8.buffer.byteLength)", fmtBytes(r.heap8_bytes)], ["budget", fmtBytes(r.budget_bytes)]);
  return rows;
}

function scanFacts(r) {
  const s = r.scan;
  const te = s.te_s.map((t) => (t * 1000).toPrecision(3)).join(", ");
  return [["scan", `${s.dims.join("×")} × ${s.echoes} echo(es), ${s.voxel_mm.map((v) => v.toPrecision(3)).join("×")} mm`],
          ["echo times", `${te} ms (${s.te_from === "--te" ? "typed" : "sidecars"})`],
          ["B0", `${s.b0_t} T (${s.b0_from === "--b0" ? "typed" : "sidecars"}), direction ${s.b0_dir.map((x) => x.toFixed(3)).join(", ")} (${s.b0_dir_from === "--b0-dir" ? "typed" : s.b0_dir_from})`],
          ["mask", `${r.mask_voxels} voxels; local field valid in ${r.local_mask_voxels}`]];
}

function stageFacts(r) {
  return r.stages.map((st) => [`${st.stage}: ${st.method}`,
    `${st.seconds.toFixed(2)} s · memory predicted ${mibText(st.predicted_peak_bytes)}, measured ${mibText(st.measured_peak_bytes)}` +
    (st.iterations != null ? ` · ${st.iterations} iterations` : "")]);
}

// A window 0 … w for a map that is not negative (R2*): w the 99th percentile inside the mask,
// to two significant digits.
function upperWindow(img, maskImg) {
  const v = img.img, m = maskImg.img, a = [];
  for (let i = 0; i < v.length; i++) if (m[i] > 0 && Number.isFinite(v[i])) a.push(v[i]);
  if (!a.length) return 1;
  a.sort((x, y) => x - y);
  const w = a[Math.min(a.length - 1, Math.floor(0.99 * a.length))];
  return w > 0 ? Number(w.toPrecision(2)) : 1;
}

// The fourth view: R2* (s⁻¹) in grey from 0 to its 99th percentile inside the brain mask.
async function showR2star(reply, niftis) {
  if (!niftis.r2star) return;
  $("r2star-figure").hidden = false;
  const brain = await NVImage.new(niftis.brain_mask.slice().buffer, "brain_mask.nii");
  const r2 = await showNifti("view-r2star", niftis.r2star, "r2star", null);
  const w = upperWindow(r2, brain);
  r2.cal_min = 0; r2.cal_max = w;
  viewers["view-r2star"].updateGLVolume();
  reply.r2star_window_hz = w;
  $("r2star-caption").textContent = `R2* (s⁻¹) · window 0 … ${w} s⁻¹ (99th percentile in the brain mask) · log-linear fit over the echoes`;
  $("download-r2star").hidden = false;
  $("download-r2star").disabled = false;
}

async function showPipeline(reply, niftis) {
  progress(1, "Drawing");
  const t0 = performance.now();
  window.qsmPage.niftis = niftis;
  window.qsmPage.chiNifti = niftis.chi || null;
  last = { chiNifti: niftis.chi || null, r2starNifti: niftis.r2star || null };
  const mask = await NVImage.new(niftis.mask.slice().buffer, "mask.nii");
  if (niftis.local_field) {
    const local = await showNifti("view-input", niftis.local_field, "local_field", null);
    const wl = symmetricWindow(local, mask);
    local.cal_min = -wl; local.cal_max = wl;
    $("input-caption").textContent = `local field (ppm) · window −${wl} … +${wl} ppm`;
  } else {
    $("input-caption").textContent = "local field: none (the network took the wrapped phase)";
  }
  if (niftis.chi) {
    const chi = await showNifti("view-chi", niftis.chi, "chi", null);
    const w = symmetricWindow(chi, mask);
    chi.cal_min = -w; chi.cal_max = w;
    reply.chi_window_ppm = w;
    $("chi-caption").textContent = `χ (ppm) · symmetric window −${w} … +${w} ppm (99th percentile of |χ| in the mask)`;
  } else {
    $("chi-caption").textContent = "χ: none (inversion off)";
  }
  for (const id of ["view-input", "view-chi"]) if (viewers[id]) viewers[id].updateGLVolume();
  if (niftis.total_field) {
    $("extra-figure").hidden = false;
    const total = await showNifti("view-extra", niftis.total_field, "total_field", null, niftis.brain_mask);
    const wt = symmetricWindow(total, mask);
    total.cal_min = -wt; total.cal_max = wt;
    viewers["view-extra"].updateGLVolume();
    $("extra-caption").textContent = `total field (Hz) · window −${wt} … +${wt} Hz · brain mask's outline in red`;
  }
  await showR2star(reply, niftis);
  $("download").disabled = !niftis.chi;
  reply.draw_seconds = (performance.now() - t0) / 1000;
  progress(1, "Done");
}

// The engine's messages name qsm pipeline's options; here they are the page's fields.
function pageWords(err) {
  err.message = err.message.replace(/--te\b/g, "the TE field").replace(/--b0(?!-)\b/g, "the B0 field");
  return err;
}

async function runPipeline() {
  await guarded(async () => { try { await pipelineRun(); } catch (err) { throw pageWords(err); } });
}

async function pipelineRun() {
  const dicom = $("pl-dicom").files;
  let magnitude, phase, sidecars, note = "";
  if (dicom.length) {
    ({ magnitude, phase, sidecars, note } = await convertDicom(dicom));
  } else {
    magnitude = $("pl-mag").files;
    phase = $("pl-phase").files;
    sidecars = await sidecarsByName($("pl-json").files);
  }
  const mag = series(magnitude, sidecars, "magnitude"), ph = series(phase, sidecars, "phase");
  const maskFile = $("pl-mask").files[0];
  const options = pipelineOptions();
  const spec = pipelineNetwork();
  const model = spec ? await chosenWeights(spec, "pl-onnx") : null;
  const t0 = performance.now();
  const { reply, niftis } = await call({
    cmd: "pipeline", options, model,
    magnitude: mag.items.map(({ name, file, sidecar }) => ({ name, file, sidecar })),
    phase: ph.items.map(({ name, file, sidecar }) => ({ name, file, sidecar })),
    mask: maskFile ? { name: maskFile.name, file: maskFile, sidecar: null } : null,
  });
  reply.worker_seconds = (performance.now() - t0) / 1000;
  reply.echo_order = { magnitude: mag.order, phase: ph.order };
  window.qsmPage.reply = reply;
  const weights = model ? [["inversion network", `${spec.name}: ${model.name} (SHA-256 ${model.sha.slice(0, 12)}…${model.note ? ", not the registry's file" : ""})`]] : [];
  facts([...scanFacts(reply), ...weights, ...stageFacts(reply),
         ["time", `read ${reply.read_seconds.toFixed(2)} s, stages ${reply.pipeline_seconds.toFixed(2)} s, write ${reply.write_seconds.toFixed(2)} s; whole run ${reply.worker_seconds.toFixed(2)} s`],
         ...pipelineMemoryFacts(reply)]);
  await showPipeline(reply, niftis);
  const notes = [note, model && model.note, `echo order: magnitude ${mag.order}, phase ${ph.order}`, ...reply.notes].filter(Boolean);
  say(`Done: the pipeline (${reply.stages.map((s) => s.method).join(" → ")}).\n` + notes.join("\n"), "ok");
}

async function finishRun(reply, chi, dims, voxel, affine, label, input, inputLabel) {
  progress(1, "Drawing");
  const t0 = performance.now();
  last = { dims, voxel, affine, chi };
  window.qsmPage.reply = reply;
  window.qsmPage.chiNifti = niftiBytes(chi, dims, voxel, affine);
  $("input-caption").textContent = `${inputLabel} · ${label}`;
  $("chi-caption").textContent = "χ (ppm)";
  await show("view-input", input, dims, voxel, affine, "input", null);
  await show("view-chi", chi, dims, voxel, affine, "chi", [-0.1, 0.2]);
  $("download").disabled = false;
  reply.draw_seconds = (performance.now() - t0) / 1000;
  progress(1, "Done");
}

// χ, or the pipeline's R2* (`which` "r2star"), as .nii.gz.
async function download(which) {
  if (!last) return;
  const r2 = which === "r2star";
  if (r2 && !last.r2starNifti) return;
  const nifti = r2 ? last.r2starNifti : last.chiNifti || (last.chi && niftiBytes(last.chi, last.dims, last.voxel, last.affine));
  if (!nifti) return;
  const bytes = await gzip(nifti);
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([bytes], { type: "application/gzip" }));
  a.download = r2 ? "r2star.nii.gz" : "chi.nii.gz";
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

// A tiled network's registry figures (docs/memory.md §4.5), shown as they are. What they mean for a
// run, the tiles in flight and the peak, is the engine's tile plan (qsm_web_tile_plan, below):
// the page computes no budget of its own.
function tileNote(s) {
  if (!s.tiled) return "";
  if (s.native_tile_bytes_per_voxel == null) return " · tiled; tile cost not measured yet";
  const wasm = s.tile_bytes_per_voxel != null ? `${s.tile_bytes_per_voxel} B/voxel in wasm32` : "wasm32 not measured (native figure budgets)";
  // A whole tiled run in wasm32 (docs/memory.md §4.6): what this page budgets its tiles with.
  const run = s.wasm_tiled_run
    ? `; a tiled run here: ${fmtBytes(s.wasm_tiled_run.held_bytes)} held + ${s.wasm_tiled_run.tile_bytes_per_voxel} B/voxel + ` +
      `${fmtBytes(s.wasm_tiled_run.tile_fixed_bytes)} a tile`
    : "";
  return ` · tiled: tile cost ${wasm}, native ${s.native_tile_bytes_per_voxel} B/voxel + ${fmtBytes(s.native_tile_fixed_bytes)}${run}`;
}

// Networks the page can feed: a wrapper exists and it needs at most a field and a mask.
function fillNetworks() {
  const sel = $("network");
  for (const s of registry) {
    const n = s.needs;
    if (!n || !n.field || n.magnitude || n.r2star || n.r2prime || n.qsm) continue;
    const opt = document.createElement("option");
    opt.value = s.id;
    opt.textContent = `${s.name} (${n.field_kind})`;
    sel.append(opt);
  }
  sel.value = "qsmcore-invnet";
  const note = () => {
    const s = registry.find((x) => x.id === sel.value);
    const f = s.files[0] || {};
    $("network-note").textContent = (f.shipped ? "shipped with qsmcore: works offline"
      : f.url ? `weights from ${new URL(f.url).host} (${fmtBytes(f.bytes)}), SHA-256 checked, cached in this browser`
      : "weights not hosted: choose a local ONNX file") + tileNote(s);
  };
  sel.onchange = () => { note(); planSoon(); };
  note();
  planSoon();
}

// The pipeline's network inversions: the registry's networks on the local field that
// network_inversion_ids() names, qsmcore InvNet (shipped) first.
function fillPipelineNetworks() {
  const group = $("pl-networks");
  const specs = registry.filter((s) => pipelineNetworks.includes(s.id) && s.needs && s.needs.field_kind === "local field");
  specs.sort((a, b) => (b.id === "qsmcore-invnet") - (a.id === "qsmcore-invnet"));
  group.replaceChildren(...specs.map((s) => {
    const opt = document.createElement("option");
    opt.value = s.id;
    opt.textContent = s.name;  // the note below says where its weights come from
    return opt;
  }));
  pipelineNote();
}
function pipelineNote() {
  const spec = pipelineNetwork();
  $("pl-onnx-label").hidden = !spec;
  if (!spec) { $("pl-note").textContent = ""; return; }
  const f = spec.files[0] || {};
  $("pl-onnx-hint").textContent = f.shipped ? "(optional: the shipped file is used)" : f.url ? "(optional: else downloaded)" : "(needed)";
  $("pl-note").textContent = `${spec.name} inverts the local field in place of the classical methods; ` +
    (f.shipped ? "its weights are shipped with qsmcore (works offline)."
      : f.url ? `weights: your ONNX file, or ${new URL(f.url).host}'s (${fmtBytes(f.bytes)}, SHA-256 checked, cached in this browser).`
      : "its weights are not hosted: choose its ONNX file.");
}

$("threads").value = variant === "mt" ? navigator.hardwareConcurrency : 1;
$("threads").max = variant === "mt" ? navigator.hardwareConcurrency : 1;
$("threads").disabled = variant !== "mt";
$("run-demo").onclick = runDemo;
$("run-user").onclick = runUser;
$("run-pipeline").onclick = runPipeline;
$("download").onclick = () => download("chi");
$("download-r2star").onclick = () => download("r2star");
$("pl-inversion").onchange = pipelineNote;
if (variant === "mt" && !self.crossOriginIsolated) {
  say("The pthread build needs a crossOriginIsolated page (COOP/COEP headers); open it without ?variant=mt.", "error");
  setState("error");
} else {
  startWorker();
}
