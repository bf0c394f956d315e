# The engine's sources, one folder per concern under src/ (see README "Layout"), globbed so that
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
  ${CMAKE_SOURCE_DIR}/src/networks/*.cpp
  ${CMAKE_SOURCE_DIR}/src/tiling/*.cpp
  ${CMAKE_SOURCE_DIR}/src/residency/*.cpp
  ${CMAKE_SOURCE_DIR}/src/system/*.cpp
  ${CMAKE_SOURCE_DIR}/src/batch/*.cpp)
