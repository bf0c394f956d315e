# qsm-web: the module the web page's Worker loads (web/worker.js), exporting the C API of
# src/wasm/web_api.cpp. Browser-only (ENVIRONMENT=web,worker): files reach it as bytes the Worker
# writes into MEMFS, or File/Blob objects it mounts with WORKERFS (streamed weights, read on demand
# with FileReaderSync), never through NODERAWFS. No main (--no-entry): the Worker calls in; in the
# pthread variant the Worker's own thread runs the calls and may block, which a Worker may do.
set(QSM_WEB_EXPORTS _malloc,_free,_qsm_web_registry,_qsm_web_demo,_qsm_web_run,_qsm_web_tile_plan,_qsm_web_pipeline,_qsm_web_output_data,_qsm_web_output_size,_qsm_web_heap_bytes,_qsm_bench_onnx,_qsm_bench_again,_qsm_bench_accounted_peak,_qsm_bench_output_data,_qsm_bench_output_size)
set(QSM_WEB_LINK
  -sMODULARIZE=1 -sEXPORT_NAME=createQsm -sENVIRONMENT=web,worker --no-entry
  -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB -sTOTAL_STACK=8MB -sFORCE_FILESYSTEM=1 -lworkerfs.js
  -sEXPORTED_FUNCTIONS=${QSM_WEB_EXPORTS} -sEXPORTED_RUNTIME_METHODS=ccall,FS,UTF8ToString)
if(QSM_WASM_THREADS)
  # The kernel pool, the prefetch worker and spare: a pool thread must exist before the blocking
  # call that needs it, since a new Worker only starts once the caller returns to its event loop.
  list(APPEND QSM_WEB_LINK "-sPTHREAD_POOL_SIZE=navigator.hardwareConcurrency+2")
endif()
# bench_api.cpp: a raw ONNX entry for bench/wasm_vs_ort_web.sh (same file and input as ORT-web).
# web_pipeline.cpp: the pipeline from a scan, through read_scan (and input_check's mask reading),
# which the library leaves out in wasm (nifticlib): nifti_memfs.cpp reads NIfTI for them here.
add_executable(qsm-web ${CMAKE_SOURCE_DIR}/src/wasm/web_api.cpp ${CMAKE_SOURCE_DIR}/src/wasm/bench_api.cpp
  ${CMAKE_SOURCE_DIR}/src/wasm/web_pipeline.cpp ${CMAKE_SOURCE_DIR}/src/wasm/nifti_memfs.cpp
  ${CMAKE_SOURCE_DIR}/src/scan/read_scan.cpp ${CMAKE_SOURCE_DIR}/src/io/input_check.cpp)
target_include_directories(qsm-web PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(qsm-web PRIVATE qsmcore)
target_link_options(qsm-web PRIVATE ${QSM_WEB_LINK})
