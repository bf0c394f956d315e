// Driver of bench/wasm_vs_ort_web.sh: headless Chromium (puppeteer-core, Debian's chromium, as
// tests/web/page_test.js) on tools/web/serve.js --bench DATA, crossOriginIsolated. Per case
// (model, shape, threads): qsmcore-wasm and onnxruntime-web, each in a fresh Worker, loaded and
// warmed up, then REPEAT timed runs of each, alternating (medians reported); then the native
// `qsm onnx run` (warm-up + REPEAT runs) right after, on the same file and input.
// Prints the markdown table on stdout, progress on stderr.
//   node bench/wasm_vs_ort_web.js --data DIR --qsm build/qsm --repeat 3 --threads 1,2 \
//        --case NAME:MODEL.onnx:INPUT:DxHxW[:C][:GFLOP] ...
// INPUT names DIR/INPUT.bin (raw float32, for the page) and DIR/INPUT.npy (for native qsm).
"use strict";
const { spawn, execFileSync } = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");

const root = path.resolve(__dirname, "..");
const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : def);
const data = path.resolve(opt("--data"));
const qsmBin = path.resolve(opt("--qsm", "build/qsm"));
const repeat = Number(opt("--repeat", "3"));
const threadsList = opt("--threads", "1,2").split(",").map(Number);
// Where qsmcore-wasm keeps the weights: "full" (in the wasm heap, as ORT-web) or "stream" (read
// from the model's Blob as each layer runs, residency stream:host=0: not in the heap).
const weights = opt("--qsm-weights", "full");
if (!["full", "stream"].includes(weights)) throw new Error(`--qsm-weights ${weights}: full or stream`);
const cases = argv.flatMap((a, i) => (argv[i - 1] === "--case" ? [a] : [])).map((s) => {
  const [name, model, input, dims, ch, gflop] = s.split(":");
  return { name, model, input, dims: dims.split("x").map(Number), channels: Number(ch || 1), gflop: Number(gflop || 0) };
});
const puppeteer = require(path.join(root, "node_modules/puppeteer-core"));
const log = (m) => process.stderr.write(`wasm_vs_ort_web: ${m}\n`);
const median = (a) => { const s = [...a].sort((x, y) => x - y); const n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };
const load1 = () => Number(fs.readFileSync("/proc/loadavg", "utf8").split(" ")[0]);

function startServer() {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [path.join(root, "tools/web/serve.js"), "--port", "0", "--bench", data],
      { stdio: ["ignore", "pipe", "inherit"] });
    p.stdout.on("data", (d) => {
      const m = /http:\/\/127\.0\.0\.1:\d+\//.exec(String(d));
      if (m) resolve({ process: p, url: m[0] });
    });
    p.on("exit", (code) => reject(new Error("the server exited with " + code)));
  });
}

// build/qsm may be relinked by someone else's build in the shared tree (EACCES, ETXTBSY,
// ENOENT while the linker writes it): wait and try again rather than lose the whole bench.
function retrying(f) {
  for (let i = 0; ; i++) {
    try { return f(); } catch (e) {
      if (i >= 20 || !["EACCES", "ETXTBSY", "ENOENT"].includes(e.code)) throw e;
      log(`build/qsm not runnable (${e.code}), retrying in 15 s`);
      execFileSync("sleep", ["15"]);
    }
  }
}

// The native engine on the same file and input: median of the planned runs after the first.
function native(c, threads) {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), "qsm-bench-"));
  const inputName = c.inputName;
  const text = retrying(() => execFileSync(qsmBin, ["onnx", "run", path.join(data, c.model), "--in", `${inputName}=${path.join(data, c.input + ".npy")}`,
    "--out", out, "--threads", String(threads), "--repeat", String(repeat + 1)], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }));
  fs.rmSync(out, { recursive: true, force: true });
  const m = /median of \d+ planned runs: ([0-9.]+) s/.exec(text);
  if (!m) throw new Error("no median in qsm's output: " + text.slice(-300));
  return Number(m[1]);
}

// The graph input's name, for the native command line (the page takes the first input).
function inputNameOf(model) {
  const text = retrying(() => execFileSync(qsmBin, ["onnx", "info", path.join(data, model)], { encoding: "utf8" }));
  const m = /^inputs:\n\s+([^:\s]+):/m.exec(text);
  if (!m) throw new Error("no input name in qsm onnx info: " + text.slice(0, 300));
  return m[1];
}

async function main() {
  const server = await startServer();
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "qsm-bench-chromium-"));
  const browser = await puppeteer.launch({
    executablePath: process.env.QSM_CHROMIUM || "/usr/lib/chromium/chromium", pipe: true, userDataDir: profile,
    protocolTimeout: 3600e3,
    args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  const rows = [];
  const loads = [];
  let order = 0;
  try {
    const page = await browser.newPage();
    page.on("console", (m) => log("page: " + m.text().slice(0, 300)));
    await page.goto(server.url + "bench/index.html");
    await page.waitForFunction(() => document.body.dataset.state === "ready");
    if (!(await page.evaluate(() => crossOriginIsolated))) throw new Error("the bench page is not crossOriginIsolated");
    const version = await browser.version();
    for (const c of cases) {
      c.inputName = inputNameOf(c.model);
      for (const threads of threadsList) {
        const config = { model: `/bench-data/${c.model}`, input: `/bench-data/${c.input}.bin`,
          shape: [1, c.channels, ...c.dims], threads, repeat, weights };
        const r = {};
        loads.push(load1());
        // Both engines open (load + warm-up), then their timed runs alternate, the first engine
        // swapping every round, so slow spells of this shared machine hit both alike.
        const engines = order++ % 2 ? ["ort", "qsm"] : ["qsm", "ort"];
        const step = async (engine, msg) => {
          const reply = await page.evaluate((e, m) => window.step(e, m), engine, msg);
          if (reply.error) throw new Error(`${engine} ${msg.cmd} on ${c.name} ${c.dims.join("x")}: ${reply.error}`);
          return reply;
        };
        for (const engine of engines) r[engine] = await step(engine, { ...config, cmd: "open" });
        for (let i = 0; i < repeat; i++) {
          for (const engine of i % 2 ? [...engines].reverse() : engines) {
            r[engine].run_seconds.push((await step(engine, { cmd: "run" })).seconds);
          }
        }
        for (const engine of engines) {
          Object.assign(r[engine], await step(engine, { cmd: "close" }));
          log(`${c.name} ${c.dims.join("x")} t${threads} ${engine}: runs ${r[engine].run_seconds.map((x) => x.toFixed(3)).join(" ")} s, heap ${(r[engine].heap_end_bytes / 2 ** 20).toFixed(1)} MiB` +
            (engine === "qsm" ? ` (at start ${(r.qsm.heap_start_bytes / 2 ** 20).toFixed(1)}, accounted peak ${(r.qsm.accounted_peak_bytes / 2 ** 20).toFixed(1)})` : ""));
        }
        r.diff = await page.evaluate(() => window.compare());
        r.native = native(c, threads);
        loads.push(load1());
        log(`${c.name} ${c.dims.join("x")} t${threads} native ${r.native.toFixed(3)} s; max|Δ|/range ${r.diff.rel.toExponential(2)}`);
        rows.push({ c, threads, r });
      }
    }
    const fmtT = (s, c) => (c.gflop ? `${s.toFixed(3)} (${(c.gflop / s).toFixed(1)} GF/s)` : s.toFixed(2));
    const mib = (b) => (b / 2 ** 20).toFixed(1);
    const out = [];
    out.push(`| case | shape | thr | qsmcore-wasm s | ORT-web s | qsm/ORT | native qsm s | wasm/native | qsm heap MiB | ORT heap MiB | qsm/ORT | max|Δ|/range |`);
    out.push(`|---|---|---|---|---|---|---|---|---|---|---|---|`);
    for (const { c, threads, r } of rows) {
      const q = median(r.qsm.run_seconds.slice(1)), o = median(r.ort.run_seconds.slice(1));
      // The ratio of the runs made back to back (round i of each engine), median over rounds.
      const paired = median(r.qsm.run_seconds.slice(1).map((x, i) => x / r.ort.run_seconds[i + 1]));
      out.push(`| ${c.name} | ${c.channels > 1 ? c.channels + "×" : ""}${c.dims.join("×")} | ${threads} | ${fmtT(q, c)} | ${fmtT(o, c)} | ${paired.toFixed(2)} | ` +
        `${fmtT(r.native, c)} | ${(q / r.native).toFixed(2)} | ${mib(r.qsm.heap_end_bytes)} | ${mib(r.ort.heap_end_bytes)} | ` +
        `${(r.qsm.heap_end_bytes / r.ort.heap_end_bytes).toFixed(2)} | ${r.diff.rel.toExponential(1)} |`);
    }
    console.log(out.join("\n"));
    console.log(`\n${version} headless, crossOriginIsolated; onnxruntime-web ${rows[0] ? rows[0].r.ort.ort_version : "?"} (wasm EP, simd-threaded build, ` +
      `numThreads = thr); qsmcore-wasm: build-wasm/mt/qsm-web (threads = thr, weights ${weights === "full" ? "in the wasm heap" : "streamed from the model's Blob (stream:host=0)"}). Times: median of ${repeat} runs after a warm-up (time qsm/ORT: median of the back-to-back pairs' ratios), ` +
      `each engine in a fresh Worker per row, both open at once, their timed runs alternating. Heap: the wasm memory's byteLength after load + runs (never shrinks: high-water); qsmcore: HEAP8.buffer, ORT-web: the WebAssembly.Memory its module creates (constructor wrapped in the Worker). ` +
      `Native: build/qsm onnx run --threads thr --repeat ${repeat + 1}. Load average (1 min) over the rows: ` +
      `${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)} (median ${median(loads).toFixed(1)}) on ${os.cpus().length} CPUs.`);
  } finally {
    await browser.close();
    server.process.kill();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

main().catch((e) => { log("FAIL: " + (e && e.stack || e)); process.exit(1); });
