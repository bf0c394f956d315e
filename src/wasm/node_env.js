// --pre-js of the Node builds (qsm-node and the wasm tests).
// 1. The program sees Node's environment (emscripten gives it a fixed, minimal one), so QSM_*
//    variables, TMPDIR and the like mean what they mean natively.
// 2. The loader prefers fetch() when it exists, which cannot read local files under Node 20;
//    without it the .wasm is read from disk (docs/wasm.md, pitfall 2). Synchronous compilation
//    would avoid fetch too, but pthread workers then fail to link.
delete globalThis.fetch;
Module['preRun'] = Module['preRun'] || [];
Module['preRun'].push(function () {
  if (typeof ENV != 'undefined') Object.assign(ENV, process.env);  // ENV exists when the program reads it
});
