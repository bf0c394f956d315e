// The model registry: models() as dicts (the registry's own JSON form, so Python sees exactly
// what `qsm models show ID --json` prints) and ModelSpec objects with the memory figures.
// ModelSpecs live in static storage, so the Python objects refer to them without copying.
#include <pybind11/stl.h>

#include <array>
#include <optional>
#include <string>

#include "bindings.h"
#include "qsmcore/error.h"
#include "qsmcore/models.h"
#include "qsmcore/networks.h"
#include "qsmcore/tiling.h"

namespace qsmpy {
namespace {

using qsmcore::ModelSpec;

std::array<std::size_t, 3> spatial(const std::vector<std::int64_t>& shape) {
  if (shape.size() != 3)
    throw qsmcore::Error(
        qsmcore::ErrorKind::InvalidInput,
        "shape: expected the 3 spatial dimensions the network sees, got " + std::to_string(shape.size()) + " values");
  std::array<std::size_t, 3> s{};
  for (int i = 0; i < 3; ++i) {
    if (shape[i] < 0) throw qsmcore::Error(qsmcore::ErrorKind::InvalidInput, "shape: negative dimension");
    s[i] = static_cast<std::size_t>(shape[i]);
  }
  return s;
}

qsmcore::Heap heap_from(const std::string& s) {
  if (s == "native") return qsmcore::Heap::Native;
  if (s == "wasm32") return qsmcore::Heap::Wasm32;
  throw qsmcore::Error(qsmcore::ErrorKind::InvalidInput, "heap '" + s + "': expected 'native' or 'wasm32'");
}

py::object json_loads(const std::string& text) {
  return py::module_::import("json").attr("loads")(text);
}

py::dict needs_dict(const ModelSpec& s) {
  const qsmcore::NetworkNeeds n = qsmcore::network_needs(s);
  py::dict d;
  d["field"] = n.field;
  d["magnitude"] = n.magnitude;
  d["mask"] = n.mask;
  d["r2star"] = n.r2star;
  d["r2prime"] = n.r2prime;
  d["qsm"] = n.qsm;
  d["te"] = n.te;
  d["b0"] = n.b0;
  d["field_kind"] = n.field_kind;
  return d;
}

using SpecClass = py::class_<ModelSpec>;

// What the network is: identity, stage, files, tiling rules, what a run needs.
void bind_spec_facts(SpecClass& c) {
  c.def_property_readonly("id", [](const ModelSpec& s) { return std::string(s.id); })
      .def_property_readonly("name", [](const ModelSpec& s) { return std::string(s.name); })
      .def_property_readonly("stage", [](const ModelSpec& s) { return std::string(to_string(s.stage)); })
      .def_property_readonly("tiled", [](const ModelSpec& s) { return s.tiled; })
      .def_property_readonly(
          "tile_bytes_per_voxel", [](const ModelSpec& s) { return s.tile_bytes_per_voxel; },
          "The seed's tile cost, measured in wasm32 (slope of the heap against patch voxels); None if not.")
      .def_property_readonly(
          "native_tile_bytes_per_voxel", [](const ModelSpec& s) { return s.native_tile_bytes_per_voxel; },
          "Native tile cost per patch voxel, from the patch of core 32 up (with native_tile_fixed_bytes).")
      .def_property_readonly("native_tile_fixed_bytes", [](const ModelSpec& s) { return s.native_tile_fixed_bytes; })
      .def_property_readonly(
          "wasm_tiled_run",
          [](const ModelSpec& s) -> py::object {
            if (!s.wasm_tiled_run) return py::none();
            py::dict d;
            d["held_bytes"] = s.wasm_tiled_run->held_bytes;
            d["tile_fixed_bytes"] = s.wasm_tiled_run->tile_fixed_bytes;
            d["tile_bytes_per_voxel"] = s.wasm_tiled_run->tile_bytes_per_voxel;
            py::list small;
            for (const qsmcore::TilePoint& p : s.wasm_tiled_run->tile_small)
              if (p.voxels > 0) small.append(py::cast(std::vector<std::uint64_t>{p.voxels, p.bytes}));  // as to_dict()
            d["tile_small"] = small;
            return d;
          },
          "A whole tiled run in wasm32 (memory.md §4.6): {held_bytes, tile_fixed_bytes, tile_bytes_per_voxel,\n"
          "tile_small: [[voxels, bytes]] of the patches up to the line's first},\n"
          "measured from the web page's own tiled runs; None if not.")
      .def_property_readonly("size_divisor", [](const ModelSpec& s) { return s.size_divisor; })
      .def_property_readonly("pad_multiple", [](const ModelSpec& s) { return s.pad_multiple; })
      .def_property_readonly("is_available", &ModelSpec::is_available)
      .def_property_readonly("total_bytes", &ModelSpec::total_bytes)
      .def_property_readonly("files",
                             [](const ModelSpec& s) {
                               py::list l;
                               for (const auto& f : s.files) l.append(std::string(f.name));
                               return l;
                             })
      .def_property_readonly("needs", &needs_dict, "What run_network requires for this network.");
}

// Its memory: the registry's figures and the shapes to pass them.
void bind_spec_memory(SpecClass& c) {
  c.def("to_dict", [](const ModelSpec& s) { return json_loads(qsmcore::to_json_string(s)); })
      .def("resident_bytes", &ModelSpec::resident_bytes)
      .def(
          "inference_bytes",
          [](const ModelSpec& s, const std::vector<std::int64_t>& shape) { return s.inference_bytes(spatial(shape)); },
          py::arg("shape"))
      .def(
          "peak_bytes",
          [](const ModelSpec& s, const std::vector<std::int64_t>& shape, const std::string& heap) {
            return s.peak_bytes(spatial(shape), heap_from(heap));
          },
          py::arg("shape"), py::arg("heap") = "native")
      .def(
          "network_input_shape",
          [](const ModelSpec& s, const std::vector<std::int64_t>& volume,
             const std::optional<std::vector<std::int64_t>>& fixed_patch) {
            std::optional<std::array<std::size_t, 3>> patch;
            if (fixed_patch) patch = spatial(*fixed_patch);
            return qsmcore::network_input_shape(s, spatial(volume), patch);
          },
          py::arg("volume_shape"), py::arg("fixed_patch") = py::none(),
          "The spatial shape the network's graph sees for a whole-volume run of volume_shape (x, y, z;\n"
          "for iQSM+ its mask crop, for HD-BET the 1 mm crop, for SynthSeg the 1 mm RAS shape), in the\n"
          "graph's axis order: what peak_bytes and inference_bytes take (qsmcore/tiling.h).\n"
          "QSMGAN, AutoQSM and RS2-Net need fixed_patch, their graph's patch, and return it.");
}

// Its tiled runs: a tile's cost, tiles in flight, a tiled run's peak (qsmcore/tiling.h).
void bind_spec_tiling(SpecClass& c) {
  c.def(
       "tile_bytes",
       [](const ModelSpec& s, std::size_t core, std::size_t halo) {
         return qsmcore::tile_bytes(s, qsmcore::TileConfig{core, halo});
       },
       py::arg("core") = 128, py::arg("halo") = 8)
      .def(
          "wasm_tile_bytes",
          [](const ModelSpec& s, std::size_t core, std::size_t halo) {
            return qsmcore::wasm_tile_bytes(s, qsmcore::TileConfig{core, halo});
          },
          py::arg("core") = 128, py::arg("halo") = 8,
          "One more tile in flight on wasm32: the wasm32 tiled runs' tile line where measured, else the\n"
          "seed's tile_bytes_per_voxel times the padded patch's voxels.")
      .def(
          "tile_concurrency",
          [](const ModelSpec& s, std::size_t core, std::size_t halo, std::uint64_t budget, std::size_t threads,
             std::uint64_t wrapper_bytes) {
            return qsmcore::tile_concurrency(s, qsmcore::TileConfig{core, halo}, budget, threads, wrapper_bytes);
          },
          py::arg("core"), py::arg("halo"), py::arg("budget"), py::arg("threads"), py::arg("wrapper_bytes") = 0,
          "Tiles in flight natively; with wrapper_bytes = tiled_wrapper_bytes(voxels) and budget the room\n"
          "above what the caller holds, what the tiled wrapper itself runs.")
      .def(
          "wasm_tiles_in_flight",
          [](const ModelSpec& s, std::size_t core, std::size_t halo, std::size_t pool, std::uint64_t budget,
             std::uint64_t wrapper_bytes) {
            return qsmcore::wasm_tiles_in_flight(s, qsmcore::TileConfig{core, halo}, pool, budget, wrapper_bytes);
          },
          py::arg("core"), py::arg("halo"), py::arg("pool"), py::arg("budget") = 0, py::arg("wrapper_bytes") = 0,
          "Tiles in flight on wasm32 (qsmcore/tiling.h), lowered to what fits in budget (0 = none).")
      .def(
          "tiled_wrapper_bytes",
          [](const ModelSpec& s, std::uint64_t voxels, bool field_copy) {
            return qsmcore::tiled_wrapper_bytes(s, voxels, field_copy);
          },
          py::arg("voxels"), py::arg("field_copy") = true)
      .def(
          "tiled_prepare_bytes",
          [](const ModelSpec& s, const std::array<std::size_t, 3>& volume, bool field_copy) {
            return qsmcore::tiled_prepare_bytes(s, volume, field_copy);
          },
          py::arg("volume"), py::arg("field_copy") = true,
          "What a tiled wrapper holds before its first tile (qsmcore-invnet's TKD prior; 0 for the others),\n"
          "volume = (x, y, z) unpadded.")
      .def(
          "tiled_peak_bytes",
          [](const ModelSpec& s, std::size_t core, std::size_t halo, const std::array<std::size_t, 3>& volume,
             std::size_t in_flight, bool field_copy) {
            return qsmcore::tiled_peak_bytes(s, qsmcore::TileConfig{core, halo}, volume, in_flight, field_copy);
          },
          py::arg("core"), py::arg("halo"), py::arg("volume"), py::arg("in_flight"), py::arg("field_copy") = true,
          "A tiled run's whole peak natively from the registry's figures alone, with in_flight tiles at once\n"
          "(tile_concurrency's answer, at most the tiles whose core holds a mask voxel): memory.md §4.4.")
      .def(
          "wasm_tiled_peak_bytes",
          [](const ModelSpec& s, std::size_t core, std::size_t halo, const std::array<std::size_t, 3>& volume,
             std::size_t in_flight, bool field_copy) {
            return qsmcore::wasm_tiled_peak_bytes(s, qsmcore::TileConfig{core, halo}, volume, in_flight, field_copy);
          },
          py::arg("core"), py::arg("halo"), py::arg("volume"), py::arg("in_flight"), py::arg("field_copy") = true,
          "A tiled run's heap in wasm32 from the registry's figures alone (memory.md §4.6), without the\n"
          "input volumes the caller makes; raises LookupError where the wasm32 tiled run is not measured.");
}

void bind_spec_class(py::module_& m) {
  SpecClass c(m, "ModelSpec", "One registry network (qsm models show ID).");
  bind_spec_facts(c);
  bind_spec_memory(c);
  bind_spec_tiling(c);
  c.def("__repr__", [](const ModelSpec& s) { return "<qsmcore.ModelSpec '" + std::string(s.id) + "'>"; });
}

}  // namespace

void bind_registry(py::module_& m) {
  bind_spec_class(m);
  m.def("models", [] {
    py::list l;
    for (const ModelSpec& s : qsmcore::all_models()) l.append(json_loads(qsmcore::to_json_string(s)));
    return l;
  });
  m.def(
      "model", [](const std::string& id) { return &qsmcore::require_model(id); }, py::arg("id"),
      py::return_value_policy::reference);
  m.def(
      "resolve_weights",
      [](const std::string& id, bool verify, bool allow_download) {
        qsmcore::FetchOptions f;
        f.verify = verify;
        f.allow_download = allow_download;
        f.download.progress = qsmcore::DownloadOptions::Progress::Never;
        std::vector<std::string> paths;
        {
          py::gil_scoped_release release;
          for (const auto& w : qsmcore::resolve_weights(id, f)) paths.push_back(w.path.string());
        }
        return paths;
      },
      py::arg("id"), py::arg("verify") = true, py::arg("allow_download") = true);
}

}  // namespace qsmpy
