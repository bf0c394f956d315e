// The page's side of bench/wasm_vs_ort_web.js: one Web Worker per engine and case (a wasm memory
// never shrinks, so each case needs its own module for its heap high-water to be its own), off
// the page's main thread (a blocking wasm call is allowed there), driven by commands:
// window.step(engine, {cmd: "open", model, input, shape, threads} | {cmd: "run"} | {cmd: "close"}).
// Both engines stay open during a case, so the driver can alternate their timed runs.
"use strict";
const workers = {};
const outputs = {};  // engine -> the output its "close" returned, for compare()

window.step = (engine, msg) => new Promise((resolve) => {
  if (msg.cmd === "open") {
    if (workers[engine]) workers[engine].terminate();
    workers[engine] = engine === "qsm" ? new Worker("qsm_worker.js") : new Worker("ort_worker.js", { type: "module" });
  }
  const worker = workers[engine];
  worker.onmessage = (e) => {
    if (e.data.type === "log") return;
    const reply = e.data;
    if (msg.cmd === "close") {
      worker.terminate();
      delete workers[engine];
      if (reply.output) outputs[engine] = reply.output;
      delete reply.output;
    }
    resolve(reply);
  };
  worker.onerror = (e) => resolve({ error: "worker: " + e.message });
  worker.postMessage(msg);
});

// max|qsm - ort| over ORT's output range.
window.compare = () => {
  const a = outputs.qsm, b = outputs.ort;
  if (!a || !b) return { error: "missing output" };
  if (a.length !== b.length) return { error: `output sizes ${a.length} vs ${b.length}` };
  let lo = Infinity, hi = -Infinity, d = 0, finite = true;
  for (let i = 0; i < a.length; i++) {
    if (!Number.isFinite(a[i]) || !Number.isFinite(b[i])) finite = false;
    lo = Math.min(lo, b[i]); hi = Math.max(hi, b[i]);
    d = Math.max(d, Math.abs(a[i] - b[i]));
  }
  return { max_abs_diff: d, range: hi - lo, rel: d / (hi - lo), finite };
};
