// The generated memory table (src/models/measured_memory.h): the wasm32 figures `qsm measure
// --wasm` merges into an entry replace the previous ones and leave the native figures alone, and a
// native regeneration keeps them.
#include <gtest/gtest.h>

#include "cli/measured_table.h"

namespace {

using qsmcore::cli::MeasuredRow;

MeasuredRow xqsm_row() {
  MeasuredRow r;
  r.id = "xqsm";
  r.tiled = true;
  r.m.memory.resident_bytes = 111;
  r.m.memory.load_peak_bytes = 222;
  r.m.memory.inference_fixed_bytes = 333;
  r.m.memory.inference_bytes_per_voxel = 44;
  r.m.tile_bytes_per_voxel = 55;
  return r;
}

std::string xqsm_block(const std::string& header) {
  return qsmcore::cli::table_row_blocks(header).at("xqsm");
}

TEST(MeasuredTable, WasmFiguresReplaceOnlyThemselves) {
  const std::string header = qsmcore::cli::measured_memory_header({xqsm_row()}, "qsm measure --all (test)");
  const std::string native = xqsm_block(header);
  EXPECT_FALSE(qsmcore::cli::wasm_figures_of(native));
  EXPECT_EQ(qsmcore::cli::table_how(header), "qsm measure --all (test)");

  const std::string once = qsmcore::cli::with_wasm_figures(native, {1000, 7, "4 shape(s), first"});
  const std::string twice = qsmcore::cli::with_wasm_figures(once, {2000, 9, "4 shape(s), second"});
  const auto w = qsmcore::cli::wasm_figures_of(twice);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->fixed_bytes, 2000u);
  EXPECT_EQ(w->bytes_per_voxel, 9u);
  EXPECT_EQ(w->note, "4 shape(s), second");
  EXPECT_EQ(twice.find("first"), std::string::npos) << twice;
  EXPECT_EQ(twice.find(".wasm_fixed_bytes"), twice.rfind(".wasm_fixed_bytes")) << twice;
  // The native figures and the tile figure are still there, unchanged.
  for (const char* s : {".resident_bytes = 111ull", ".load_peak_bytes = 222ull", ".inference_fixed_bytes = 333ull",
                        ".inference_bytes_per_voxel = 44ull", "55ull}"})
    EXPECT_NE(twice.find(s), std::string::npos) << s << " in\n" << twice;

  // The merged table is still a table: its entries read back, and a native regeneration of the
  // row keeps the wasm32 figures of the entry it replaces.
  const std::string merged = qsmcore::cli::measured_memory_header({}, "how", {{"xqsm", twice}});
  EXPECT_EQ(xqsm_block(merged), twice);
  const std::string regenerated =
      qsmcore::cli::measured_memory_header({xqsm_row()}, "how", {}, qsmcore::cli::table_row_blocks(merged));
  const auto kept = qsmcore::cli::wasm_figures_of(xqsm_block(regenerated));
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->fixed_bytes, 2000u);
  EXPECT_EQ(kept->bytes_per_voxel, 9u);
}

}  // namespace
