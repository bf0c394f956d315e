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

TEST(ModelMemory, LoadPeakWithinFifteenPercentOfResident) {
  const std::string path = unet();
  QSM_REQUIRE_DATA(path, "QSM_TESTNETS_DIR");
  const std::int64_t base = qsmcore::memory_current();
  qsmcore::reset_memory_peak();
  qsmcore::OnnxModel m = qsmcore::OnnxModel::load(path);
  const std::int64_t resident = qsmcore::memory_current() - base;
  const std::int64_t load_peak = qsmcore::memory_peak() - base;
  // The weights alone are 22.6 MB; the resident model must hold them (once).
  EXPECT_GT(resident, 20'000'000);
  EXPECT_LE(static_cast<double>(load_peak), 1.15 * static_cast<double>(resident))
      << "load peak " << load_peak << " vs resident " << resident;
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
