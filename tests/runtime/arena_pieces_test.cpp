// Arenas in pieces (wasm32: one allocation stays below 2 GiB): no value straddles two pieces,
// and a run whose arena is split gives the outputs of the one-piece run bit for bit, spilled or
// not. The platform's piece is forced small here so the path runs natively.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "../support/test_data.h"
#include "memory/arena_piece.h"
#include "memory/offset_planner.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/onnx_model.h"
#include "runtime/model_budget.h"

namespace {

using qsmcore::memory::Lifetime;

// Restores the platform's piece whatever the test does.
struct PieceOverride {
  explicit PieceOverride(std::size_t bytes) { qsmcore::memory::set_arena_piece_bytes_for_testing(bytes); }
  ~PieceOverride() { qsmcore::memory::set_arena_piece_bytes_for_testing(0); }
};

TEST(ArenaPieces, NoBufferStraddlesAPieceAndNoneCollides) {
  std::vector<Lifetime> lt;
  unsigned s = 777;
  auto rnd = [&s] { return s = s * 1103515245u + 12345u, (s >> 8) & 0xffff; };
  for (int i = 0; i < 200; ++i) {
    const int first = static_cast<int>(rnd() % 60);
    lt.push_back({64 + (rnd() % 40) * 1000, first, first + static_cast<int>(rnd() % 12)});
  }
  constexpr std::size_t piece = 64 * 1024;
  const auto one = qsmcore::memory::plan_offsets(lt);
  const auto p = qsmcore::memory::plan_offsets(lt, piece);
  ASSERT_EQ(p.offsets.size(), lt.size());
  for (std::size_t i = 0; i < lt.size(); ++i) {
    EXPECT_EQ(p.offsets[i] / piece, (p.offsets[i] + lt[i].bytes - 1) / piece) << "buffer " << i << " straddles";
    EXPECT_LE(p.offsets[i] + lt[i].bytes, p.total);
    for (std::size_t j = i + 1; j < lt.size(); ++j) {
      if (lt[i].first > lt[j].last || lt[j].first > lt[i].last) continue;
      EXPECT_TRUE(p.offsets[i] + lt[i].bytes <= p.offsets[j] || p.offsets[j] + lt[j].bytes <= p.offsets[i])
          << "buffers " << i << " and " << j << " overlap in time and space";
    }
  }
  EXPECT_GE(p.total, one.total) << "a constraint cannot make the arena smaller";
  EXPECT_GT(p.total, piece) << "the case must need several pieces";
}

qsmcore::ModelOptions options() {
  qsmcore::ModelOptions o;
  o.threads = 2;
  o.mem_budget = 0;
  return o;
}

// `file` with its arena in pieces as small as its largest value allows: the same bits as the
// one-piece run, whole-life and, where something can spill, spilled under a cap; the pieces stay
// within the plan's peak.
void expect_pieced_run_is_bitwise(const std::string& file, const qsmcore::Shape& shape) {
  const std::vector<qsmcore::Tensor> in = {qsmtest::random_tensor(shape, 5)};
  auto whole = qsmcore::OnnxModel::load(file, options());
  const auto ref = whole.run(in);
  const qsmcore::PlanMemory one = whole.plan_memory({shape});
  const auto piece = static_cast<std::size_t>(std::max(one.largest_block_bytes, one.arena_bytes / 3));
  const PieceOverride guard(piece);
  auto m = qsmcore::OnnxModel::load(file, options());
  const qsmcore::PlanMemory pm = m.plan_memory({shape});
  EXPECT_GE(pm.arena_bytes, one.arena_bytes);
  ASSERT_GT(static_cast<std::size_t>(pm.arena_bytes), piece) << file << ": the arena must span several pieces";
  const std::int64_t before = qsmcore::memory_current();
  qsmcore::reset_memory_peak();
  qsmtest::expect_bitwise(m.run(in), ref, file + " in pieces");
  EXPECT_LE(qsmcore::memory_peak() - before, pm.run_peak_bytes()) << file << ": the pieces passed the plan's peak";
  const std::int64_t least = m.min_run_bytes({shape});
  if (least == pm.run_peak_bytes()) return;
  const std::int64_t cap = (least + pm.run_peak_bytes()) / 2;
  const qsmcore::PlanMemory spilled = m.plan_memory({shape}, cap);
  ASSERT_GT(spilled.spill_read_bytes, 0);
  qsmcore::ModelBudget::limit_run_bytes(m, cap);
  qsmcore::reset_memory_peak();
  qsmtest::expect_bitwise(m.run(in), ref, file + " spilled, in pieces");
  EXPECT_LE(qsmcore::memory_peak() - before, cap);
}

// The xQSM twin: a U-Net, whose skip connections live across many steps.
TEST(ArenaPieces, APiecedUNetRunIsBitwiseTheOnePieceRun) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  expect_pieced_run_is_bitwise(dir + "/xqsm.onnx", {1, 1, 24, 24, 24});
}

// The shipped network (three input channels, residual blocks: in-place sums).
TEST(ArenaPieces, APiecedRunOfTheShippedNetworkIsBitwiseTheOnePieceRun) {
  expect_pieced_run_is_bitwise(std::string(QSM_SOURCE_DIR) + "/models/qsmcore-invnet.onnx", {1, 3, 24, 24, 24});
}

// A platform piece just under two of the largest values: three of them live at once (the
// shipped network's last level: the upsampled, the skip and the first conv's output) took a
// piece each, so the arena grew by almost a piece over the one-piece layout (at 256³ in wasm32:
// 5118 MiB for 3072, past the 4 GiB address space). The plan now also tries pieces of k times
// the largest block and keeps the tightest.
TEST(ArenaPieces, APieceJustUnderTwoValuesDoesNotLeaveHalfOfEachPieceEmpty) {
  const std::string file = std::string(QSM_SOURCE_DIR) + "/models/qsmcore-invnet.onnx";
  const qsmcore::Shape shape{1, 3, 32, 32, 32};
  const std::vector<qsmcore::Tensor> in = {qsmtest::random_tensor(shape, 5)};
  // The reference backend, as the SIMD128 one, runs the concatenations as convs with a Sum:
  // three activations of the top level live at once (oneDNN's plan differs).
  qsmcore::ModelOptions o = options();
  o.backend = qsmcore::Backend::Reference;
  auto whole = qsmcore::OnnxModel::load(file, o);
  const auto ref = whole.run(in);
  const qsmcore::PlanMemory one = whole.plan_memory({shape});
  const auto largest = static_cast<std::size_t>(one.largest_block_bytes);
  const PieceOverride guard(2 * largest - 64);
  auto m = qsmcore::OnnxModel::load(file, o);
  const qsmcore::PlanMemory pm = m.plan_memory({shape});
  ASSERT_GT(static_cast<std::size_t>(pm.arena_bytes), 2 * largest) << "the arena must span several pieces";
  EXPECT_LT(static_cast<std::size_t>(pm.arena_bytes), static_cast<std::size_t>(one.arena_bytes) + largest / 2);
  qsmtest::expect_bitwise(m.run(in), ref, file + " in pieces of one value");
}

// A value larger than a piece cannot be placed: refused when planned, naming why.
TEST(ArenaPieces, AValueLargerThanAPieceIsRefusedByName) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const qsmcore::Shape shape{1, 1, 24, 24, 24};
  const PieceOverride guard(4096);
  auto m = qsmcore::OnnxModel::load(dir + "/xqsm.onnx", options());
  try {
    (void)m.run({qsmtest::random_tensor(shape, 5)});
    ADD_FAILURE() << "a value of more than 4096 bytes was planned in 4096-byte pieces";
  } catch (const qsmcore::Error& e) {
    EXPECT_EQ(e.kind(), qsmcore::ErrorKind::OutOfBudget) << e.what();
    EXPECT_NE(std::string(e.what()).find("in one piece"), std::string::npos) << e.what();
  }
}

}  // namespace
