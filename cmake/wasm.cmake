# The WebAssembly build of qsmcore (Debian's emscripten 3.1.6): the ONNX reader, graph, planner,
# accounting, residency, runtime, networks, tiling and physics, with the reference kernels and the
# SIMD128 backend (src/kernels/wasm) in place of oneDNN, a std::thread pool in place of OpenMP
# (src/core/parallel.cpp) and physics/portable_fft in place of FFTW. Nothing here downloads,
# decompresses or hashes: in a browser the page does that with fetch, DecompressionStream and
# crypto.subtle, and under Node the front-end (tools/wasm/qsm.js) reads local files only.
#
# QSM_WASM_THREADS=ON gives the pthread build (SharedArrayBuffer: Node, or a crossOriginIsolated
# page); OFF the single-threaded one every page can load. The two need separate objects
# (-pthread changes atomics and thread-locals), hence separate build directories.
option(QSM_WASM_THREADS "Build the pthread variant" ON)
set(QSM_WERROR ON CACHE BOOL "Treat warnings as errors")

# Header-only dependencies from Debian: emscripten's sysroot hides /usr/include, so each is made
# visible on its own (the whole of /usr/include would bring glibc's headers along).
set(QSM_WASM_DEPS ${CMAKE_BINARY_DIR}/deps-include)
file(MAKE_DIRECTORY ${QSM_WASM_DEPS})
foreach(dep nlohmann CLI)
  if(NOT EXISTS /usr/include/${dep})
    message(FATAL_ERROR "/usr/include/${dep} is missing: apt-get install nlohmann-json3-dev libcli11-dev")
  endif()
  file(CREATE_LINK /usr/include/${dep} ${QSM_WASM_DEPS}/${dep} SYMBOLIC)
endforeach()

add_compile_options(-Wall -Wextra -O3 -msimd128)
add_link_options(-O3)
if(QSM_WERROR)
  add_compile_options(-Werror)
endif()
# Errors are C++ exceptions. Native wasm exceptions are cheaper, but with emscripten 3.1.6 a throw
# in a pthread build is never caught (it escapes to JS as an uncaught WebAssembly.Exception, in Node
# 20 and Chromium alike), so the pthread build uses emscripten's JS-based exceptions; the kernels'
# hot loops make no calls that could throw, so they do not pay for it.
if(QSM_WASM_THREADS)
  add_compile_options(-pthread -fexceptions)
  add_link_options(-pthread -fexceptions)
else()
  add_compile_options(-fwasm-exceptions)
  add_link_options(-fwasm-exceptions)
endif()

include(${CMAKE_CURRENT_LIST_DIR}/sources.cmake)
# What needs a native library (oneDNN, nifticlib, libcurl, OpenSSL, libpng) or a process to spawn;
# measuring (it measures VmHWM) and cohorts (SLURM) are native tools.
list(FILTER QSM_SOURCES EXCLUDE REGEX "/kernels/onednn/|/measure/|/batch/|/io/(nifti|download|png_preview|sha256|input_check)\\.cpp$|/system/spawn\\.cpp$|/scan/(read_scan|dicom)\\.cpp$|/models/(weight_resolve|weight_hash_cache)\\.cpp$")

add_library(qsmcore STATIC ${QSM_SOURCES})
qsm_unity_library(qsmcore)
target_include_directories(qsmcore PUBLIC ${CMAKE_SOURCE_DIR}/include PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_include_directories(qsmcore SYSTEM PUBLIC ${QSM_WASM_DEPS})

# qsm-node: `qsm onnx info|run` for Node (tools/wasm/qsm.js), reading and writing the host's
# files directly (NODERAWFS).
set(QSM_NODE_LINK
  -sMODULARIZE=1 -sEXPORT_NAME=createQsm -sENVIRONMENT=node -sNODERAWFS=1 -sEXIT_RUNTIME=1
  -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB -sTOTAL_STACK=8MB --pre-js ${CMAKE_SOURCE_DIR}/src/wasm/node_env.js)
if(QSM_WASM_THREADS)
  # Workers for the kernel pool, the prefetch worker and main itself (proxied off Node's thread).
  list(APPEND QSM_NODE_LINK -sPROXY_TO_PTHREAD "-sPTHREAD_POOL_SIZE=require('os').cpus().length+2")
endif()
add_executable(qsm-node ${CMAKE_SOURCE_DIR}/src/wasm/node_main.cpp ${CMAKE_SOURCE_DIR}/src/cli/onnx_cmd.cpp
  ${CMAKE_SOURCE_DIR}/src/cli/parse_and_run.cpp
  ${CMAKE_SOURCE_DIR}/src/cli/cli_util.cpp ${CMAKE_SOURCE_DIR}/src/cli/staged_outputs.cpp ${CMAKE_SOURCE_DIR}/src/cli/byte_size.cpp)
target_include_directories(qsm-node PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(qsm-node PRIVATE qsmcore)
target_link_options(qsm-node PRIVATE ${QSM_NODE_LINK})

# qsm-web: the browser module of the web page (web/).
include(${CMAKE_CURRENT_LIST_DIR}/wasm_web.cmake)
# qsm-web-node: the page's C API (src/wasm/web_api.cpp, the same object code path as qsm-web) for
# Node, so that a registry network's tiled run (qsm_web_tile_plan, then qsm_web_run with a tile)
# can be driven from files (tools/wasm/web_run.js) and its whole heap high-water measured and
# compared with native `qsm run --tile` (bench/tile_budget.sh, tests/wasm/web_tiled_run_test.js;
# issue #54). No main: Node's thread calls in and blocks, as the page's Worker does; files through
# NODERAWFS. Built by default in the pthread build only (the page's tiled runs are measured there).
set(QSM_WEB_NODE_LINK
  -sMODULARIZE=1 -sEXPORT_NAME=createQsmWeb -sENVIRONMENT=node -sNODERAWFS=1 --no-entry
  -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB -sTOTAL_STACK=8MB --pre-js ${CMAKE_SOURCE_DIR}/src/wasm/node_env.js
  -sEXPORTED_FUNCTIONS=_malloc,_free,_qsm_web_registry,_qsm_web_run,_qsm_web_tile_plan,_qsm_web_output_data,_qsm_web_output_size,_qsm_web_heap_bytes,_qsm_web_break_bytes
  -sEXPORTED_RUNTIME_METHODS=ccall,UTF8ToString)
if(QSM_WASM_THREADS)
  list(APPEND QSM_WEB_NODE_LINK "-sPTHREAD_POOL_SIZE=require('os').cpus().length+2")
  add_executable(qsm-web-node ${CMAKE_SOURCE_DIR}/src/wasm/web_api.cpp)
else()
  add_executable(qsm-web-node EXCLUDE_FROM_ALL ${CMAKE_SOURCE_DIR}/src/wasm/web_api.cpp)
endif()
target_include_directories(qsm-web-node PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(qsm-web-node PRIVATE qsmcore)
target_link_options(qsm-web-node PRIVATE ${QSM_WEB_NODE_LINK})
include(${CMAKE_CURRENT_LIST_DIR}/wasm_measure.cmake)  # wasm32 memory figures: growth policy, driver

# Tests compiled to WebAssembly and run under Node (named directly: the emulator emcmake sets
# passes --experimental-wasm-threads, which Node 20 rejects): the
# ONNX conformance cases on the simd128 and reference backends, and the portable FFT. GoogleTest
# is built from Debian's sources (googletest). One ctest each: a Node start per case would cost
# more than the cases. Native tests compare the wasm CLI with the native engine (tests/wasm).
option(QSM_BUILD_TESTS "Build the wasm tests" ON)
if(QSM_BUILD_TESTS)
  if(NOT EXISTS /usr/src/googletest/CMakeLists.txt)
    message(FATAL_ERROR "/usr/src/googletest is missing: apt-get install googletest")
  endif()
  set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  add_subdirectory(/usr/src/googletest ${CMAKE_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)
  target_compile_options(gtest PRIVATE -Wno-error)
  target_compile_options(gtest_main PRIVATE -Wno-error)
  enable_testing()
  find_program(QSM_NODE node REQUIRED)
  set(QSM_TEST_LINK -sENVIRONMENT=node -sNODERAWFS=1 -sEXIT_RUNTIME=1
    -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB -sTOTAL_STACK=8MB --pre-js ${CMAKE_SOURCE_DIR}/src/wasm/node_env.js)
  if(QSM_WASM_THREADS)
    list(APPEND QSM_TEST_LINK -sPROXY_TO_PTHREAD "-sPTHREAD_POOL_SIZE=require('os').cpus().length+2")
  endif()
  foreach(t conformance/conformance_test physics/portable_fft_test)
    get_filename_component(name ${t} NAME_WE)
    add_executable(qsm_wasm_${name} ${CMAKE_SOURCE_DIR}/tests/${t}.cpp)
    target_include_directories(qsm_wasm_${name} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tests)
    target_link_libraries(qsm_wasm_${name} PRIVATE qsmcore gtest gtest_main)
    target_compile_options(qsm_wasm_${name} PRIVATE -O1)
    target_compile_definitions(qsm_wasm_${name} PRIVATE QSM_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
    # -O1 at link: binaryen's -O3 passes over a test binary cost CI minutes and test nothing.
    target_link_options(qsm_wasm_${name} PRIVATE ${QSM_TEST_LINK} -O1)
    add_test(NAME wasm.${name} COMMAND ${QSM_NODE} $<TARGET_FILE:qsm_wasm_${name}> --gtest_brief=1)
    set_tests_properties(wasm.${name} PROPERTIES LABELS wasm TIMEOUT 1800)
  endforeach()
endif()
