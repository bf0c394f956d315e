// The web page's tiled runs (issue #54) end to end in headless Chromium (puppeteer-core, Debian's chromium):
//   node tests/web/tile_page_test.js --qsm build/qsm --out build/web-tiles [--skip-st]
// 1. the native CLI writes the head phantom (`qsm phantom --size 64 --b0 3`) and runs
//    `qsm run qsmcore-invnet --tile 32,8` on its local field and mask (the oracle: oneDNN, FFTW),
//    and the same run on the whole volume (`--tile 0`), which the tolerance must tell apart;
// 2. the page (pthread build, crossOriginIsolated, 2 threads): qsmcore-invnet, tiles on with core
//    32 and halo 8, the field and mask through the file pickers, the shipped weights. The tile
//    plan (the module's qsm_web_tile_plan) must be on the page before the run; the run must be
//    tiled as natively (the same tile count), its tiles in flight must be what the plan said
//    and what the run's own prediction said, the plan's predicted peak (registry figures) and
//    the run's predicted peak must each be at least the measured one, and χ must agree with
//    the native tiled χ (below); a screenshot (OUT/tile-plan.png);
// 3. a budget that holds the plan's run with one tile in flight but not two: the plan says 1,
//    and the run, budgeted by the engine, runs 1 (the same χ within the same bound);
// 4. a 16 MiB budget, below the plan's one-tile peak: refused before the volume is read (no
//    worker run, no volume read, the heap not grown); a screenshot (OUT/tile-plan-refused.png);
// 5. the single-threaded build (no COOP/COEP; --skip-st leaves it out): one tile in flight by the
//    plan and the run, χ within the same bound.
//
// Tolerance: the page and the native CLI cut the same tiles and run the same network on each:
// only the kernels differ (oneDNN natively, the wasm build's SIMD128 direct and Winograd
// convolutions, ~2.5e-6 of the range on a lone network, docs/wasm.md) and the FFT of the TKD
// prior (FFTW against physics/portable_fft). The bound is 1e-5 of the native χ's range inside
// the mask, as tests/web/page_test.js gives the network alone. Tiling itself moves χ by 5.2e-5 ppm
// (2e-4 of the range; measured natively, tiled 32,8 against the whole volume): 20× the bound,
// so a page that ran the whole volume, or other tiles, fails; the test checks that margin too.
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
} = require("./common").harness("web.tile_page", "build/web-tiles");
const size = 64, core = 32, halo = 8, threads = 2;
const relTolerance = 1e-5;

// max|a − b| inside the mask and b's range there; fails on a voxel that is not finite anywhere.
function difference(label, a, b, mask) {
  if (a.dims.join() !== b.dims.join()) fail(`${label}: ${a.dims.join("x")} against ${b.dims.join("x")}`);
  let lo = Infinity, hi = -Infinity, max = 0, inside = 0;
  for (let i = 0; i < b.data.length; i++) {
    if (!Number.isFinite(a.data[i])) fail(`${label}: voxel ${i} is ${a.data[i]}`);
    if (mask.data[i] <= 0.5) continue;
    inside++;
    lo = Math.min(lo, b.data[i]);
    hi = Math.max(hi, b.data[i]);
    max = Math.max(max, Math.abs(a.data[i] - b.data[i]));
  }
  if (!(inside > 0 && hi > lo)) fail(`${label}: no mask voxels, or a flat χ`);
  return { max, range: hi - lo, inside };
}

// Sets the budget (MiB, "" for the default) and waits for the page's live tile plan made under it.
async function planUnder(page, budgetMiB) {
  await page.evaluate(() => { window.qsmPage.plan = null; });
  await page.$eval("#budget", (el, v) => { el.value = v; el.dispatchEvent(new Event("change")); }, budgetMiB);
  await page.waitForFunction(() => window.qsmPage.plan !== null, { timeout: 60000, polling: 100 });
  return page.evaluate(() => window.qsmPage.plan);
}

async function clickRun(page) {
  await page.click("#run-user");
  await page.waitForFunction(() => document.body.dataset.state === "running", { timeout: 10000, polling: 50 }).catch(() => {});
  const state = await waitState(page, ["done", "error"], 300000);
  const message = await page.$eval("#message", (el) => el.textContent);
  const reply = await page.evaluate(() => window.qsmPage.reply);
  let chi = null;
  if (state === "done") {
    chi = readNifti(await pageBytes(page, "chiNifti"));
  }
  return { state, message, reply, chi };
}

// A tiled run's figures against its plan and the native run: the tile count, the tiles in flight
// (plan = run = the run's own prediction), the peaks (each prediction ≥ the measured peak), χ.
function checkTiledRun(label, r, native, whole, mask, wantInFlight) {
  if (r.state !== "done") fail(`${label}: ${r.message}`);
  const { reply } = r, plan = reply.plan;
  if (!plan) fail(`${label}: the run carries no tile plan`);
  if (reply.tiles !== native.report.tiles || !(reply.tiles > 1))
    fail(`${label}: the page ran ${reply.tiles} tile(s), native qsm run --tile ${core},${halo} ${native.report.tiles}`);
  if (reply.tiles > plan.tiles) fail(`${label}: ${reply.tiles} tiles run, the plan's grid has ${plan.tiles}`);
  if (plan.tiles_in_flight !== wantInFlight) fail(`${label}: the plan says ${plan.tiles_in_flight} in flight, expected ${wantInFlight}`);
  if (reply.tiles_in_flight !== plan.tiles_in_flight || reply.predicted_tiles_in_flight !== plan.tiles_in_flight)
    fail(`${label}: tiles in flight: run ${reply.tiles_in_flight}, its prediction ${reply.predicted_tiles_in_flight}, the plan ${plan.tiles_in_flight}`);
  if (!(plan.predicted_peak_bytes >= reply.measured_peak_bytes && reply.predicted_peak_bytes >= reply.measured_peak_bytes))
    fail(`${label}: measured peak ${reply.measured_peak_bytes} B above a prediction (plan ${plan.predicted_peak_bytes} B, run ${reply.predicted_peak_bytes} B)`);
  const d = difference(label, r.chi, native.chi, mask);
  const tol = relTolerance * d.range;
  const w = difference(label + " vs whole", r.chi, whole, mask);
  log(`${label}: ${reply.tiles} tiles, ${reply.tiles_in_flight} in flight (plan ${plan.tiles_in_flight}, wasm_tiles_in_flight ` +
      `${plan.wasm_tiles_in_flight}); peak plan ${mib(plan.predicted_peak_bytes)}, run's prediction ${mib(reply.predicted_peak_bytes)}, ` +
      `measured ${mib(reply.measured_peak_bytes)}; max|Δχ| vs native tiled ${d.max.toExponential(3)} ppm ` +
      `(${(d.max / d.range).toExponential(2)} of range ${d.range.toFixed(4)} ppm; bound ${tol.toExponential(3)}), ` +
      `vs native whole volume ${w.max.toExponential(3)} ppm; network ${reply.network_seconds.toFixed(2)} s`);
  if (!(d.max <= tol)) fail(`${label}: χ differs from the native tiled χ by ${d.max} ppm > ${tol}`);
  if (!(w.max > tol)) fail(`${label}: χ is within the bound of the whole-volume χ too (${w.max} ppm): the check cannot tell tiles apart`);
  return d;
}

// Opens the page (expecting the `variant` build) and sets up "Your data": qsmcore-invnet, tiles
// on (core, halo), the threads, the field and mask through the file pickers.
async function openTiled(browser, url, variant, fieldPath, maskPath) {
  const page = await browser.newPage();
  page.on("pageerror", (e) => log("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") log("console: " + m.text().slice(0, 300)); });
  await page.setViewport({ width: 1280, height: 1200 });
  await page.goto(url, { waitUntil: "load", timeout: 180000 });
  if ((await waitState(page, ["ready", "error"], 180000)) !== "ready") fail(`the ${variant} page did not start: ` + (await page.$eval("#message", (el) => el.textContent)));
  if ((await page.evaluate(() => window.qsmPage.variant)) !== variant) fail(`the page did not pick the ${variant} build`);
  await page.select("#network", "qsmcore-invnet");
  if (await page.$eval("#tile-controls", (el) => el.hidden)) fail("no tile control for qsmcore-invnet, a tiled network");
  if (variant === "mt") await page.$eval("#threads", (el, v) => { el.value = v; }, String(threads));
  await page.select("#tile-mode", "on");
  await page.$eval("#tile-core", (el, v) => { el.value = v; }, String(core));
  await page.$eval("#tile-halo", (el, v) => { el.value = v; }, String(halo));
  await (await page.$("#field-file")).uploadFile(fieldPath);
  await (await page.$("#mask-file")).uploadFile(maskPath);
  return page;
}

async function main() {
  for (const v of argv.includes("--skip-st") ? ["mt"] : ["mt", "st"])
    if (!fs.existsSync(path.join(root, `build-wasm/${v}/qsm-web.wasm`))) fail(`build-wasm/${v}/qsm-web.wasm is missing: bash tools/wasm/build.sh ${v}`);
  if (!fs.existsSync(chromium)) fail(`${chromium} is missing: apt-get install chromium`);
  fs.rmSync(out, { recursive: true, force: true });
  fs.mkdirSync(out, { recursive: true });
  const t0 = Date.now();
  const ph = path.join(out, "phantom");
  const fieldPath = path.join(ph, "local_field.nii.gz"), maskPath = path.join(ph, "mask.nii.gz");
  await execFileAsync(qsm, ["phantom", "--out", ph, "--size", String(size), "--b0", "3"]);
  const nativeRun = async (tile) => {
    const chi = path.join(out, `native-chi-${tile}.nii.gz`), report = path.join(out, `native-${tile}.json`);
    await execFileAsync(qsm, ["run", "qsmcore-invnet", "--in", fieldPath, "--mask", maskPath, "--tile", tile, "--threads", String(threads),
                              "--out", chi, "--report", report, "--quiet"]);
    return { chi: readNifti(fs.readFileSync(chi)), report: JSON.parse(fs.readFileSync(report, "utf8")) };
  };
  const native = await nativeRun(`${core},${halo}`);
  const whole = (await nativeRun("0")).chi;
  const mask = readNifti(fs.readFileSync(maskPath));
  log(`native: ${native.report.tiles} tiles, ${native.report.tiles_in_flight} in flight, after ${((Date.now() - t0) / 1000).toFixed(1)} s`);

  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "qsm-web-tiles-"));
  let browser = null;
  try {
    const server = await startServer([]);
    servers.push(server.process);
    browser = await launch(profile);
    // qsmcore-invnet tiled 32,8 on the phantom's local field; the plan appears before the run.
    const page = await openTiled(browser, server.url, "mt", fieldPath, maskPath);
    const plan = await planUnder(page, "");
    if (plan.error || !plan.fits) fail("the default budget's plan: " + JSON.stringify(plan));
    const shown = await page.$eval("#tile-plan", (el) => (el.hidden ? "" : el.innerText));
    if (!shown.includes(`${plan.tiles_in_flight} (wasm_tiles_in_flight`) || !/predicted peak/.test(shown))
      fail("the tile plan is not on the page before the run: " + JSON.stringify(shown));
    log(`plan before the run: ${plan.tiles} tiles of ${plan.patch.join("x")}, ${plan.tiles_in_flight} in flight, ` +
        `tile ${mib(plan.tile_bytes)} (${plan.tile_figure}), peak ${mib(plan.predicted_peak_bytes)}, heap at the peak ${mib(plan.predicted_heap_bytes)}`);
    const tiled = await clickRun(page);
    // The page's threads are at most the browser's cores: the plan says which it used.
    checkTiledRun("tiled, default budget", tiled, native, whole, mask, Math.min(plan.pool, plan.tiles));
    await new Promise((r) => setTimeout(r, 500));  // let NiiVue draw
    await page.screenshot({ path: path.join(out, "tile-plan.png"), fullPage: true });

    // A budget between the plan's one-tile and two-tile heap (its peak counts the wasm32 tile where
    // the registry has the wasm32 tiled run, else the native one): both the plan and the run take 1.
    const two = await planUnder(page, "");
    let last = tiled;
    if (two.tiles_in_flight >= 2) {
      const per = two.peak_figure === "wasm32" ? two.tile_bytes : two.native_tile_bytes;
      const oneTile = two.predicted_heap_bytes - per * (two.tiles_in_flight - 1);
      const budgetMiB = Math.floor((oneTile + 0.5 * per) / 1048576);
      const tight = await planUnder(page, String(budgetMiB));
      if (!tight.fits || tight.tiles_in_flight !== 1) fail(`a ${budgetMiB} MiB budget: the plan says ${JSON.stringify(tight)}`);
      last = await clickRun(page);
      checkTiledRun(`tiled, ${budgetMiB} MiB budget`, last, native, whole, mask, 1);
    } else {
      log(`one thread on this browser: the budget that halves the tiles in flight is not tried`);
    }

    // Over the budget: refused from the plan, before the volume is read or anything runs.
    const before = await page.evaluate(() => ({ calls: window.qsmPage.workerCalls, read: window.qsmPage.volumesRead }));
    const heapBefore = last.reply.heap8_bytes;
    const over = await planUnder(page, "16");
    if (over.fits) fail("a 16 MiB budget: the plan says it fits: " + JSON.stringify(over));
    const refused = await clickRun(page);
    const after = await page.evaluate(() => ({ calls: window.qsmPage.workerCalls, read: window.qsmPage.volumesRead }));
    if (refused.state !== "error" || !/was not read/.test(refused.message) || !/budget/.test(refused.message))
      fail(`a 16 MiB budget was not refused before reading: state ${refused.state}, "${refused.message}"`);
    if (after.calls !== before.calls || after.read !== before.read)
      fail(`the refused run still ran or read: worker calls ${before.calls} -> ${after.calls}, volumes read ${before.read} -> ${after.read}`);
    if (refused.reply.heap_bytes > heapBefore) fail(`the refused run grew the heap: ${heapBefore} -> ${refused.reply.heap_bytes}`);
    log(`16 MiB refused before reading: "${refused.message.slice(0, 220)}"`);
    await page.screenshot({ path: path.join(out, "tile-plan-refused.png"), fullPage: true });
    await page.close();

    // The single-threaded build (a page without COOP/COEP): one thread, so one tile in flight.
    if (!argv.includes("--skip-st")) {
      const plain = await startServer(["--no-isolation"]);
      servers.push(plain.process);
      const st = await openTiled(browser, plain.url, "st", fieldPath, maskPath);
      const stPlan = await planUnder(st, "");
      if (stPlan.error || !stPlan.fits || stPlan.pool !== 1) fail("st plan: " + JSON.stringify(stPlan));
      checkTiledRun("st, tiled", await clickRun(st), native, whole, mask, 1);
      await st.close();
    }
  } finally {
    if (browser) await browser.close();
    for (const s of servers) s.kill();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  log(`passed in ${((Date.now() - t0) / 1000).toFixed(1)} s; screenshots ${path.join(out, "tile-plan.png")}, tile-plan-refused.png`);
}

main().catch((e) => fail(e.stack || String(e)));
