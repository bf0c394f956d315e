// The web page's pipeline mode end to end in headless Chromium (puppeteer-core, Debian's chromium):
//   node tests/web/pipeline_page_test.js --qsm build/qsm --out build/web-pipeline
// 1. the native CLI writes the head phantom's raw scan (`qsm phantom --raw --size 48`, three echoes,
//    one file per echo with JSON sidecars, and the same scan as one 4-D file per part without
//    sidecars) and runs `qsm pipeline` on each (the oracle: the same stages compiled natively,
//    with FFTW where the browser module has its own FFT);
// 2. the page (pthread build, crossOriginIsolated) gets the per-echo files and the sidecars through
//    its file pickers and runs the pipeline with its defaults (the CLI's): the prediction must
//    reach the page before the stages' progress and the result, be at least the measured peak
//    and within 5 % of it plus the scan, the masks must equal the native ones voxel for voxel
//    and χ must agree with the native χ within the tolerance below; R2* (made by default from 2
//    echoes or more, as natively) is downloaded with its button and must agree with the native
//    r2star.nii.gz; a screenshot is saved (OUT/pipeline.png);
// 2b. the same files with the inversion qsmcore-invnet (the page fetches the shipped ONNX file, as
//    its network mode does) against `qsm pipeline … --inversion qsmcore-invnet`: the prediction
//    (the network's own, made before the run) shown first and holding, the masks identical, χ
//    within the network tolerance below, R2* as in 2; a screenshot (OUT/pipeline-invnet.png);
// 3. the 4-D files without sidecars: refused, naming the missing echo times; then with TE and B0
//    typed, compared with the native run given --te and --b0;
// 4. DICOM (when Debian's dcm2niix, pydicom and nibabel are there for the native side): the 4-D
//    scan written as Siemens-style series (tools/testdata/make_dicom.py: 12-bit integer phase),
//    converted in the page by npm's @niivue/dcm2niix and run; compared with `qsm pipeline --dicom`
//    (Debian's dcm2niix) on the same folder: the same masks, χ within the same tolerance;
// 5. an 8 MiB budget (below the predicted peak alone): refused before anything is read, the heap not grown, nothing left shown.
//
// Tolerance: both sides run the same C++ on the same float32 input; they differ in the FFT
// (FFTW natively, physics/portable_fft in wasm) and libm, so sums and transforms round differently
// (~1e-7 relative in the f32 work arrays); PDF's 20 CGLS and TV-ADMM's 49 iterations carry that
// along. Measured: max|Δχ| 2.2e-7 ppm, 1.0e-6 of χ's range (0.217 ppm), the same iteration counts.
// The bound is 1e-4 of the range: 100× that, and 10× below what one TV iteration more or less
// moves (its stopping rule is a relative change of 1e-3), so a page that stopped elsewhere, ran
// other options or read the files otherwise fails; the iteration counts are in the message.
//
// qsmcore-invnet after the same chain: its input, the local field, differs by what PDF carries
// (above), and the network runs on other kernels (oneDNN natively, the wasm build's own direct
// and Winograd convolutions: up to ~2.5e-6 of the range on a lone network, docs/wasm.md).
// Measured: max|Δχ| 8.9e-8 ppm, 4.3e-7 of χ's range (0.210 ppm), RMS 1.8e-8 ppm. The bound is
// 1e-5 of the range (as tests/web/page_test.js gives the network alone): 23× that, room for
// another CPU's oneDNN kernels, and 3,300× below what qsmcore-invnet and TV-ADMM differ by on
// this scan (7.0e-2 ppm, logged), so a page that ran another inversion or other weights fails.
//
// R2*: the same log-linear fit on the same magnitudes; only libm's log (musl vs glibc, ≤ 1 ulp in
// f64) and the f32 store could differ. Measured: bit-identical (max|Δ| 0 over 23,990 voxels,
// range 2.2 … 83.8 s⁻¹). The bound, 1e-6 of the native range inside the brain mask (8e-5 s⁻¹,
// ~10 f32 ulps at the top of the range), allows an ulp's flip and nothing a changed fit (weights,
// echoes, mask) would move; the map must be non-zero exactly where the native one is.
"use strict";
const { execFile } = require("child_process");
const { promisify } = require("util");
const execFileAsync = promisify(execFile);
const fs = require("fs");
const os = require("os");
const path = require("path");

const {
  root, argv, opt, qsm, out, chromium, puppeteer, servers, fail, log, mib, readNifti, startServer, waitState, pageBytes,
  launch,
} = require("./common").harness("web.pipeline_page", "build/web-pipeline");
const size = 48;
const te = [0.004, 0.012, 0.02];
const b0 = 7;
const relTolerance = 1e-4;
const invnetRelTolerance = 1e-5;
const r2starRelTolerance = 1e-6;

function sameMask(label, page, native) {
  if (page.dims.join() !== native.dims.join()) fail(`${label}: ${page.dims.join("x")} vs native ${native.dims.join("x")}`);
  let differ = 0, inside = 0;
  for (let i = 0; i < native.data.length; i++) {
    differ += (page.data[i] > 0.5) !== (native.data[i] > 0.5);
    inside += native.data[i] > 0.5;
  }
  log(`${label}: ${inside} voxels inside, ${differ} differ`);
  if (differ || !inside) fail(`${label}: the page's mask differs from the native one in ${differ} of ${inside} voxels`);
}

// max|Δχ| over the whole volume (both are 0 outside the mask), against relTolerance × the native
// χ's range inside the mask; every voxel of the page's χ finite.
function compareChi(label, page, native, mask, iterations, rel = relTolerance) {
  if (page.dims.join() !== native.dims.join()) fail(`${label}: χ is ${page.dims.join("x")}, native ${native.dims.join("x")}`);
  let lo = Infinity, hi = -Infinity, maxDiff = 0, sum2 = 0, inside = 0;
  for (let i = 0; i < native.data.length; i++) {
    if (!Number.isFinite(page.data[i])) fail(`${label}: voxel ${i} of the page's χ is ${page.data[i]}`);
    const d = Math.abs(page.data[i] - native.data[i]);
    if (!(d <= maxDiff)) maxDiff = d;  // a NaN difference sets it to NaN, which fails below
    if (mask.data[i] <= 0.5) continue;
    inside++;
    sum2 += d * d;
    lo = Math.min(lo, native.data[i]);
    hi = Math.max(hi, native.data[i]);
  }
  const tol = rel * (hi - lo);
  log(`${label}: max|Δχ| ${maxDiff.toExponential(3)} ppm (${(maxDiff / (hi - lo)).toExponential(2)} of the range), ` +
      `RMS ${Math.sqrt(sum2 / inside).toExponential(3)} ppm over ${inside} mask voxels, range ${(hi - lo).toFixed(4)} ppm, tolerance ${tol.toExponential(3)}`);
  if (!(inside > 0 && maxDiff <= tol)) fail(`${label}: the page's χ differs from the native one by ${maxDiff} > ${tol} (${iterations})`);
  return maxDiff;
}

// max|a − b| over the mask: how far two inversions lie apart.
function compareChiQuiet(a, b, mask) {
  let m = 0;
  for (let i = 0; i < mask.data.length; i++) if (mask.data[i] > 0.5) m = Math.max(m, Math.abs(a.data[i] - b.data[i]));
  return m;
}

function bytesOf(page, name) {
  return pageBytes(page, "niftis", name);
}

// Sets the pickers (an empty list clears one), the typed TE/B0 and the budget, clicks Run and
// waits; returns the state, message, reply, events, the prediction as shown and the maps' bytes.
async function runPipeline(page, { mag = [], phase = [], sidecars = [], dicom = [], teText = "", b0Text = "", budgetMiB = "", inversion = "tv", r2star = true }) {
  for (const [id, files] of [["#pl-mag", mag], ["#pl-phase", phase], ["#pl-json", sidecars], ["#pl-dicom", dicom]])
    await (await page.$(id)).uploadFile(...files);
  await page.select("#pl-inversion", inversion);
  await page.$eval("#pl-r2star", (el, v) => { el.checked = v; }, r2star);
  await page.$eval("#pl-te", (el, v) => { el.value = v; }, teText);
  await page.$eval("#pl-b0", (el, v) => { el.value = v; }, b0Text);
  await page.$eval("#budget", (el, v) => { el.value = v; }, budgetMiB);
  const t = Date.now();
  const runs = await page.evaluate(() => window.qsmPage.runs || 0);
  await page.click("#run-pipeline");
  await page.waitForFunction((n) => window.qsmPage.runs > n && ["done", "error"].includes(document.body.dataset.state),
                             { timeout: 300000, polling: 100 }, runs);
  const state = await page.evaluate(() => document.body.dataset.state);
  const seconds = (Date.now() - t) / 1000;
  const r = await page.evaluate(() => ({ reply: window.qsmPage.reply, events: window.qsmPage.events, predicted: window.qsmPage.predicted,
                                         message: document.querySelector("#message").textContent,
                                         facts: document.querySelector("#facts").textContent }));
  const maps = {};
  if (state === "done") for (const n of ["chi", "r2star", "mask", "brain_mask", "local_field", "total_field"]) maps[n] = await bytesOf(page, n);
  log(`  run: ${state} after ${seconds.toFixed(1)} s`);
  return { state, seconds, ...r, maps };
}

// The prediction reached the page before the stages' progress and the result, and holds.
function checkPrediction(label, run) {
  const ev = run.events, p = run.predicted, r = run.reply;
  const iPred = ev.indexOf("predicted");
  if (!(iPred >= 0 && ev.lastIndexOf("progress") > iPred && iPred < ev.indexOf("done")))
    fail(`${label}: the prediction did not come before the stages' progress and the result: ${ev.join(",")}`);
  if (!p || p.predicted_peak_bytes !== r.predicted_peak_bytes) fail(`${label}: the page did not keep the prediction it showed`);
  const progressAfter = ev.slice(iPred).filter((e) => e === "progress").length;
  log(`${label}: predicted ${p.predicted_peak_bytes} B (${mib(p.predicted_peak_bytes)}: scan ${mib(p.scan_bytes)} + stages ${mib(p.stages_peak_bytes)} in ${p.peak_stage}), ` +
      `measured ${r.measured_peak_bytes} B (${(100 * r.measured_peak_bytes / p.predicted_peak_bytes).toFixed(1)} %), ` +
      `refined ${r.pipeline_predicted_peak_bytes} B; ${progressAfter} progress events after it; heap ${mib(r.heap8_bytes)}`);
  if (!(r.measured_peak_bytes > 0 && p.predicted_peak_bytes >= r.measured_peak_bytes))
    fail(`${label}: measured peak ${r.measured_peak_bytes} B above the prediction shown, ${p.predicted_peak_bytes} B`);
}

// The 4-D scan as DICOM series, and the native pipeline on them; null when a tool is missing.
async function nativeDicom(scan4d) {
  const missing = [];
  for (const [what, cmd, args] of [["dcm2niix", "sh", ["-c", "command -v dcm2niix"]],
                                   ["pydicom and nibabel", "/usr/bin/python3", ["-c", "import pydicom, nibabel"]]]) {
    try { await execFileAsync(cmd, args); } catch (e) { missing.push(what); }
  }
  if (missing.length) return { missing };
  const toNpy = "import nibabel as nib, numpy as np, sys; s = sys.argv[1]; " +
    "m = nib.load(s + '/magnitude.nii.gz').get_fdata(); np.save(s + '/mag.npy', m * (4000 / m.max())); " +
    "np.save(s + '/phase.npy', nib.load(s + '/phase.nii.gz').get_fdata()); " +
    "print(','.join(str(v) for v in nib.load(s + '/phase.nii.gz').affine[:3].ravel()))";
  const affine = (await execFileAsync("/usr/bin/python3", ["-c", toNpy, scan4d])).stdout.trim();
  const dir = path.join(out, "dicom");
  await execFileAsync("/usr/bin/python3", [path.join(root, "tools/testdata/make_dicom.py"), "--out", dir, "--magnitude", path.join(scan4d, "mag.npy"),
                                           "--phase", path.join(scan4d, "phase.npy"), "--te", te.join(","), "--b0", String(b0), "--affine", affine]);
  const nat = path.join(out, "native-dicom");
  await execFileAsync(qsm, ["pipeline", "--dicom", dir, "--out", nat, "--quiet", "--no-preview"]);
  const files = fs.readdirSync(dir, { recursive: true }).map((f) => path.join(dir, f)).filter((f) => fs.statSync(f).isFile());
  return { files, native: readRun(nat) };
}

function readRun(dir) {
  const r2star = path.join(dir, "r2star.nii.gz");
  return { chi: readNifti(fs.readFileSync(path.join(dir, "chi.nii.gz"))), mask: readNifti(fs.readFileSync(path.join(dir, "mask.nii.gz"))),
           brain: readNifti(fs.readFileSync(path.join(dir, "brain_mask.nii.gz"))),
           r2star: fs.existsSync(r2star) ? readNifti(fs.readFileSync(r2star)) : null,
           report: JSON.parse(fs.readFileSync(path.join(dir, "report.json"))) };
}

// R2* against the native map: non-zero on the same voxels, max|Δ| within r2starRelTolerance of
// the native range inside the brain mask; every voxel of the page's map finite.
function compareR2star(label, page, native, brain) {
  if (!native) fail(`${label}: the native run wrote no r2star.nii.gz`);
  if (page.dims.join() !== native.dims.join()) fail(`${label}: R2* is ${page.dims.join("x")}, native ${native.dims.join("x")}`);
  let lo = Infinity, hi = -Infinity, maxDiff = 0, support = 0, inside = 0;
  for (let i = 0; i < native.data.length; i++) {
    if (!Number.isFinite(page.data[i])) fail(`${label}: voxel ${i} of the page's R2* is ${page.data[i]}`);
    support += (page.data[i] !== 0) !== (native.data[i] !== 0);
    const d = Math.abs(page.data[i] - native.data[i]);
    if (!(d <= maxDiff)) maxDiff = d;
    if (brain.data[i] <= 0.5) continue;
    inside++;
    lo = Math.min(lo, native.data[i]);
    hi = Math.max(hi, native.data[i]);
  }
  const tol = r2starRelTolerance * (hi - lo);
  log(`${label}: max|ΔR2*| ${maxDiff.toExponential(3)} s⁻¹ (${(maxDiff / (hi - lo)).toExponential(2)} of the range ${lo.toFixed(2)} … ${hi.toFixed(2)} s⁻¹ ` +
      `over ${inside} brain voxels), tolerance ${tol.toExponential(3)}; ${support} voxels non-zero on one side only`);
  if (support) fail(`${label}: the page's R2* is non-zero on ${support} voxels where the native one is not, or the reverse`);
  if (!(inside > 0 && hi > lo && maxDiff <= tol)) fail(`${label}: the page's R2* differs from the native one by ${maxDiff} > ${tol}`);
  return maxDiff / (hi - lo);
}

// Clicks "Download R2*" and reads the .nii.gz the browser saved.
async function downloadR2star(page, cdp) {
  const dir = path.join(out, "downloads");
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  await cdp.send("Browser.setDownloadBehavior", { behavior: "allow", downloadPath: dir });
  if (await page.$eval("#download-r2star", (el) => el.disabled || el.hidden)) fail("the Download R2* button is off after a run with R2*");
  await page.click("#download-r2star");
  const file = path.join(dir, "r2star.nii.gz");
  for (let i = 0; i < 100 && !fs.existsSync(file); i++) await new Promise((r) => setTimeout(r, 100));
  if (!fs.existsSync(file)) fail("the Download R2* button wrote no r2star.nii.gz");
  await new Promise((r) => setTimeout(r, 200));  // the write may still be finishing
  return readNifti(fs.readFileSync(file));
}

async function nativeScan() {
  const scan = path.join(out, "scan"), scan4d = path.join(out, "scan4d");
  const common = ["phantom", "--raw", "--size", String(size), "--te", te.join(","), "--b0", String(b0)];
  await execFileAsync(qsm, [...common, "--layout", "echoes", "--out", scan]);
  await execFileAsync(qsm, [...common, "--out", scan4d]);
  const echoes = te.map((_, e) => e + 1);
  const files = {
    mag: echoes.map((e) => path.join(scan, `magnitude_e${e}.nii.gz`)),
    phase: echoes.map((e) => path.join(scan, `phase_e${e}.nii.gz`)),
    sidecars: echoes.flatMap((e) => [path.join(scan, `magnitude_e${e}.json`), path.join(scan, `phase_e${e}.json`)]),
    mag4d: [path.join(scan4d, "magnitude.nii.gz")], phase4d: [path.join(scan4d, "phase.nii.gz")],
  };
  const nat = path.join(out, "native"), nat4d = path.join(out, "native4d"), natNet = path.join(out, "native-invnet");
  const t = Date.now();
  await execFileAsync(qsm, ["pipeline", "--mag", files.mag.join(","), "--phase", files.phase.join(","), "--out", nat, "--quiet", "--no-preview"]);
  // The shipped weights (models/qsmcore-invnet.onnx), the file the page fetches.
  await execFileAsync(qsm, ["pipeline", "--mag", files.mag.join(","), "--phase", files.phase.join(","), "--inversion", "qsmcore-invnet",
                            "--out", natNet, "--quiet", "--no-preview"], { env: { ...process.env, QSM_MODEL_DIR: path.join(root, "models") } });
  await execFileAsync(qsm, ["pipeline", "--mag", files.mag4d[0], "--phase", files.phase4d[0], "--te", te.join(","), "--b0", String(b0),
                            "--out", nat4d, "--quiet", "--no-preview"]);
  const dicom = await nativeDicom(scan4d);
  log(`native pipelines done in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  return { files, native: readRun(nat), native4d: readRun(nat4d), nativeInvnet: readRun(natNet), dicom };
}

function compareRun(label, run, native, rel = relTolerance) {
  if (run.state !== "done") fail(`${label}: ${run.message}`);
  checkPrediction(label, run);
  sameMask(`${label}, brain mask`, readNifti(run.maps.brain_mask), native.brain);
  sameMask(`${label}, local mask`, readNifti(run.maps.mask), native.mask);
  const nr = native.report;
  const its = (stages) => stages.map((s) => s.iterations).filter((x) => x != null).join("/");
  const iterations = `iterations (PDF/TV): page ${its(run.reply.stages)}, native ${its(nr.stages)}`;
  log(`${label}: stages ${run.reply.stages.map((s) => `${s.stage} ${s.seconds.toFixed(2)} s`).join(", ")}; ` +
      `native ${nr.stages.map((s) => `${s.stage} ${s.seconds.toFixed(2)} s`).join(", ")}; ${iterations}`);
  return compareChi(`${label}, χ`, readNifti(run.maps.chi), native.chi, native.mask, iterations, rel);
}

async function main() {
  if (!fs.existsSync(path.join(root, "build-wasm/mt/qsm-web.wasm"))) fail("build-wasm/mt/qsm-web.wasm is missing: bash tools/wasm/build.sh");
  if (!fs.existsSync(chromium)) fail(`${chromium} is missing: apt-get install chromium`);
  fs.rmSync(out, { recursive: true, force: true });
  fs.mkdirSync(out, { recursive: true });
  const t0 = Date.now();
  const nativeReady = nativeScan();
  nativeReady.catch(() => {});
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "qsm-web-chromium-"));
  let browser = null;
  try {
    const server = await startServer([]);
    servers.push(server.process);
    browser = await launch(profile);
    const page = await browser.newPage();
    page.on("pageerror", (e) => log("page error: " + e.message));
    page.on("console", (m) => { if (m.type() === "error") log("console: " + m.text().slice(0, 300)); });
    await page.setViewport({ width: 1280, height: 1100 });
    await page.goto(server.url, { waitUntil: "load", timeout: 180000 });
    if ((await waitState(page, ["ready", "error"], 180000)) !== "ready") fail("the page did not start: " + await page.$eval("#message", (el) => el.textContent));
    if ((await page.evaluate(() => window.qsmPage.variant)) !== "mt") fail("the page did not pick the pthread build");
    const { files, native, native4d, nativeInvnet, dicom } = await nativeReady;
    const cdp = await page.createCDPSession();

    // Per-echo files with their sidecars, the page's defaults; R2* through its Download button.
    const run = await runPipeline(page, { mag: files.mag, phase: files.phase, sidecars: files.sidecars });
    const maxDiff = compareRun("per-echo files + sidecars", run, native);
    if (run.reply.scan.te_from !== "sidecar" || run.reply.scan.b0_t !== b0) fail("the sidecars' echo times and field strength were not used: " + JSON.stringify(run.reply.scan));
    if (!run.reply.stages.some((s) => s.stage === "R2*")) fail("the page made no R2* from 3 echoes");
    const r2Rel = compareR2star("per-echo files, downloaded r2star.nii.gz", await downloadR2star(page, cdp), native.r2star, native.brain);
    await new Promise((r) => setTimeout(r, 500));  // let NiiVue draw
    await page.screenshot({ path: path.join(out, "pipeline.png"), fullPage: true });

    // The same files, inverted by qsmcore-invnet (the page fetches models/qsmcore-invnet.onnx).
    const net = await runPipeline(page, { mag: files.mag, phase: files.phase, sidecars: files.sidecars, inversion: "qsmcore-invnet" });
    const netDiff = compareRun("qsmcore-invnet", net, nativeInvnet, invnetRelTolerance);
    const inv = net.reply.stages.find((s) => s.stage === "inversion");
    if (!inv || inv.method !== "qsmcore-invnet") fail(`the page's inversion was not qsmcore-invnet: ${JSON.stringify(inv)}`);
    const netPredicted = net.predicted.stages.find((s) => s.stage === "inversion");
    log(`qsmcore-invnet: its stage predicted ${mib(inv.predicted_peak_bytes)} before the run (${mib(netPredicted.peak_bytes)} in the first prediction), ` +
        `measured ${mib(inv.measured_peak_bytes)}; ${inv.seconds.toFixed(2)} s`);
    if (!(inv.measured_peak_bytes <= inv.predicted_peak_bytes)) fail(`qsmcore-invnet's stage measured ${inv.measured_peak_bytes} B above its prediction ${inv.predicted_peak_bytes} B`);
    const tvVsNet = compareChiQuiet(readNifti(run.maps.chi), readNifti(net.maps.chi), native.mask);
    log(`qsmcore-invnet vs TV-ADMM on the page: max|Δχ| ${tvVsNet.toExponential(3)} ppm (what the network tolerance must stay below)`);
    compareR2star("qsmcore-invnet run, R2*", readNifti(net.maps.r2star), nativeInvnet.r2star, nativeInvnet.brain);
    if (!(await page.$eval("#r2star-caption", (el) => /R2\* \(s⁻¹\) · window 0 … [0-9.]+ s⁻¹/.test(el.textContent))))
      fail("the R2* view's caption does not state its unit and window: " + await page.$eval("#r2star-caption", (el) => el.textContent));
    await new Promise((r) => setTimeout(r, 500));  // let NiiVue draw
    await page.screenshot({ path: path.join(out, "pipeline-invnet.png"), fullPage: true });

    // 4-D files, no sidecars: refused naming the echo times; then TE and B0 typed.
    const noTe = await runPipeline(page, { mag: files.mag4d, phase: files.phase4d });
    if (noTe.state !== "error" || !/no echo time/.test(noTe.message) || !/phase\.json/.test(noTe.message))
      fail(`4-D files without sidecars or TE were not refused naming the echo times and the file: ${noTe.state}, "${noTe.message}"`);
    log(`no echo times refused: "${noTe.message.slice(0, 200)}"`);
    const typed = await runPipeline(page, { mag: files.mag4d, phase: files.phase4d, teText: te.join(", "), b0Text: String(b0) });
    compareRun("4-D files, TE and B0 typed", typed, native4d);
    compareR2star("4-D files, R2*", readNifti(typed.maps.r2star), native4d.r2star, native4d.brain);
    if (typed.reply.scan.te_from !== "--te") fail("the typed echo times were not used");

    // DICOM, converted in the page by dcm2niix's WebAssembly build.
    if (dicom.missing) {
      log(`DICOM skipped: ${dicom.missing.join(" and ")} missing for the native side (Debian: dcm2niix, python3-pydicom, python3-nibabel)`);
    } else {
      const fromDicom = await runPipeline(page, { dicom: dicom.files });
      compareRun(`DICOM (${dicom.files.length} files)`, fromDicom, dicom.native);
      if (!/Siemens/.test(fromDicom.reply.scan.phase_scaling) || !/dcm2niix/.test(fromDicom.message))
        fail(`DICOM: the vendor phase or the conversion was not reported: ${fromDicom.reply.scan.phase_scaling}; "${fromDicom.message}"`);
    }

    // Over the page's budget: refused before anything is read; the heap as the run before left it.
    const heapBefore = await page.evaluate(() => window.qsmPage.reply.heap8_bytes);
    const refused = await runPipeline(page, { mag: files.mag, phase: files.phase, sidecars: files.sidecars, budgetMiB: "8" });
    if (refused.state !== "error" || !/Refused before allocating/.test(refused.message) || !/nothing was read/.test(refused.message))
      fail(`an 8 MiB budget was not refused before reading: ${refused.state}, "${refused.message}"`);
    if (refused.reply.heap_bytes > heapBefore) fail(`the refused run grew the heap: ${heapBefore} -> ${refused.reply.heap_bytes}`);
    const shown = await page.evaluate(() => window.qsmPage.shownVolumes());
    if (shown) fail(`after the refusal the page still shows ${shown} volume(s)`);
    log(`refused: "${refused.message.slice(0, 240)}"`);
    await page.screenshot({ path: path.join(out, "pipeline-refused.png"), fullPage: true });
    log(`passed in ${((Date.now() - t0) / 1000).toFixed(1)} s; χ max|Δ| ${maxDiff.toExponential(3)} ppm (TV), ${netDiff.toExponential(3)} ppm (qsmcore-invnet); ` +
        `R2* max|Δ| ${r2Rel.toExponential(2)} of its range; screenshots ${path.join(out, "pipeline.png")}, ${path.join(out, "pipeline-invnet.png")}`);
  } finally {
    if (browser) await browser.close();
    for (const s of servers) s.kill();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

main().catch((e) => fail(e.stack || String(e)));
