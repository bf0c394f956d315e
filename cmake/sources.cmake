# The engine's sources, one folder per concern under src/ (docs/architecture.md's folder table), globbed so that
# adding a file to a concern needs no build edit. The native build (CMakeLists.txt) and the
# WebAssembly build (cmake/wasm.cmake) each filter out what they cannot build.
file(GLOB_RECURSE QSM_SOURCES CONFIGURE_DEPENDS
  ${CMAKE_SOURCE_DIR}/src/core/*.cpp
  ${CMAKE_SOURCE_DIR}/src/io/*.cpp
  ${CMAKE_SOURCE_DIR}/src/memory/*.cpp
  ${CMAKE_SOURCE_DIR}/src/measure/*.cpp
  ${CMAKE_SOURCE_DIR}/src/graph/*.cpp
  ${CMAKE_SOURCE_DIR}/src/onnx/*.cpp
  ${CMAKE_SOURCE_DIR}/src/kernels/*.cpp
  ${CMAKE_SOURCE_DIR}/src/runtime/*.cpp
  ${CMAKE_SOURCE_DIR}/src/models/*.cpp
  ${CMAKE_SOURCE_DIR}/src/physics/*.cpp
  ${CMAKE_SOURCE_DIR}/src/scan/*.cpp
  ${CMAKE_SOURCE_DIR}/src/masking/*.cpp
  ${CMAKE_SOURCE_DIR}/src/unwrap/*.cpp
  ${CMAKE_SOURCE_DIR}/src/fieldmap/*.cpp
  ${CMAKE_SOURCE_DIR}/src/bgremove/*.cpp
  ${CMAKE_SOURCE_DIR}/src/inversion/*.cpp
  ${CMAKE_SOURCE_DIR}/src/relaxometry/*.cpp
  ${CMAKE_SOURCE_DIR}/src/pipeline/*.cpp
  ${CMAKE_SOURCE_DIR}/src/networks/*.cpp
  ${CMAKE_SOURCE_DIR}/src/tiling/*.cpp
  ${CMAKE_SOURCE_DIR}/src/residency/*.cpp
  ${CMAKE_SOURCE_DIR}/src/spill/*.cpp
  ${CMAKE_SOURCE_DIR}/src/system/*.cpp
  ${CMAKE_SOURCE_DIR}/src/batch/*.cpp)

# QSM_UNITY_BUILD compiles the library as batches of sources (CMake's unity build): each batch
# parses the shared headers (nlohmann/json, the graph and runtime headers) once instead of once per
# file, which takes the library's compile time to less than half (11 runtime and memory files:
# 44 CPU-s apart, 19 s as one batch). The qsm executable is batched too: CLI11 alone takes 15 s
# per command file (24 s under the sanitizers). CI's builds use it (.ci/run sets it); developers'
# builds do not, so each source still compiles on its own includes there. (The test files are not
# batched: their compile time is gtest's generated code, not headers, and they are full of
# same-named local helpers.)
option(QSM_UNITY_BUILD "Compile the library as unity batches" OFF)
function(qsm_unity_library target)
  if(QSM_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()

# The native Winograd conv (src/kernels/winograd/, issue #50) runs its products on oneDNN's matmul:
# built with the oneDNN backend only, never in WebAssembly (which has its own in kernels/wasm/).
if(EMSCRIPTEN OR NOT QSM_WITH_ONEDNN)
  list(FILTER QSM_SOURCES EXCLUDE REGEX "/kernels/winograd/")
endif()
