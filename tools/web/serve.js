#!/usr/bin/env node
// Serves the qsmcore web page on 127.0.0.1 (no dependencies):
//   node tools/web/serve.js [--port N] [--no-isolation] [--mirror DIR]
// Only what the page needs is served: web/ at /, the browser modules (build-wasm/{mt,st}/qsm-web.*),
// NiiVue's bundle (node_modules/@niivue/niivue/dist), dcm2niix's WebAssembly build
// (node_modules/@niivue/dcm2niix/dist) and the shipped network (models/*.onnx).
// Every response carries COOP same-origin + COEP require-corp, so the page is crossOriginIsolated
// and can run the pthread build; --no-isolation leaves them out (the page then runs the
// single-threaded build). --mirror DIR serves DIR's .onnx files at /mirror/ (the page's
// ?mirror=/mirror/ fetches registry weights from there). Port 0 picks a free one; the URL is
// printed on stdout. --bench DIR (bench/wasm_vs_ort_web.sh) also serves the bench page (bench/web/
// at /bench/), onnxruntime-web's wasm build (/ort/) and DIR's .onnx and .bin files (/bench-data/).
"use strict";
const http = require("http");
const fs = require("fs");
const path = require("path");

const root = path.resolve(__dirname, "../..");
const args = process.argv.slice(2);
const port = args.includes("--port") ? Number(args[args.indexOf("--port") + 1]) : 8080;
const isolated = !args.includes("--no-isolation");
const mirror = args.includes("--mirror") ? path.resolve(args[args.indexOf("--mirror") + 1]) : null;
const benchData = args.includes("--bench") ? path.resolve(args[args.indexOf("--bench") + 1]) : null;

// URL prefix -> folder, and the file names allowed under it.
const routes = [
  { prefix: "/build-wasm/mt/", dir: "build-wasm/mt", allow: /^qsm-web\.(js|wasm|worker\.js)$/ },
  { prefix: "/build-wasm/st/", dir: "build-wasm/st", allow: /^qsm-web\.(js|wasm)$/ },
  { prefix: "/niivue/", dir: "node_modules/@niivue/niivue/dist", allow: /^index\.js(\.map)?$/ },
  // dcm2niix's WebAssembly build (npm's @niivue/dcm2niix): the page's DICOM input.
  { prefix: "/dcm2niix/", dir: "node_modules/@niivue/dcm2niix/dist", allow: /^(index\.js|worker\.js|dcm2niix\.(js|wasm))$/ },
  { prefix: "/models/", dir: "models", allow: /^[A-Za-z0-9._-]+\.onnx$/ },
  ...(mirror ? [{ prefix: "/mirror/", dir: mirror, allow: /^[A-Za-z0-9._-]+\.onnx$/ }] : []),
  ...(benchData ? [
    { prefix: "/bench/", dir: "bench/web", allow: /^[a-z_]+\.(html|js)$/ },
    { prefix: "/ort/", dir: "node_modules/onnxruntime-web/dist", allow: /^(ort\.wasm\.min\.mjs|ort-wasm-simd-threaded\.(mjs|wasm))$/ },
    { prefix: "/bench-data/", dir: benchData, allow: /^[A-Za-z0-9._-]+\.(onnx|bin)$/ },
  ] : []),
  { prefix: "/", dir: "web", allow: /^[A-Za-z0-9._-]+\.(html|js|css|png|svg)$/ },
];
const types = {
  ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".mjs": "text/javascript; charset=utf-8", ".css": "text/css",
  ".wasm": "application/wasm", ".map": "application/json", ".png": "image/png", ".svg": "image/svg+xml",
  ".onnx": "application/octet-stream",
};

function resolve(urlPath) {
  if (urlPath === "/") urlPath = "/index.html";
  for (const r of routes) {
    if (!urlPath.startsWith(r.prefix)) continue;
    const name = urlPath.slice(r.prefix.length);
    // One plain file name per route: no sub-folders, so no way out of the folder.
    return r.allow.test(name) ? path.resolve(root, r.dir, name) : null;
  }
  return null;
}

const server = http.createServer((req, res) => {
  const headers = { "Cache-Control": "no-cache", "Cross-Origin-Resource-Policy": "same-origin" };
  if (isolated) {
    headers["Cross-Origin-Opener-Policy"] = "same-origin";
    headers["Cross-Origin-Embedder-Policy"] = "require-corp";
  }
  let file = null;
  try {
    file = resolve(decodeURIComponent(new URL(req.url, "http://localhost").pathname));
  } catch (e) { /* malformed URL: 404 */ }
  if (req.method !== "GET" && req.method !== "HEAD") file = null;
  fs.stat(file || "/nonexistent", (err, st) => {
    if (err || !st.isFile()) {
      res.writeHead(404, { ...headers, "Content-Type": "text/plain" });
      res.end("not found\n");
      return;
    }
    headers["Content-Type"] = types[path.extname(file)] || "application/octet-stream";
    headers["Content-Length"] = st.size;
    res.writeHead(200, headers);
    if (req.method === "HEAD") res.end();
    else fs.createReadStream(file).pipe(res);
  });
});

server.listen(port, "127.0.0.1", () => {
  const url = `http://127.0.0.1:${server.address().port}/`;
  console.log(`qsmcore web page: ${url} (${isolated ? "crossOriginIsolated: pthread build" : "not isolated: single-threaded build"})`);
});
