// Loading and running a real exported network (the parity U-Net): the load peak stays within
// 1.15 × the resident model (the reader never holds the file, weights are copied once), and
// results are bit-identical across runs for a given thread count, on both backends.
#include <gtest/gtest.h>

#include <cstring>

#include "qsmcore/onnx_model.h"
#include "support/test_data.h"

namespace {

std::string unet() {
  const std::string dir = qsmtest::data_dir("QSM_TESTNETS_DIR");
  return dir.empty() ? "" : dir + "/unet3d_b16.onnx";
}

}  // namespace

TEST(ModelMemory, WeightsAreHeldOncePackedNeverRawPlusPacked) {
  const std::string path = unet();
  QSM_REQUIRE_DATA(path, "QSM_TESTNETS_DIR");
  const auto weights = [] {
    return qsmcore::memory_counters().current[static_cast<int>(qsmcore::MemCategory::Weights)];
  };
  const auto weights_peak = [] {
    return qsmcore::memory_counters().peak[static_cast<int>(qsmcore::MemCategory::Weights)];
  };
  const std::int64_t base = weights();
  qsmcore::reset_memory_peak();
  qsmcore::OnnxModel m = qsmcore::OnnxModel::load(path);
  // Loading reads the graph and small constants only: the 22.6 MB of weights stay in the file.
  EXPECT_LT(weights() - base, 1'000'000);
  EXPECT_LE(weights_peak() - base, 1'000'000);
  qsmcore::reset_memory_peak();
  const qsmcore::PlanMemory pm = m.plan_memory({{1, 1, 32, 32, 32}});
  const std::int64_t held = weights() - base;
  // Planning reads each weight, packs it and frees the raw copy: the plan then holds the packed
  // weights once, and at no time raw and packed copies of the whole model.
  EXPECT_GT(pm.packed_weight_bytes, 20'000'000);
  EXPECT_GE(held, pm.packed_weight_bytes);
  EXPECT_LE(held, pm.packed_weight_bytes + 1'000'000);
  EXPECT_LE(weights_peak() - base, static_cast<std::int64_t>(1.15 * static_cast<double>(pm.packed_weight_bytes)))
      << "planning peak " << weights_peak() - base << " vs packed " << pm.packed_weight_bytes;
}

TEST(ModelMemory, RunsAreBitIdenticalForAGivenThreadCount) {
  const std::string path = unet();
  QSM_REQUIRE_DATA(path, "QSM_TESTNETS_DIR");
  const qsmcore::Tensor x = qsmtest::random_tensor({1, 1, 16, 32, 32}, 3);
  for (auto backend : {qsmcore::Backend::Reference, qsmcore::Backend::OneDnn}) {
    qsmcore::ModelOptions o;
    o.backend = backend;
    o.threads = 2;
    qsmcore::OnnxModel m = qsmcore::OnnxModel::load(path, o);
    const auto a = m.run(std::vector<qsmcore::Tensor>{x});
    const auto b = m.run(std::vector<qsmcore::Tensor>{x});
    qsmcore::OnnxModel m2 = qsmcore::OnnxModel::load(path, o);  // a fresh plan, same threads
    const auto c = m2.run(std::vector<qsmcore::Tensor>{x});
    ASSERT_EQ(a[0].nbytes(), b[0].nbytes());
    EXPECT_EQ(std::memcmp(a[0].raw(), b[0].raw(), a[0].nbytes()), 0) << qsmcore::to_string(backend);
    EXPECT_EQ(std::memcmp(a[0].raw(), c[0].raw(), a[0].nbytes()), 0) << qsmcore::to_string(backend);
  }
}
