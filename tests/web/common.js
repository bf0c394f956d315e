// What the page tests (tests/web/*_test.js) share: their options and failure reporting, the local
// servers they start, a NIfTI-1 reader of their own — an oracle independent of the page's NiiVue
// writer and of qsmcore's nifticlib writer — and waiting on the page's state.
"use strict";
const { spawn } = require("child_process");
const path = require("path");
const zlib = require("zlib");

const root = path.resolve(__dirname, "../..");

// The NIfTI-1 fields a comparison needs: dims at 42, datatype at 70, vox_offset at 108,
// scl_slope/inter at 112/116 (applied to integer data); float32, float64 and uint8 voxels.
function readNifti(bytes) {
  if (bytes[0] === 0x1f && bytes[1] === 0x8b) bytes = zlib.gunzipSync(bytes);
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b.readInt32LE(0) !== 348) throw new Error("not a little-endian NIfTI-1 file");
  const dims = [b.readInt16LE(42), b.readInt16LE(44), b.readInt16LE(46)];
  const type = b.readInt16LE(70);
  const offset = Math.round(b.readFloatLE(108));
  const slope = b.readFloatLE(112) || 1, inter = b.readFloatLE(116) || 0;
  const n = dims[0] * dims[1] * dims[2];
  const data = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    if (type === 16) data[i] = b.readFloatLE(offset + 4 * i);
    else if (type === 64) data[i] = b.readDoubleLE(offset + 8 * i);
    else if (type === 2) data[i] = b.readUInt8(offset + i) * slope + inter;
    else throw new Error("NIfTI datatype " + type + " not handled here");
  }
  return { dims, data };
}

// tools/web/serve.js on a free port; resolves with the process and its URL.
function startServer(extra) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [path.join(root, "tools/web/serve.js"), "--port", "0", ...extra], { stdio: ["ignore", "pipe", "inherit"] });
    p.stdout.on("data", (d) => {
      const m = /http:\/\/127\.0\.0\.1:\d+\//.exec(String(d));
      if (m) resolve({ process: p, url: m[0] });
    });
    p.on("exit", (code) => reject(new Error("the server exited with " + code)));
  });
}

async function waitState(page, states, timeoutMs) {
  await page.waitForFunction((s) => s.includes(document.body.dataset.state), { timeout: timeoutMs, polling: 200 }, states);
  return page.evaluate(() => document.body.dataset.state);
}

// Bytes the page holds — window.qsmPage[key], or window.qsmPage[key][sub] — copied out of the
// browser as a Uint8Array (base64 across the boundary); null when the page holds none.
async function pageBytes(page, key, sub = null) {
  const b64 = await page.evaluate((k, s) => {
    let u8 = window.qsmPage[k];
    if (u8 && s !== null) u8 = u8[s];
    if (!u8) return null;
    let str = "";
    for (let i = 0; i < u8.length; i += 0x8000) str += String.fromCharCode.apply(null, u8.subarray(i, i + 0x8000));
    return btoa(str);
  }, key, sub);
  return b64 ? new Uint8Array(Buffer.from(b64, "base64")) : null;
}

// A test's harness: `name` prefixes its lines; --qsm and --out (default `defaultOut` under the
// repository) are read from its arguments; puppeteer-core from the repository's node_modules.
function harness(name, defaultOut) {
  const argv = process.argv.slice(2);
  const opt = (flag, def) => (argv.includes(flag) ? argv[argv.indexOf(flag) + 1] : def);
  // Servers the test started: a failure stops them too (they share its stdout, so a server left
  // running would keep ctest waiting for the test's output to end).
  const servers = [];
  function fail(message) {
    console.error(`${name}: FAIL: ${message}`);
    for (const s of servers) s.kill();
    process.exit(1);
  }
  function log(message) { console.log(`${name}: ${message}`); }
  let puppeteer;
  try {
    puppeteer = require(path.join(root, "node_modules/puppeteer-core"));
  } catch (e) {
    fail("puppeteer-core is missing: npm install --ignore-scripts (tools/setup.sh does)");
  }
  const chromium = process.env.QSM_CHROMIUM || "/usr/lib/chromium/chromium";
  return {
    root, argv, opt, servers, fail, log, puppeteer, chromium,
    qsm: path.resolve(opt("--qsm", path.join(root, "build/qsm"))),
    out: path.resolve(opt("--out", path.join(root, defaultOut))),
    mib: (b) => (b / 1048576).toFixed(2) + " MiB",
    readNifti, startServer, waitState, pageBytes,
    // Headless Chromium with its profile in `profile` (a fresh temporary folder per test).
    launch: (profile) => puppeteer.launch({
      executablePath: chromium, pipe: true, userDataDir: profile,
      args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
    }),
  };
}

module.exports = { harness, readNifti, startServer, waitState, pageBytes };
