// onnxruntime-web side of bench/web (npm onnxruntime-web 1.30, wasm EP, its SIMD + threads
// build, numThreads set explicitly), driven like qsm_worker.js: "open" (session + warm-up run),
// "run" (one timed run), "close". Its heap: ORT's emscripten module creates its wasm Memory in
// JS (`new WebAssembly.Memory({initial: 256, maximum: 65536, shared: true})`) and does not
// expose it, so the constructor is wrapped before ORT loads to keep a reference; its
// buffer.byteLength, which never shrinks, read after the runs is the high-water.
const memories = [];
const NativeMemory = WebAssembly.Memory;
WebAssembly.Memory = function (desc) {
  const m = new NativeMemory(desc);
  memories.push(m);
  return m;
};
WebAssembly.Memory.prototype = NativeMemory.prototype;
// The largest memory made (ORT also makes a 0-page placeholder).
const heapBytes = () => Math.max(0, ...memories.map((m) => m.buffer.byteLength));

let ort = null, session = null, feeds = null, out = null;

async function open(c) {
  ort = await import("/ort/ort.wasm.min.mjs");
  ort.env.wasm.wasmPaths = new URL("/ort/", self.location.href).href;
  ort.env.wasm.numThreads = c.threads;
  ort.env.wasm.proxy = false;  // already in a worker
  if ("simd" in ort.env.wasm) ort.env.wasm.simd = true;
  const [model, input] = await Promise.all([c.model, c.input].map((u) => fetch(u).then((r) => r.arrayBuffer())));
  const t = performance.now();
  session = await ort.InferenceSession.create(new Uint8Array(model), {
    executionProviders: ["wasm"], graphOptimizationLevel: "all",
  });
  const reply = { load_seconds: (performance.now() - t) / 1000, heap_after_load_bytes: heapBytes() };
  feeds = { [session.inputNames[0]]: new ort.Tensor("float32", new Float32Array(input), c.shape) };
  reply.run_seconds = [(await run()).seconds];  // the warm-up
  reply.ort_version = ort.env.versions ? ort.env.versions.web : "";
  return reply;
}

async function run() {
  if (out) out.dispose();  // the previous output freed first, as qsmcore's is
  const t = performance.now();
  const r = await session.run(feeds);
  const seconds = (performance.now() - t) / 1000;
  out = r[session.outputNames[0]];
  return { seconds };
}

async function close() {
  const reply = { heap_end_bytes: heapBytes(), memories: memories.length, output: new Float32Array(out.data) };
  await session.release();
  return reply;
}

onmessage = async (e) => {
  try {
    const c = e.data;
    postMessage(c.cmd === "open" ? await open(c) : c.cmd === "run" ? await run() : await close());
  } catch (err) {
    postMessage({ error: String(err && err.stack || err) });
  }
};
