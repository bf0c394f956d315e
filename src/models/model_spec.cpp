// ModelSpec's methods: names of its enums, availability, and the memory figures of memory.md
// §2.3. Memory arithmetic saturates at UINT64_MAX as the reference's does, so an absurd shape
// reads as "too big" instead of wrapping to a small number that would pass a budget check.
#include "qsmcore/model_spec.h"

#include <algorithm>
#include <limits>

#include "core/saturating.h"
#include "qsmcore/error.h"

namespace qsmcore {
namespace {

const NetworkMemory& measured_memory(const ModelSpec& spec) {
  if (!spec.memory) throw Error(ErrorKind::NotFound, "memory of '" + std::string(spec.id) + "' not measured yet");
  return *spec.memory;
}

template <class T>
bool same_sequence(std::span<const T> a, std::span<const T> b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

}  // namespace

const char* to_string(ModelStage stage) {
  switch (stage) {
    case ModelStage::PhaseToField:
      return "PhaseToField";
    case ModelStage::BackgroundRemoval:
      return "BackgroundRemoval";
    case ModelStage::DipoleInversion:
      return "DipoleInversion";
    case ModelStage::SingleStep:
      return "SingleStep";
    case ModelStage::ChiSeparation:
      return "ChiSeparation";
    case ModelStage::BrainExtraction:
      return "BrainExtraction";
    case ModelStage::R2PrimeGeneration:
      return "R2PrimeGeneration";
    case ModelStage::Segmentation:
      return "Segmentation";
  }
  return "?";
}

const char* to_string(WeightStatus status) {
  switch (status) {
    case WeightStatus::Available:
      return "Available";
    case WeightStatus::Pending:
      return "Pending";
  }
  return "?";
}

const char* to_string(Framework framework) {
  switch (framework) {
    case Framework::Onnx:
      return "Onnx";
    case Framework::PyTorch:
      return "PyTorch";
    case Framework::TensorFlow:
      return "TensorFlow";
    case Framework::Matlab:
      return "Matlab";
  }
  return "?";
}

const char* to_string(Heap heap) {
  switch (heap) {
    case Heap::Native:
      return "Native";
    case Heap::Wasm32:
      return "Wasm32";
  }
  return "?";
}

std::uint64_t voxel_count(std::array<std::size_t, 3> shape) {
  return saturating_mul(saturating_mul(shape[0], shape[1]), shape[2]);
}

std::uint64_t TileCost::bytes(std::array<std::size_t, 3> patch) const {
  const std::uint64_t v = voxel_count(patch);
  std::size_t n = 0;
  while (n < small.size() && small[n].voxels > 0) ++n;
  if (n == 0 || v >= small[n - 1].voxels) return saturating_add(fixed_bytes, saturating_mul(v, bytes_per_voxel));
  if (v <= small[0].voxels) return small[0].bytes;
  std::size_t i = 1;
  while (small[i].voxels < v) ++i;
  // The chord from small[i - 1] to small[i], rounded up (all terms stay far below 2^64: the
  // points are measured patches).
  const TilePoint a = small[i - 1], b = small[i];
  if (b.bytes <= a.bytes) return a.bytes;
  const std::uint64_t run = b.voxels - a.voxels;
  return a.bytes + ((b.bytes - a.bytes) * (v - a.voxels) + run - 1) / run;
}

bool ModelSpec::is_available() const {
  return status == WeightStatus::Available && !files.empty() &&
         std::all_of(files.begin(), files.end(),
                     [](const WeightFile& f) { return f.is_hosted() || (f.shipped && !f.sha256.empty()); });
}

std::uint64_t ModelSpec::total_bytes() const {
  std::uint64_t sum = 0;
  for (const WeightFile& f : files) sum = saturating_add(sum, f.bytes);
  return sum;
}

std::uint64_t ModelSpec::resident_bytes() const {
  return measured_memory(*this).resident_bytes;
}

std::uint64_t ModelSpec::inference_bytes(std::array<std::size_t, 3> shape) const {
  const NetworkMemory& m = measured_memory(*this);
  return saturating_add(m.inference_fixed_bytes, saturating_mul(voxel_count(shape), m.inference_bytes_per_voxel));
}

std::uint64_t ModelSpec::peak_bytes(std::array<std::size_t, 3> shape, Heap heap) const {
  const NetworkMemory& m = measured_memory(*this);
  switch (heap) {
    case Heap::Native:
      return std::max(m.load_peak_bytes, saturating_add(m.resident_bytes, inference_bytes(shape)));
    case Heap::Wasm32:
      // (0, 0) is "not measured in wasm32": any load + run grows the linear memory, so a measured
      // network never has both at 0, and the native figures are no stand-in (docs/wasm.md).
      if (m.wasm_fixed_bytes == 0 && m.wasm_bytes_per_voxel == 0)
        throw Error(ErrorKind::NotFound, "wasm32 memory of '" + std::string(id) + "' not measured yet");
      return std::max(m.load_peak_bytes,
                      saturating_add(m.wasm_fixed_bytes, saturating_mul(voxel_count(shape), m.wasm_bytes_per_voxel)));
  }
  throw Error(ErrorKind::Internal, "peak_bytes: unknown Heap value");
}

std::optional<TileCost> ModelSpec::tile_cost() const {
  if (!tiled) return std::nullopt;
  if (!native_tile_bytes_per_voxel)
    throw Error(ErrorKind::NotFound, "tile memory of '" + std::string(id) + "' not measured yet");
  return TileCost{.fixed_bytes = native_tile_fixed_bytes,
                  .bytes_per_voxel = *native_tile_bytes_per_voxel,
                  .small = native_tile_small};
}

bool operator==(const ModelSpec& a, const ModelSpec& b) {
  return a.id == b.id && a.name == b.name && a.stage == b.stage && a.status == b.status && a.origin == b.origin &&
         a.description == b.description && a.paper == b.paper && a.source == b.source && a.license == b.license &&
         same_sequence(a.files, b.files) && same_sequence(a.inputs, b.inputs) && same_sequence(a.outputs, b.outputs) &&
         a.size_divisor == b.size_divisor && a.pad_multiple == b.pad_multiple && a.tiled == b.tiled &&
         a.tile_bytes_per_voxel == b.tile_bytes_per_voxel &&
         a.native_tile_bytes_per_voxel == b.native_tile_bytes_per_voxel &&
         a.native_tile_fixed_bytes == b.native_tile_fixed_bytes && a.native_tile_small == b.native_tile_small &&
         a.wasm_tiled_run == b.wasm_tiled_run && a.memory == b.memory;
}

}  // namespace qsmcore
