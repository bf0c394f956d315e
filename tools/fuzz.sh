#!/usr/bin/env bash
# Builds the libFuzzer target for the ONNX reader with ASan+UBSan and runs it.
#   tools/fuzz.sh [SECONDS=60] [extra libFuzzer flags...]
# Compiles the few sources the reader needs directly (no CMake), into build-fuzz/. The corpus
# (build-fuzz/corpus) is seeded from models built with tests/onnx/onnx_writer.h and grows
# across runs; crashes land in build-fuzz/crashes.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-60}"
shift || true
out="$root/build-fuzz"
mkdir -p "$out/corpus" "$out/crashes"
cxx="${CXX_FUZZ:-clang++}"
flags=(-std=c++20 -g -O1 -fno-omit-frame-pointer -I"$root/include" -I"$root/src" -I"$root/tests")
srcs=("$root"/src/onnx/*.cpp "$root/src/io/byte_source.cpp" "$root"/src/core/*.cpp
      "$root/src/memory/accounting.cpp" "$root/src/graph/graph.cpp")

echo "building $out/onnx_reader_fuzz"
"$cxx" "${flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  "$root/fuzz/onnx_reader_fuzz.cpp" "${srcs[@]}" -o "$out/onnx_reader_fuzz"
"$cxx" "${flags[@]}" "$root/fuzz/make_seeds.cpp" -o "$out/make_seeds"
"$out/make_seeds" "$out/corpus"

# -rss_limit_mb / -malloc_limit_mb turn any allocation sized by an untrusted length into a
# finding; -timeout catches quadratic paths.
cd "$out"
exec ./onnx_reader_fuzz -max_total_time="$secs" -rss_limit_mb=1024 -malloc_limit_mb=256 -timeout=5 \
  -max_len=4096 -artifact_prefix="$out/crashes/" -print_final_stats=1 "$@" "$out/corpus"
