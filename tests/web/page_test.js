// The web page end to end in headless Chromium (puppeteer-core, Debian's chromium):
//   node tests/web/page_test.js --qsm build/qsm --out build/web [--skip-st]
// 1. the native `qsm demo --size 64` (oneDNN, FFTW: the independent oracle) writes χ and the mask;
// 2. tools/web/serve.js serves the page crossOriginIsolated; the phantom demo is clicked through
//    the UI (pthread build) and the χ NIfTI its Download button writes is compared voxel by voxel
//    with the native χ: max|Δ| inside the mask ≤ 1e-5 × the native χ's range there, every voxel
//    finite; a screenshot is saved (OUT/screenshot.png);
// 3. with a 16 MiB budget the same demo must be refused with a message, and the heap must not
//    grow (nothing of the run was allocated), and the previous χ must have left the page;
// 4. "your data": the native demo's local field and mask (.nii.gz) and the network's ONNX file
//    through the file pickers,
//    compared with the native `qsm run qsmcore-invnet` on the same files;
//    then xQSM with a mirror (?mirror=) serving other bytes under its file name: refused by the
//    SHA-256 check, nothing cached in IndexedDB; a 4-D field: refused by name;
//    the same run with the weights streamed from the chosen File: χ identical to the bit, bytes read;
// 5. a second server without COOP/COEP: the page picks the single-threaded build, same check, with
//    the shipped weights streamed from their Blob.
"use strict";
const { execFile } = require("child_process");
const { promisify } = require("util");
const execFileAsync = promisify(execFile);
const fs = require("fs");
const os = require("os");
const path = require("path");
const zlib = require("zlib");

const {
  root, argv, opt, qsm, out, chromium, puppeteer, servers, fail, log, mib, readNifti, startServer, waitState, pageBytes,
  launch,
} = require("./common").harness("web.page", "build/web");
const size = 64;
// Where a run's time went, from the page's reply.
function timings(r) {
  return ["read", "simulate", "predict", "network", "metrics", "worker", "draw"]
    .filter((k) => r[k + "_seconds"] != null).map((k) => `${k} ${r[k + "_seconds"].toFixed(2)}`).join(", ") + " s";
}

// The same NIfTI-1 file with its volume twice, as 4-D (dim[0] = 4, dim[4] = 2), uncompressed.
function writeTwoFrames(bytes, outPath) {
  if (bytes[0] === 0x1f && bytes[1] === 0x8b) bytes = zlib.gunzipSync(bytes);
  const b = Buffer.from(bytes);
  const offset = Math.round(b.readFloatLE(108));
  b.writeInt16LE(4, 40);
  b.writeInt16LE(2, 48);
  fs.writeFileSync(outPath, Buffer.concat([b, b.subarray(offset)]));
}

function compare(label, page, native, mask) {
  if (page.dims.join() !== native.dims.join()) fail(`${label}: χ is ${page.dims.join("x")}, native ${native.dims.join("x")}`);
  let lo = Infinity, hi = -Infinity, maxDiff = 0, inside = 0;
  for (let i = 0; i < native.data.length; i++) {
    if (!Number.isFinite(page.data[i])) fail(`${label}: voxel ${i} of the page's χ is ${page.data[i]}`);
    if (mask.data[i] <= 0.5) continue;
    inside++;
    lo = Math.min(lo, native.data[i]);
    hi = Math.max(hi, native.data[i]);
    maxDiff = Math.max(maxDiff, Math.abs(page.data[i] - native.data[i]));
  }
  const tol = 1e-5 * (hi - lo);
  log(`${label}: max|Δ| ${maxDiff.toExponential(3)} ppm over ${inside} mask voxels, range ${(hi - lo).toFixed(4)} ppm, tolerance ${tol.toExponential(3)}`);
  if (!(inside > 0 && maxDiff <= tol)) fail(`${label}: the page's χ differs from the native one by ${maxDiff} > ${tol}`);
}

// Loads the page, runs the demo (budget in MiB, or "" for the default); returns the state, the
// page's reply and message, and the χ NIfTI bytes on success.
async function runDemo(page, budgetMiB, residency = "full") {
  await page.$eval("#budget", (el, v) => { el.value = v; }, budgetMiB);
  await page.select("#residency", residency);
  return clickAndCollect(page, "#run-demo");
}

// "Your data": the field and mask NIfTI files and the network's ONNX file through the file
// pickers (the local-file path; its recipe: the network chosen, qsmcore-invnet by default).
async function runUser(page, fieldPath, maskPath, residency = "full") {
  await page.$eval("#budget", (el) => { el.value = ""; });
  await page.select("#residency", residency);
  await (await page.$("#field-file")).uploadFile(fieldPath);
  await (await page.$("#mask-file")).uploadFile(maskPath);
  await (await page.$("#onnx-file")).uploadFile(path.join(root, "models/qsmcore-invnet.onnx"));
  return clickAndCollect(page, "#run-user");
}

// What the heap holds once a run returned (issue #51): in use, the engine's freed blocks kept for
// the next run not counted (they were, and came off the next run's budget), and of that the
// engine's accounted bytes. Beside the engine, the call holds the outputs it hands the worker
// (float32 copies) and the runtime's own small blocks.
function checkInUse(what, r) {
  for (const k of ["heap_in_use_bytes", "engine_in_use_bytes", "heap_bytes"])
    if (!Number.isFinite(r[k])) fail(`${what}: the reply has no ${k}: ${JSON.stringify(Object.keys(r))}`);
  const outputs = (r.outputs || []).length * r.dims.reduce((a, b) => a * b, 1) * 4;
  if (!(r.engine_in_use_bytes <= r.heap_in_use_bytes && r.heap_in_use_bytes <= r.heap_bytes))
    fail(`${what}: in use ${r.heap_in_use_bytes} B (engine ${r.engine_in_use_bytes} B) is not within the heap ${r.heap_bytes} B`);
  if (r.heap_in_use_bytes - r.engine_in_use_bytes > outputs + 16 * 1024 * 1024)
    fail(`${what}: ${r.heap_in_use_bytes} B in use after the run, the engine's ${r.engine_in_use_bytes} B and ` +
         `${outputs} B of outputs: the kept blocks are counted as in use`);
  log(`${what}: after the run ${r.heap_in_use_bytes} B in use (engine ${r.engine_in_use_bytes} B), heap ${r.heap_bytes} B`);
}

// qsm_web_run takes each array with its length and refuses one that is not its dims' before it
// reads a value (it read dims' worth of floats past a shorter array).
async function checkLengths(page) {
  const tried = await page.evaluate(async () => {
    const model = { name: "qsmcore-invnet.onnx", blob: new Blob([new Uint8Array(16)]) };
    const base = { cmd: "run", network: "qsmcore-invnet", model, dims: [8, 8, 8], voxel_mm: [1, 1, 1], threads: 1, budget_bytes: 0 };
    const errors = [];
    for (const arrays of [{ field: new Float32Array(100), mask: null }, { field: new Float32Array(512), mask: new Float32Array(500) }]) {
      try {
        await window.qsmPage.call({ ...base, ...arrays });
        errors.push(null);
      } catch (e) {
        errors.push(e.message);
      }
    }
    return errors;
  });
  if (!/the field: 100 values given, the grid 8x8x8 needs 512/.test(tried[0] || ""))
    fail(`a field of 100 values for 8x8x8 was not refused naming both: ${tried[0]}`);
  if (!/the mask: 500 values given, the grid 8x8x8 needs 512/.test(tried[1] || ""))
    fail(`a mask of 500 values for 8x8x8 was not refused naming both: ${tried[1]}`);
  log(`lengths checked: "${tried[0]}"; "${tried[1]}"`);
}

async function clickAndCollect(page, button) {
  const t = Date.now();
  await page.click(button);
  await page.waitForFunction(() => document.body.dataset.state === "running", { timeout: 10000, polling: 50 }).catch(() => {});
  const t1 = Date.now();
  const state = await waitState(page, ["done", "error"], 180000);
  log(`  ${button}: running after ${((t1 - t) / 1000).toFixed(2)} s, ${state} after ${((Date.now() - t) / 1000).toFixed(2)} s`);
  const message = await page.$eval("#message", (el) => el.textContent);
  const reply = await page.evaluate(() => window.qsmPage.reply);
  const events = await page.evaluate(() => window.qsmPage.events);
  let chi = null;
  if (state === "done") {
    chi = await pageBytes(page, "chiNifti");
  }
  return { state, message, reply, chi, events };
}

async function openPage(browser, url, expectVariant) {
  const page = await browser.newPage();
  page.on("pageerror", (e) => log("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") log("console: " + m.text().slice(0, 300)); });
  await page.setViewport({ width: 1280, height: 1100 });
  const t = Date.now();
  // ctest -j2 starts this test beside the heaviest native one: on two busy cores the page and
  // its wasm have taken over a minute to load (a failure after 93 s, 20 s alone).
  await page.goto(url, { waitUntil: "load", timeout: 180000 });
  const state = await waitState(page, ["ready", "error"], 180000);
  log(`${expectVariant} page ready in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  if (state !== "ready") fail(`the page did not start (${expectVariant}): ${await page.$eval("#message", (el) => el.textContent)}`);
  const variant = await page.evaluate(() => window.qsmPage.variant);
  if (variant !== expectVariant) fail(`the page picked the ${variant} build, expected ${expectVariant}`);
  return page;
}

async function main() {
  for (const v of argv.includes("--skip-st") ? ["mt"] : ["mt", "st"]) {
    if (!fs.existsSync(path.join(root, `build-wasm/${v}/qsm-web.wasm`))) fail(`build-wasm/${v}/qsm-web.wasm is missing: bash tools/wasm/build.sh`);
  }
  if (!fs.existsSync(chromium)) fail(`${chromium} is missing: apt-get install chromium`);
  fs.mkdirSync(out, { recursive: true });
  const t0 = Date.now();
  // The native oracles run beside the browser's first steps (page load, the demo): their
  // results are awaited only where they are compared.
  const nativeDir = path.join(out, "native");
  // qsm demo's second part: the network on the ellipsoid head's simulated local field, as the page's demo.
  const simulated = path.join(nativeDir, "simulated");
  const fieldPath = path.join(simulated, "local_field.nii.gz"), maskPath = path.join(simulated, "mask.nii.gz");
  const runOut = path.join(out, "native-run-chi.nii.gz");
  const nativeReady = (async () => {
    await execFileAsync(qsm, ["demo", "--size", String(size), "--out", nativeDir, "--quiet"]);
    await execFileAsync(qsm, ["run", "qsmcore-invnet", "--in", fieldPath, "--mask", maskPath, "--out", runOut, "--quiet"]);
    log(`native demo and run done after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    return {
      native: readNifti(fs.readFileSync(path.join(simulated, "chi_network.nii.gz"))),
      mask: readNifti(fs.readFileSync(maskPath)),
      nativeRun: readNifti(fs.readFileSync(runOut)),
    };
  })();
  nativeReady.catch(() => {});  // awaited below; a failure is reported there

  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "qsm-web-chromium-"));
  let browser = null;
  try {
    // A mirror holding a file under xQSM's weight-file name that is not xQSM's weights.
    const mirrorDir = path.join(out, "mirror");
    fs.mkdirSync(mirrorDir, { recursive: true });
    const xqsm = JSON.parse((await execFileAsync(qsm, ["models", "show", "xqsm", "--json"])).stdout);
    fs.copyFileSync(path.join(root, "models/qsmcore-invnet.onnx"), path.join(mirrorDir, xqsm.files[0].name));
    const isolated = await startServer(["--mirror", mirrorDir]);
    servers.push(isolated.process);
    browser = await launch(profile);

    // The pthread build, isolated.
    let t = Date.now();
    const page = await openPage(browser, isolated.url + "?mirror=/mirror/", "mt");
    const mt = await runDemo(page, "");
    if (mt.state !== "done") fail("mt demo: " + mt.message);
    log(`mt demo ${((Date.now() - t) / 1000).toFixed(1)} s (${timings(mt.reply)}), ` +
        `predicted peak ${mt.reply.predicted_peak_bytes} B, heap ${mt.reply.heap8_bytes} B`);
    // What the user gets: the Download button's chi.nii.gz (gzip by the page), not the in-memory copy.
    const downloads = path.join(out, "download");
    fs.rmSync(downloads, { recursive: true, force: true });
    fs.mkdirSync(downloads, { recursive: true });
    const cdp = await page.createCDPSession();
    await cdp.send("Browser.setDownloadBehavior", { behavior: "allow", downloadPath: downloads });
    await page.click("#download");
    const downloaded = path.join(downloads, "chi.nii.gz");
    for (let i = 0; i < 100 && !fs.existsSync(downloaded); i++) await new Promise((r) => setTimeout(r, 100));
    if (!fs.existsSync(downloaded)) fail("the Download button wrote no chi.nii.gz");
    const { native, mask, nativeRun } = await nativeReady;
    compare("mt (downloaded chi.nii.gz)", readNifti(fs.readFileSync(downloaded)), native, mask);
    // The page heard of the prediction before the result, and of progress before both.
    const ev = mt.events;
    if (!(ev.indexOf("progress") >= 0 && ev.indexOf("progress") < ev.indexOf("predicted") && ev.indexOf("predicted") < ev.indexOf("done")))
      fail("the worker's events were not progress, predicted, done in that order: " + ev.join(","));
    await new Promise((r) => setTimeout(r, 500));  // let NiiVue draw
    await page.screenshot({ path: path.join(out, "screenshot.png"), fullPage: true });

    // Over budget: refused with a message, before the run allocates anything.
    const heapBefore = mt.reply.heap8_bytes;
    const refused = await runDemo(page, "16");
    if (refused.state !== "error" || !/Refused before allocating/.test(refused.message) || !/budget/i.test(refused.message))
      fail(`a 16 MiB budget was not refused with a message: state ${refused.state}, "${refused.message}"`);
    if (refused.reply.heap_bytes > heapBefore) fail(`the refused run grew the heap: ${heapBefore} -> ${refused.reply.heap_bytes}`);
    log(`refused: "${refused.message.split("\n")[0].slice(0, 200)}"`);
    // The previous run's χ leaves the page: nothing drawn, nothing to download.
    const leftOver = await page.evaluate(() => ({ volumes: window.qsmPage.shownVolumes(), chi: window.qsmPage.chiNifti !== null,
                                                  download: !document.querySelector("#download").disabled }));
    if (leftOver.volumes || leftOver.chi || leftOver.download)
      fail(`after the refusal the page still shows the previous result: ${JSON.stringify(leftOver)}`);
    await page.screenshot({ path: path.join(out, "screenshot-refused.png"), fullPage: true });

    t = Date.now();
    const user = await runUser(page, fieldPath, maskPath);
    if (user.state !== "done") fail("run on a NIfTI field: " + user.message);
    log(`run on a NIfTI field ${((Date.now() - t) / 1000).toFixed(1)} s (${timings(user.reply)}), ` +
        `predicted heap ${user.reply.predicted_heap_bytes} B, heap ${user.reply.heap8_bytes} B`);
    compare("mt, NIfTI field", readNifti(user.chi), nativeRun, mask);
    checkInUse("mt, NIfTI field", user.reply);
    await checkLengths(page);
    // The same run with the weights streamed from the chosen File (WORKERFS): read on demand, a
    // window at a time, and the same χ to the bit (same kernels, same order).
    const streamed = await runUser(page, fieldPath, maskPath, "stream:host=0");
    if (streamed.state !== "done") fail("run with streamed weights: " + streamed.message);
    const w = streamed.reply.weights || {};
    const modelBytes = fs.statSync(path.join(root, "models/qsmcore-invnet.onnx")).size;
    if (w.execution_residency !== "dense_disk_stream" || !(w.read_bytes > 0) || !(w.largest_window_bytes < modelBytes))
      fail(`streamed weights: not streamed from the file in windows: ${JSON.stringify(w)} (file ${modelBytes} B)`);
    if (Buffer.compare(Buffer.from(streamed.chi), Buffer.from(user.chi)) !== 0)
      fail("streamed weights changed χ: the streamed run's NIfTI differs from the resident run's");
    log(`streamed weights: ${w.read_bytes} B read from the File, window at most ${w.largest_window_bytes} B; χ identical`);

    // A registry network whose downloaded bytes are not the registry's: refused by their SHA-256,
    // and nothing is cached in IndexedDB.
    await (await page.$("#onnx-file")).uploadFile();  // no local file: the registry's weights
    await page.select("#network", "xqsm");
    const wrong = await clickAndCollect(page, "#run-user");
    if (wrong.state !== "error" || !/SHA-256 [0-9a-f]{64}, the registry says/.test(wrong.message))
      fail(`wrong weights from the mirror were not refused by their SHA-256: state ${wrong.state}, "${wrong.message}"`);
    const cachedKeys = await page.evaluate(() => new Promise((resolve, reject) => {
      const req = indexedDB.open("qsmcore-weights", 1);
      req.onupgradeneeded = () => req.result.createObjectStore("files");
      req.onsuccess = () => { const r = req.result.transaction("files").objectStore("files").getAllKeys(); r.onsuccess = () => resolve(r.result); };
      req.onerror = () => reject(req.error);
    }));
    if (cachedKeys.length) fail("refused weights were cached: " + cachedKeys.join(", "));
    log(`wrong weights refused: "${wrong.message.slice(0, 160)}"`);

    // A 4-D field (the demo's field as two frames): refused by name, not run on its first frame.
    await page.select("#network", "qsmcore-invnet");
    const fourD = path.join(out, "field_2frames.nii");
    writeTwoFrames(fs.readFileSync(fieldPath), fourD);
    const multi = await runUser(page, fourD, maskPath);
    if (multi.state !== "error" || !/field_2frames\.nii holds 2 volumes of/.test(multi.message))
      fail(`a 2-frame field was not refused by name: state ${multi.state}, "${multi.message}"`);
    log(`4-D field refused: "${multi.message.slice(0, 160)}"`);
    await page.close();

    // The single-threaded build, on a page that is not isolated.
    if (!argv.includes("--skip-st")) {
      const plain = await startServer(["--no-isolation"]);
      servers.push(plain.process);
      t = Date.now();
      const stPage = await openPage(browser, plain.url, "st");
      // With the shipped weights streamed from their Blob (WORKERFS without pthreads).
      const st = await runDemo(stPage, "", "stream:host=0");
      if (st.state !== "done") fail("st demo: " + st.message);
      if (!(st.reply.weights && st.reply.weights.read_bytes > 0)) fail("st demo: the weights were not streamed: " + JSON.stringify(st.reply.weights));
      log(`st demo ${((Date.now() - t) / 1000).toFixed(1)} s (${timings(st.reply)}), heap ${st.reply.heap8_bytes} B`);
      compare("st", readNifti(st.chi), native, mask);
      await stPage.close();
    }
  } finally {
    if (browser) await browser.close();
    for (const s of servers) s.kill();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  log(`passed in ${((Date.now() - t0) / 1000).toFixed(1)} s; screenshot ${path.join(out, "screenshot.png")}`);
}

main().catch((e) => fail(e.stack || String(e)));
