# The wasm32 memory figures (NetworkMemory::wasm_fixed_bytes / wasm_bytes_per_voxel): the heap
# growth policy every wasm program of this build links with, and the driver that measures one
# point (src/wasm/measure_main.cpp; `qsm measure --wasm` runs it, docs/wasm.md explains).
# Included by cmake/wasm.cmake after the qsmcore library.

# Grow the linear memory to what malloc asks for, no more. emscripten's default grows it by 20 %
# of its current size (at most 96 MiB over the request), so the size a host sees
# (HEAP8.buffer.byteLength) would depend on the order of earlier growths, not on what the run
# needs, and no per-network line could predict it within 5 %. Applied at the end of this folder's
# configuration to every executable (qsm-node, the page's module, the tests), whichever file
# defines it, so the figures hold for every host; a target that sets QSM_WASM_DEFAULT_GROWTH
# keeps emscripten's policy (the comparison driver below).
set(QSM_WASM_GROWTH_LINK -sMEMORY_GROWTH_GEOMETRIC_STEP=0)
function(qsm_wasm_apply_growth_policy)
  get_property(targets DIRECTORY ${CMAKE_SOURCE_DIR} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    get_target_property(keep ${t} QSM_WASM_DEFAULT_GROWTH)
    if(type STREQUAL "EXECUTABLE" AND NOT keep)
      target_link_options(${t} PRIVATE ${QSM_WASM_GROWTH_LINK})
    endif()
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL qsm_wasm_apply_growth_policy)

# The measuring driver: measure_network_memory from src/measure (the wasm library leaves that
# folder out), run by plain `node qsm-measure-node.js ARGS` (not modularized).
set(QSM_MEASURE_NODE_SOURCES ${CMAKE_SOURCE_DIR}/src/wasm/measure_main.cpp
  ${CMAKE_SOURCE_DIR}/src/measure/measure_network.cpp ${CMAKE_SOURCE_DIR}/src/measure/linear_fit.cpp)
set(QSM_MEASURE_NODE_LINK -sENVIRONMENT=node -sNODERAWFS=1 -sEXIT_RUNTIME=1 -sALLOW_MEMORY_GROWTH=1
  -sMAXIMUM_MEMORY=4GB -sTOTAL_STACK=8MB --pre-js ${CMAKE_SOURCE_DIR}/src/wasm/node_env.js)
if(QSM_WASM_THREADS)
  list(APPEND QSM_MEASURE_NODE_LINK -sPROXY_TO_PTHREAD "-sPTHREAD_POOL_SIZE=require('os').cpus().length+2")
endif()
# Built by default in the pthread build only: the figures are measured there (`qsm measure --wasm
# build-wasm/mt`), and its link (binaryen at -O3) cost CI a minute in the single-threaded build
# too. `ninja -C build-wasm/st qsm-measure-node` still builds it.
if(QSM_WASM_THREADS)
  add_executable(qsm-measure-node ${QSM_MEASURE_NODE_SOURCES})
else()
  add_executable(qsm-measure-node EXCLUDE_FROM_ALL ${QSM_MEASURE_NODE_SOURCES})
endif()
target_include_directories(qsm-measure-node PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(qsm-measure-node PRIVATE qsmcore)
target_link_options(qsm-measure-node PRIVATE ${QSM_MEASURE_NODE_LINK})

# The same driver with emscripten's default growth, to show what that policy costs in heap and
# saves in time (docs/wasm.md). Not built by default.
option(QSM_WASM_GROWTH_COMPARISON "Also build qsm-measure-node-geometric (emscripten's default heap growth)" OFF)
if(QSM_WASM_GROWTH_COMPARISON)
  add_executable(qsm-measure-node-geometric ${QSM_MEASURE_NODE_SOURCES})
  target_include_directories(qsm-measure-node-geometric PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(qsm-measure-node-geometric PRIVATE qsmcore)
  target_link_options(qsm-measure-node-geometric PRIVATE ${QSM_MEASURE_NODE_LINK})
  set_target_properties(qsm-measure-node-geometric PROPERTIES QSM_WASM_DEFAULT_GROWTH ON)
endif()
