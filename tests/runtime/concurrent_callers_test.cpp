// Concurrent callers of one OnnxModel (issue #51, the contract in qsmcore/onnx_model.h): threads
// run the model while others call plan_memory (other shapes: under a streaming policy that
// replaces the model's one plan), min_run_bytes, clear_plans and set_threads, under the default
// policy and a streaming one, with and without a cap that makes the runs spill. Every output must
// equal the single-threaded run of the same input on a model of its own (the oracle): bit for bit
// on the reference backend (whose results do not depend on the thread count), within float
// tolerance on oneDNN (set_threads changes its threads and so its summation order); NaN fails.
// Before the plan cache held executors by shared_ptr, a streamed run's executor was freed under
// it by another thread's plan_memory (use after free: garbage, a crash, or "needs a provider");
// before runtime/primitive_guard.h, emptying oneDNN's primitive cache while a streamed run built
// a unit's kernel corrupted that kernel (4 of 15 runs of onednn_stream failed).
// Also built under ThreadSanitizer (.ci/run), on the reference backend.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "onnx/onnx_writer.h"
#include "qsmcore/onnx_model.h"
#include "qsmcore/residency.h"
#include "runtime/model_budget.h"

namespace {

using namespace qsmtest::onnxw;
using qsmcore::Backend;
using qsmcore::OnnxModel;
using qsmcore::Shape;
using qsmcore::Tensor;

constexpr std::int64_t kChannels = 8;  // 8·8·27 f32 = 6.9 KB a weight: streamed by the policy
// Small; smaller under ThreadSanitizer, which slows the reference convolutions about 30-fold (the
// interleavings are what it checks, not the volume).
#if defined(__SANITIZE_THREAD__)
constexpr std::int64_t kSide = 8;
constexpr int kRunsEach = 4;
#else
constexpr std::int64_t kSide = 12;
constexpr int kRunsEach = 8;
#endif

// x -> 4 × (Conv -> Relu) -> Conv (+ the first two Relus) -> Conv: 3×3×3 convolutions of 8
// channels, skip connections whose values wait over steps that do not read them (what a cap
// spills: the middle steps are the busiest), dynamic spatial dims (so other shapes make other
// plans).
std::vector<std::uint8_t> conv_net() {
  GraphParts g;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 0.12f);
  const auto conv = [&](const std::string& in, const std::string& out, int l) {
    std::vector<float> w(static_cast<std::size_t>(kChannels * kChannels * 27));
    for (float& v : w) v = nd(rng);
    const std::string n = std::to_string(l);
    g.initializers.push_back(float_tensor("w" + n, {kChannels, kChannels, 3, 3, 3}, w));
    g.nodes.push_back(node("Conv", {in, "w" + n}, {out}, "c" + n, {attr_ints("pads", {1, 1, 1, 1, 1, 1})}));
  };
  conv("x", "a0", 0);
  g.nodes.push_back(node("Relu", {"a0"}, {"r0"}, "relu0"));
  conv("r0", "a1", 1);
  g.nodes.push_back(node("Relu", {"a1"}, {"r1"}, "relu1"));
  conv("r1", "a2", 2);
  g.nodes.push_back(node("Relu", {"a2"}, {"r2"}, "relu2"));
  conv("r2", "a3", 3);
  g.nodes.push_back(node("Relu", {"a3"}, {"r3"}, "relu3"));
  conv("r3", "a4", 4);
  g.nodes.push_back(node("Add", {"a4", "r0"}, {"s0"}, "add0"));
  g.nodes.push_back(node("Add", {"s0", "r1"}, {"s"}, "add1"));
  conv("s", "y", 5);
  g.inputs.push_back(value_info("x", 1, {1, kChannels, -1, -1, -1}));
  g.outputs.push_back(value_info("y", 1, {}));
  return model(graph(g)).bytes;
}

// The model file, written once per process (a streaming policy reads weights from it) and
// removed at exit.
struct ModelFile {
  std::string path =
      (std::filesystem::temp_directory_path() / ("qsm_concurrent_" + std::to_string(getpid()) + ".onnx")).string();
  ModelFile() { write_file(path, conv_net()); }
  ~ModelFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

const std::string& model_path() {
  static const ModelFile file;
  return file.path;
}

Tensor input(const Shape& s, unsigned seed) {
  Tensor t = Tensor::empty(qsmcore::DType::F32, s);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : t.span<float>()) v = nd(rng);
  return t;
}

struct Case {
  Backend backend;
  bool stream;  // DenseDiskStream, else the default FullyResident
  bool spill;   // a run cap below the unbudgeted run: activations spill
};

std::string case_name(const testing::TestParamInfo<Case>& i) {
  return std::string(qsmcore::to_string(i.param.backend)) + (i.param.stream ? "_stream" : "_full") +
         (i.param.spill ? "_spilled" : "");
}

qsmcore::ModelOptions options(const Case& c) {
  qsmcore::ModelOptions o;
  o.backend = c.backend;
  o.threads = 2;
  o.mem_budget = 0;
  if (c.stream) o.residency = qsmcore::DenseDiskStreamLoadOptions::create(1 << 20, 1 << 20, 2, 2).value();
  return o;
}

// Empty when `got` is `want` (bitwise, or within `tol` × want's largest magnitude); else why not.
std::string mismatch(const Tensor& got, const Tensor& want, bool bitwise, double tol) {
  if (got.shape() != want.shape()) return "shape differs";
  const auto g = got.span<const float>();
  const auto w = want.span<const float>();
  double scale = 0;
  for (float v : w) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (!std::isfinite(g[i])) return "non-finite output at " + std::to_string(i);
    if (bitwise ? std::memcmp(&g[i], &w[i], sizeof(float)) != 0 : !(std::fabs(g[i] - w[i]) <= tol * scale))
      return "output " + std::to_string(i) + ": " + std::to_string(g[i]) + " against " + std::to_string(w[i]);
  }
  return "";
}

class ConcurrentCallers : public testing::TestWithParam<Case> {};

TEST_P(ConcurrentCallers, RunsBesidePlanningClearingAndThreadChangesGiveTheSingleThreadedOutputs) {
  const Case c = GetParam();
  const Shape shape{1, kChannels, kSide, kSide, kSide};
  const Shape other{1, kChannels, kSide - 2, kSide, kSide + 2};
  const std::vector<Tensor> inputs = {input(shape, 1), input(shape, 2), input(shape, 3)};

  // The oracle: each input run alone, one after the other, on a model of its own.
  std::vector<Tensor> want;
  std::int64_t cap = 0;
  {
    auto solo = OnnxModel::load(model_path(), options(c));
    for (const Tensor& x : inputs) want.push_back(solo.run({x}).front());
    if (c.spill) {
      const std::int64_t full = solo.plan_memory({shape}).run_peak_bytes();
      const std::int64_t least = solo.min_run_bytes({shape});
      ASSERT_LT(least, full) << "the test network cannot spill";
      cap = (least + full) / 2;
      ASSERT_GT(solo.plan_memory({shape}, cap).spill_read_bytes, 0) << "the cap does not make the run spill";
    }
  }

  auto m = OnnxModel::load(model_path(), options(c));
  if (cap > 0) qsmcore::ModelBudget::limit_run_bytes(m, cap);
  constexpr int kRunners = 3;
  std::atomic<int> runners_left{kRunners};
  std::atomic<std::int64_t> runs{0}, disturbances{0};
  std::mutex failures_mu;
  std::vector<std::string> failures;
  const auto fail = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(failures_mu);
    failures.push_back(what);
  };
  const bool bitwise = c.backend == Backend::Reference;

  std::vector<std::thread> threads;
  for (int t = 0; t < kRunners; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int r = 0; r < kRunsEach; ++r) {
          const std::size_t i = static_cast<std::size_t>(t + r) % inputs.size();
          const std::vector<Tensor> out = m.run({inputs[i]});
          ++runs;
          if (out.size() != 1) {
            fail("run returned " + std::to_string(out.size()) + " outputs");
          } else if (auto why = mismatch(out[0], want[i], bitwise, 1e-5); !why.empty()) {
            fail("input " + std::to_string(i) + ": " + why);
          }
        }
      } catch (const std::exception& e) {
        fail(std::string("run threw: ") + e.what());
      }
      --runners_left;
    });
  }
  // Planning other shapes (under a streaming policy: replacing the plan the runs use), the least
  // a run needs, a budgeted plan's figures.
  threads.emplace_back([&] {
    try {
      while (runners_left > 0) {
        EXPECT_GT(m.plan_memory({other}).arena_bytes, 0);
        EXPECT_GT(m.min_run_bytes({shape}), 0);
        EXPECT_GT(m.plan_memory({shape}).arena_bytes, 0);
        ++disturbances;
      }
    } catch (const std::exception& e) {
      fail(std::string("planning threw: ") + e.what());
    }
  });
  // Dropping the plans and changing the threads (which drops them too), reading the reports.
  threads.emplace_back([&] {
    try {
      int n = 0;
      while (runners_left > 0) {
        m.clear_plans();
        m.set_threads(1 + (n++ % 2));
        (void)m.residency_report_json();
        (void)m.last_spill();
        (void)m.kernel_threads();
        ++disturbances;
        std::this_thread::yield();
      }
    } catch (const std::exception& e) {
      fail(std::string("clear_plans/set_threads threw: ") + e.what());
    }
  });
  for (auto& th : threads) th.join();

  for (const auto& f : failures) ADD_FAILURE() << f;
  EXPECT_EQ(runs.load(), kRunners * kRunsEach);
  EXPECT_GT(disturbances.load(), 0);
  // The model is still whole after all that: one more run alone gives the oracle's output.
  const std::vector<Tensor> again = m.run({inputs[0]});
  EXPECT_EQ(mismatch(again.at(0), want[0], bitwise, 1e-5), "");
  if (cap > 0) {
    EXPECT_GT(qsmcore::ModelBudget::spill_since_load(m).read, 0u) << "no run spilled";
  }
}

std::vector<Case> cases() {
  std::vector<Case> v;
  std::vector<Backend> backends = {Backend::Reference};
#if QSM_HAVE_ONEDNN
  backends.push_back(Backend::OneDnn);
#endif
  for (Backend b : backends)
    for (bool stream : {false, true})
      for (bool spill : {false, true}) v.push_back({b, stream, spill});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Policies, ConcurrentCallers, testing::ValuesIn(cases()), case_name);

}  // namespace
