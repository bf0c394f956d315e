#!/usr/bin/env bash
# Builds the libFuzzer targets with ASan+UBSan and runs each for SECONDS.
#   tools/fuzz.sh [SECONDS=60] [extra libFuzzer flags...]
#   FUZZ_TARGETS="graph_plan nifti_reader" tools/fuzz.sh 30   # a subset
# Targets (fuzz/*_fuzz.cpp):
#   onnx_reader   bytes -> the protobuf wire reader -> Model, initializers loaded
#   graph_plan    bytes -> Model -> typed graph (shape inference, folding) -> passes -> a
#                 reference-backend plan for small input shapes -> a run when the plan is tiny
#   nifti_reader  bytes -> read_nifti as .nii and as .nii.gz (NIfTI-1 and -2)
#   batch_files   bytes -> qsm batch's TSV manifest reader and its DIR/jobs.json reader
#   sidecar       bytes -> a scan's JSON sidecar parser (and the phase-scaling rules)
# Each target compiles only the sources it needs, straight from src/ (no CMake), through a
# generated ninja file in build-fuzz/ (incremental between runs). Corpora in
# build-fuzz/corpus/<target> grow across runs, seeded by fuzz/make_seeds.cpp, and every run replays
# fuzz/regressions/<target> (inputs of past findings); a finding (crash,
# sanitizer report, hang over 5 s, allocation over 256 MiB) lands in build-fuzz/crashes/ and
# makes the script exit non-zero.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-60}"
shift || true
out="${FUZZ_OUT:-$root/build-fuzz}"
targets=(${FUZZ_TARGETS:-onnx_reader graph_plan nifti_reader batch_files sidecar})
cxx="${CXX_FUZZ:-clang++}"
# clang brings libFuzzer and the sanitizers; the planner's thread control needs clang's OpenMP.
if ! command -v "$cxx" >/dev/null || ! echo '#include <omp.h>' | "$cxx" -fopenmp -x c++ -fsyntax-only - 2>/dev/null; then
  echo "installing clang and libomp-dev (libFuzzer, OpenMP)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libomp-dev >/dev/null
fi
mkdir -p "$out/crashes"

# Sources per target, relative to the repository root.
common=(src/core/*.cpp)
reader=("${common[@]}" src/onnx/*.cpp src/io/byte_source.cpp src/graph/graph.cpp)
cd "$root"
declare -A srcs libs
srcs[onnx_reader]="${reader[*]}"
srcs[graph_plan]="${reader[*]} $(ls src/graph/*.cpp src/graph/ops/*.cpp src/graph/passes/*.cpp | grep -v 'src/graph/graph.cpp' | tr '\n' ' ')
  src/kernels/reference_kernel.cpp src/kernels/post_ops.cpp src/runtime/plan.cpp src/runtime/plan_layout.cpp src/memory/arena_pieces.cpp
  src/spill/transfers.cpp src/spill/direct_operand.cpp src/memory/offset_planner.cpp src/spill/planner.cpp src/memory/arena_piece.cpp
  src/spill/file.cpp src/residency/prefetch_worker.cpp
  src/system/process_defaults.cpp src/system/process_limits.cpp"
srcs[nifti_reader]="${common[*]} src/io/nifti.cpp src/io/atomic_file.cpp"
libs[nifti_reader]="-lnifti2 -lznz -lz -lm"
srcs[batch_files]="${common[*]} src/batch/manifest.cpp src/batch/jobs.cpp src/io/atomic_file.cpp src/physics/b0_direction.cpp src/physics/units.cpp"
srcs[sidecar]="${common[*]} src/scan/sidecar.cpp src/scan/phase_scaling.cpp src/scan/scan_checks.cpp src/physics/units.cpp
  src/physics/b0_direction.cpp"
seed_srcs="${srcs[nifti_reader]}"

obj() { echo "obj/$(echo "$1" | tr / _).o"; }
{
  echo "cxx = $cxx"
  echo "opt = -O1"
  echo "flags = -std=c++20 -gline-tables-only -fno-omit-frame-pointer -I$root/include -I$root/src -I$root/tests -isystem /usr/include/nifti"
  echo "san = -fopenmp -fsanitize=address,undefined -fno-sanitize-recover=undefined"
  echo "rule cc"
  echo "  command = \$cxx \$opt \$flags \$san -fsanitize=fuzzer-no-link -MMD -MF \$out.d -c \$in -o \$out"
  echo "  depfile = \$out.d"
  echo "  deps = gcc"
  echo "rule fuzz_link"
  echo "  command = \$cxx \$opt \$flags \$san -fsanitize=fuzzer \$in -o \$out \$libs"
  echo "rule link"
  echo "  command = \$cxx \$opt \$flags \$san -fsanitize=fuzzer-no-link \$in -o \$out \$libs"
  all=$(for t in "${targets[@]}"; do echo ${srcs[$t]}; done; echo $seed_srcs fuzz/make_seeds.cpp; \
        for t in "${targets[@]}"; do echo "fuzz/${t}_fuzz.cpp"; done)
  for s in $(echo $all | tr ' ' '\n' | sort -u); do
    echo "build $(obj "$s"): cc $root/$s"
    # The per-dtype template kernels take most of the build at -O1 (binary.cpp alone ~90 s of
    # CPU, ~18 s at -O0); they are simple loops, so -O0 costs little fuzzing speed.
    case "$s" in src/graph/ops/binary.cpp | src/graph/ops/elementwise.cpp) echo "  opt = -O0" ;; esac
  done
  for t in "${targets[@]}"; do
    echo "build $t: fuzz_link $(obj "fuzz/${t}_fuzz.cpp") $(for s in ${srcs[$t]}; do obj "$s"; done | tr '\n' ' ')"
    echo "  libs = ${libs[$t]:-}"
  done
  echo "build make_seeds: link $(obj fuzz/make_seeds.cpp) $(for s in $seed_srcs; do obj "$s"; done | tr '\n' ' ')"
  echo "  libs = ${libs[nifti_reader]}"
} > "$out/build.ninja.new"
mv "$out/build.ninja.new" "$out/build.ninja"
build_start=$(date +%s)
ninja -C "$out" ${FUZZ_JOBS:+-j "$FUZZ_JOBS"} "${targets[@]}" make_seeds
echo "fuzz targets built in $(( $(date +%s) - build_start )) s"
rm -rf "$out/seeds"
"$out/make_seeds" "$out/seeds"
# The ONNX node conformance models (tools/test.sh generates them) seed graph_plan with every
# operator's attributes and shapes, which random mutation of a few seeds would rarely reach.
cases="${QSM_ONNX_CASES:-$root/build/testdata/onnx-cases/node}"
if [ -d "$cases" ]; then
  find "$cases" -name model.onnx -size -4k | while read -r m; do
    cp "$m" "$out/seeds/graph_plan/$(basename "$(dirname "$m")").onnx"
  done
fi
# Sidecars as dcm2niix, BIDS and qsm-forward write them: a per-echo file, a 4-D file's list of
# echo times, a phase sidecar with its Units, one with B0_dir and unknown nested keys.
mkdir -p "$out/seeds/sidecar"
printf '%s' '{"Modality": "MR", "MagneticFieldStrength": 3, "ImagingFrequency": 123.222513, "Manufacturer": "Siemens",
 "ImageType": ["ORIGINAL", "PRIMARY", "M", "ND"], "EchoNumber": 2, "EchoTime": 0.0123, "FlipAngle": 15}' \
  > "$out/seeds/sidecar/dcm2niix_echo.json"
printf '%s' '{"EchoTime": [0.004, 0.008, 0.012, 0.016], "MagneticFieldStrength": 7, "Units": "rad"}' \
  > "$out/seeds/sidecar/list_rad.json"
printf '%s' '{"EchoTime": 2e-3, "Units": "arbitrary", "B0_dir": [0, 0.25881904510252074, 0.9659258262890683],
 "extra": {"nested": [1, null, true, "x\u00e9"]}}' > "$out/seeds/sidecar/b0_dir.json"

# -rss_limit_mb / -malloc_limit_mb turn any allocation sized by an untrusted length into a
# finding (the targets cap accounted memory at 128 MiB, so a refused plan is not one);
# -timeout catches quadratic paths.
cd "$out"
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  echo "== fuzzing $t for $secs s"
  "./$t" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=256 -timeout=5 -max_len=4096 \
    -artifact_prefix="$out/crashes/$t-" -print_final_stats=1 -print_funcs=0 "$@" "corpus/$t" "seeds/$t" \
    $([ -d "$root/fuzz/regressions/$t" ] && echo "$root/fuzz/regressions/$t")
done
