// qsmcore-wasm side of bench/web: loads the pthread build of the page's module (qsm-web), writes
// the ONNX bytes into MEMFS (the page's way), or with weights "stream" mounts the fetched Blob
// with WORKERFS and runs with residency stream:host=0 (the page's "streamed from the file": the
// weights stay out of the wasm heap), copies the input into the heap; then, on the
// driver's commands: "open" (load, plan, warm-up run: qsm_bench_onnx, src/wasm/bench_api.cpp),
// "run" (one timed run: qsm_bench_again), "close" (heap, accounted peak, output). Heap =
// HEAP8.buffer.byteLength, which never shrinks: read after the runs, it is the module's high-water.
"use strict";
let qsm = null;
const heap = () => (qsm.wasmMemory ? qsm.wasmMemory.buffer : qsm.HEAP8.buffer);

async function open(c) {
  const base = new URL("/build-wasm/mt/", self.location.href).href;
  importScripts(base + "qsm-web.js");
  qsm = await createQsm({
    mainScriptUrlOrBlob: base + "qsm-web.js",  // pthread workers must load the module, not us
    locateFile: (f) => base + f,
    print: () => {}, printErr: (t) => postMessage({ type: "log", text: t }),
  });
  const heapStart = heap().byteLength;
  const streamed = c.weights === "stream";
  const [model, input] = await Promise.all([fetch(c.model).then((r) => (streamed ? r.blob() : r.arrayBuffer())),
    fetch(c.input).then((r) => r.arrayBuffer())]);
  let modelPath = "/model.onnx";
  if (streamed) {
    qsm.FS.mkdir("/blob");
    qsm.FS.mount(qsm.FS.filesystems.WORKERFS, { blobs: [{ name: "model.onnx", data: model }] }, "/blob");
    modelPath = "/blob/model.onnx";
  } else {
    qsm.FS.writeFile(modelPath, new Uint8Array(model));
  }
  const x = new Float32Array(input);
  const ptr = qsm._malloc(x.byteLength);
  new Float32Array(heap(), ptr, x.length).set(x);
  const req = { model_path: modelPath, shape: c.shape, threads: c.threads, repeat: 0,
    residency: streamed ? "stream:host=0" : "full" };
  const reply = JSON.parse(qsm.ccall("qsm_bench_onnx", "string", ["string", "number"], [JSON.stringify(req), ptr]));
  reply.heap_start_bytes = heapStart;
  return reply;
}

function run() {
  const s = qsm._qsm_bench_again();
  return s < 0 ? { error: "qsm_bench_again failed" } : { seconds: s };
}

function close() {
  const n = qsm._qsm_bench_output_size();
  return {
    heap_end_bytes: heap().byteLength, accounted_peak_bytes: qsm._qsm_bench_accounted_peak(),
    output: new Float32Array(heap(), qsm._qsm_bench_output_data(), n).slice(),
  };
}

onmessage = async (e) => {
  try {
    const c = e.data;
    postMessage(c.cmd === "open" ? await open(c) : c.cmd === "run" ? run() : close());
  } catch (err) {
    postMessage({ error: String(err && err.stack || err) });
  }
};
