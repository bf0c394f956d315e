// Weight residency on the engine (residency.md §10): every reduced architecture twin gives
// bitwise-identical outputs under FullyResident, LayerwiseHost and DenseDiskStream (direct and
// cached, LRU and LFU, tight budgets), over repeated forwards and layer-major batches; tiers stay
// within their budgets; admission refuses a device budget below static + the largest window.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../support/scoped_conv_algo.h"
#include "../support/test_data.h"
#include "../support/twin_cases.h"
#include "onnx/onnx_writer.h"
#include "qsmcore/error.h"
#include "qsmcore/onnx_model.h"
#include "qsmcore/residency.h"

namespace {

using nlohmann::json;
using qsmcore::LayerWeightResidency;

using Case = qsmtest::TwinCase;

bool bitwise_equal(const std::vector<qsmcore::Tensor>& a, const std::vector<qsmcore::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].shape() != b[i].shape() || a[i].nbytes() != b[i].nbytes()) return false;
    if (std::memcmp(a[i].raw(), b[i].raw(), a[i].nbytes()) != 0) return false;
  }
  return true;
}

qsmcore::ModelOptions options(const LayerWeightResidency& r, qsmcore::Backend b = qsmcore::Backend::OneDnn) {
  qsmcore::ModelOptions o;
  o.backend = b;
  o.threads = 2;
  o.residency = r;
  return o;
}

LayerWeightResidency layerwise(std::size_t depth) {
  qsmcore::LayerwiseLoadOptions o;
  o.offload = qsmcore::OffloadConfig::create(std::nullopt, std::nullopt, depth).value();
  return o;
}

LayerWeightResidency stream(std::uint64_t device, std::uint64_t host, std::size_t lookahead, std::size_t queue,
                            qsmcore::CacheEvictionPolicy evict = qsmcore::CacheEvictionPolicy::LeastRecentlyUsed) {
  auto d = qsmcore::DenseDiskStreamLoadOptions::create(device, host, lookahead, queue).value();
  d.eviction_policy = evict;
  return d;
}

// Largest sum of `width` consecutive values of a unit list field.
std::uint64_t max_window(const json& units, const char* field, std::size_t width) {
  std::uint64_t best = 0;
  for (std::size_t i = 0; i < units.size(); ++i) {
    std::uint64_t s = 0;
    for (std::size_t j = i; j < units.size() && j < i + width; ++j) s += units[j].at(field).get<std::uint64_t>();
    best = std::max(best, s);
  }
  return best;
}

class Residency : public testing::TestWithParam<Case> {};

TEST_P(Residency, EveryPolicyIsBitwiseIdenticalAndWithinBudget) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const Case& c = GetParam();
  const std::string path = dir + "/" + c.file;
  const auto in = qsmtest::twin_inputs(c, 5);
  const auto in2 = qsmtest::twin_inputs(c, 50);
  std::vector<qsmcore::Tensor> ref, ref2;
  {
    auto m = qsmcore::OnnxModel::load(path, options(qsmcore::FullyResident{}));
    ref = m.run(in);
    ref2 = m.run(in2);
  }

  // A first streamed run tells the unit sizes, from which tight budgets are derived.
  json units;
  {
    auto m = qsmcore::OnnxModel::load(path, options(stream(4ull << 30, 0, 0, 0)));
    ASSERT_TRUE(bitwise_equal(m.run(in), ref)) << "direct stream";
    const auto rep = json::parse(m.residency_report_json());
    units = rep.at("unit_list");
    if (units.empty()) GTEST_SKIP() << c.file << " has no weight large enough to leave on disk";
    // Direct mode: no host copy ever, and every unit read from disk once per forward.
    std::uint64_t total = 0;
    for (const auto& u : units) total += u.at("host_bytes").get<std::uint64_t>();
    ASSERT_TRUE(bitwise_equal(m.run(in2), ref2));
    const auto rep2 = json::parse(m.residency_report_json());
    EXPECT_EQ(rep2.at("offload").at("peak_resident_bytes").at("host").get<std::uint64_t>(), 0u)
        << "a host copy in direct mode";
    EXPECT_EQ(rep2.at("dense").at("disk_to_device_bytes").get<std::uint64_t>(), 2 * total);
    EXPECT_LE(rep2.at("peak_device_units").get<std::uint64_t>(), 2u);
    std::uint64_t largest = 0;
    for (const auto& u : units) largest = std::max(largest, u.at("host_bytes").get<std::uint64_t>());
    EXPECT_LE(rep2.at("peak_staging_bytes").get<std::uint64_t>(), largest);
  }
  const std::size_t n = units.size();
  const std::uint64_t static_bytes = [&] {
    auto m = qsmcore::OnnxModel::load(path, options(stream(4ull << 30, 0, 0, 0)));
    (void)m.plan_memory([&] {
      std::vector<qsmcore::Shape> s;
      for (const auto& [name, shape] : c.inputs) s.push_back(shape);
      return s;
    }());
    return json::parse(m.residency_report_json()).at("static_device_bytes").get<std::uint64_t>();
  }();
  const std::uint64_t pair = max_window(units, "device_bytes", std::min<std::size_t>(n, 2));
  const std::uint64_t host3 = max_window(units, "host_bytes", std::min<std::size_t>(n, 3));

  struct Policy {
    std::string name;
    LayerWeightResidency r;
    std::size_t max_device_units;
  };
  std::vector<Policy> policies = {
      {"layerwise depth 1", layerwise(1), 1},
      {"layerwise depth 2", layerwise(std::min<std::size_t>(n, 2)), std::min<std::size_t>(n, 2)},
      {"layerwise depth n", layerwise(n), n},
      {"stream device=exact pair, host unbounded",
       stream(static_bytes + pair, 16ull << 30, std::min<std::size_t>(n, 2), 2), 2},
      {"stream tight host LRU lookahead 3", stream(4ull << 30, host3, std::min<std::size_t>(n, 3), 1), 2},
      {"stream tight host LFU lookahead 3",
       stream(4ull << 30, host3, std::min<std::size_t>(n, 3), 2, qsmcore::CacheEvictionPolicy::LeastFrequentlyUsed), 2},
      {"stream lookahead 1 queue 1", stream(4ull << 30, host3, 1, 1), 2},
  };
  for (const auto& p : policies) {
    SCOPED_TRACE(p.name);
    auto m = qsmcore::OnnxModel::load(path, options(p.r));
    EXPECT_TRUE(bitwise_equal(m.run(in), ref));
    EXPECT_TRUE(bitwise_equal(m.run(in2), ref2)) << "second forward";
    EXPECT_TRUE(bitwise_equal(m.run(in), ref)) << "third forward (warm caches)";
    const auto rep = json::parse(m.residency_report_json());
    EXPECT_LE(rep.at("peak_device_units").get<std::uint64_t>(), p.max_device_units);
    const auto& off = rep.at("offload");
    const auto dev_budget = qsmcore::offload(p.r).value().device_budget_bytes;
    const auto host_budget = qsmcore::offload(p.r).value().host_budget_bytes;
    if (dev_budget) {
      EXPECT_LE(off.at("peak_resident_bytes").at("device").get<std::uint64_t>(), *dev_budget);
    }
    if (host_budget) {
      EXPECT_LE(off.at("peak_resident_bytes").at("host").get<std::uint64_t>(), *host_budget);
    }
    EXPECT_EQ(rep.at("forwards").get<std::uint64_t>(), 3u);
  }

  // Layer-major batch: the same outputs as one set at a time, each unit acquired once per batch.
  {
    auto m = qsmcore::OnnxModel::load(path, options(stream(4ull << 30, 0, 0, 0)));
    const auto outs = m.run_batch({in, in2});
    ASSERT_EQ(outs.size(), 2u);
    EXPECT_TRUE(bitwise_equal(outs[0], ref));
    EXPECT_TRUE(bitwise_equal(outs[1], ref2));
    std::uint64_t total = 0;
    for (const auto& u : units) total += u.at("host_bytes").get<std::uint64_t>();
    EXPECT_EQ(json::parse(m.residency_report_json()).at("dense").at("disk_to_device_bytes").get<std::uint64_t>(), total)
        << "a batch of two reads every unit once";
  }

  // Admission: one byte below static + the largest adjacent pair is refused before the run.
  {
    auto m = qsmcore::OnnxModel::load(path, options(stream(static_bytes + pair - 1, 0, 0, 0)));
    try {
      (void)m.run(in);
      ADD_FAILURE() << "a device budget below static + the largest pair was admitted";
    } catch (const qsmcore::Error& e) {
      EXPECT_EQ(e.kind(), qsmcore::ErrorKind::OutOfBudget);
      EXPECT_NE(std::string(e.what()).find("DeviceBudgetTooSmall"), std::string::npos) << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Twins, Residency, testing::ValuesIn(qsmtest::twin_cases()), qsmtest::twin_case_name);

TEST(ResidencyReference, ReferenceBackendStreamsPlainWeightsBitwise) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  Case c{"qsmnet.onnx", {{"field", {1, 1, 16, 16, 16}}}};
  const auto in = qsmtest::twin_inputs(c, 9);
  auto full =
      qsmcore::OnnxModel::load(dir + "/" + c.file, options(qsmcore::FullyResident{}, qsmcore::Backend::Reference));
  auto ref = full.run(in);
  for (const auto& r : {layerwise(1), stream(4ull << 30, 0, 0, 0), stream(4ull << 30, 1ull << 30, 2, 2)}) {
    auto m = qsmcore::OnnxModel::load(dir + "/" + c.file, options(r, qsmcore::Backend::Reference));
    EXPECT_TRUE(bitwise_equal(m.run(in), ref)) << qsmcore::to_string(r);
  }
}

TEST(ResidencyLoad, StreamingNeedsAFileAndHostAdmissionComesFirst) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  std::ifstream f(dir + "/qsmnet.onnx", std::ios::binary);
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_THROW((void)qsmcore::OnnxModel::load(bytes, options(stream(4ull << 30, 0, 0, 0))), qsmcore::Error);
  // LayerwiseHost keeps every raw weight on the host: a 1 KiB host budget is refused at load,
  // before the weights are read.
  qsmcore::LayerwiseLoadOptions o;
  o.offload = qsmcore::OffloadConfig::create(std::nullopt, 1024, 1).value();
  const auto before = qsmcore::memory_counters().current[0];
  try {
    (void)qsmcore::OnnxModel::load(dir + "/qsmnet.onnx", options(o));
    ADD_FAILURE() << "admitted";
  } catch (const qsmcore::Error& e) {
    EXPECT_EQ(e.kind(), qsmcore::ErrorKind::OutOfBudget);
    EXPECT_NE(std::string(e.what()).find("HostBudgetTooSmall"), std::string::npos) << e.what();
  }
  EXPECT_EQ(qsmcore::memory_counters().current[0], before) << "weights stayed allocated after a refusal";
}

}  // namespace

namespace {

// Heavy convolutions split into input-channel chunks bound every unit; outputs stay bitwise
// identical across policies (same chunked arithmetic) and within rounding of the unsplit graph.
class SplitUnits : public testing::TestWithParam<std::string> {};

TEST_P(SplitUnits, BoundedUnitsAreBitwiseAcrossPoliciesAndCloseToUnsplit) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  std::ifstream f(dir + "/manifest.json");
  const auto manifest = json::parse(f);
  Case c;
  for (const auto& [id, twin] : manifest.at("twins").items())
    for (const auto& file : twin.at("files"))
      if (file.at("file") == GetParam()) {
        c.file = GetParam();
        const auto& shapes = file.at("test_inputs").at(0);
        for (const auto& in : file.at("inputs"))
          c.inputs.emplace_back(in.at("name"), shapes.at(in.at("name").get<std::string>()).get<qsmcore::Shape>());
      }
  ASSERT_FALSE(c.file.empty());
  const std::string path = dir + "/" + c.file;
  const auto in = qsmtest::twin_inputs(c, 21);
  constexpr std::uint64_t kBound = 32 << 10;
  auto opts = [&](const LayerWeightResidency& r) {
    auto o = options(r);
    o.max_unit_weight_bytes = kBound;
    return o;
  };
  // Chunks reorder the float sums; at these tiny shapes instance norms amplify that (seen
  // 4e-5 on HD-BET in direct convs, 8e-5 in Winograd ones), so the bound here is 1e-4 × range.
  // Each algorithm against itself: a conv and its chunks may take different ones (the chunks
  // have fewer channels), whose rounding HD-BET's norms amplify to 2.5e-4 here with no chunking.
  for (const char* algo : {"direct", "winograd"}) {
    const qsmtest::ScopedConvAlgo scoped(algo);
    const auto unsplit = qsmcore::OnnxModel::load(path, options(qsmcore::FullyResident{})).run(in);
    const auto chunked = qsmcore::OnnxModel::load(path, opts(qsmcore::FullyResident{})).run(in);
    for (std::size_t i = 0; i < chunked.size(); ++i)
      EXPECT_LE(qsmtest::relative_max_error(chunked[i], unsplit[i]), 1e-4) << algo;
  }
  auto full = qsmcore::OnnxModel::load(path, opts(qsmcore::FullyResident{})).run(in);
  auto m = qsmcore::OnnxModel::load(path, opts(stream(1ull << 30, 0, 0, 0)));
  EXPECT_TRUE(bitwise_equal(m.run(in), full));
  const auto units = json::parse(m.residency_report_json()).at("unit_list");
  std::uint64_t largest = 0;
  for (const auto& u : units)  // ConvTranspose is not chunked (the largest is 4 MB in QSMnet)
    if (u.at("id").get<std::string>().find("ConvTranspose") == std::string::npos)
      largest = std::max(largest, u.at("host_bytes").get<std::uint64_t>());
  // A chunk is rounded up to whole blocks of 16 channels: at most 16 input channels over.
  EXPECT_LE(largest, 2 * kBound) << "a unit reads more than its chunk";
  EXPECT_GT(units.size(), 1u);
  for (const auto& r :
       {layerwise(1), stream(1ull << 30, 4 * kBound, 1, 2, qsmcore::CacheEvictionPolicy::LeastFrequentlyUsed)}) {
    auto mr = qsmcore::OnnxModel::load(path, opts(r));
    EXPECT_TRUE(bitwise_equal(mr.run(in), full)) << qsmcore::to_string(r);
  }
}

INSTANTIATE_TEST_SUITE_P(Twins, SplitUnits, testing::Values("qsmnet.onnx", "hd-bet.onnx", "susep-net.onnx"),
                         [](const testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param.substr(0, i.param.find('.'));
                           for (char& ch : s)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

}  // namespace

namespace {

// Memory samples after a forward are taken only when the policy asks (residency.md §8): the
// process sample carries VmRSS and page faults from /proc, the backend sample the weight
// allocator's counters.
TEST(ResidencySampling, SamplesAfterAForwardOnlyWhenAsked) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const Case c{"qsmnet.onnx", {{"field", {1, 1, 16, 16, 16}}}};
  const auto in = qsmtest::twin_inputs(c, 3);
  auto quiet = qsmcore::OnnxModel::load(dir + "/" + c.file, options(stream(1ull << 30, 1ull << 30, 2, 2)));
  (void)quiet.run(in);
  const auto q = json::parse(quiet.residency_report_json()).at("offload");
  EXPECT_FALSE(q.at("process_sampled").get<bool>());
  EXPECT_TRUE(q.at("process").is_null());
  EXPECT_TRUE(q.at("allocator").is_null());

  auto d = qsmcore::DenseDiskStreamLoadOptions::create(1ull << 30, 1ull << 30, 2, 2)
               .value()
               .with_memory_sampling(true, true);
  auto sampled = qsmcore::OnnxModel::load(dir + "/" + c.file, options(d));
  (void)sampled.run(in);
  const auto s = json::parse(sampled.residency_report_json()).at("offload");
  EXPECT_TRUE(s.at("process_sampled").get<bool>());
  ASSERT_FALSE(s.at("process").is_null()) << "Linux has /proc/self/status";
  EXPECT_GT(s.at("process").at("rss_bytes").get<std::uint64_t>(), 1u << 20);
  ASSERT_FALSE(s.at("allocator").is_null());
  EXPECT_GE(s.at("allocator").at("peak").get<std::uint64_t>(), s.at("allocator").at("active").get<std::uint64_t>());
  EXPECT_GT(s.at("allocator").at("peak").get<std::uint64_t>(), 0u);
  // Per-unit state: dense units are planned cold on disk; after a forward no device copy is
  // left (the window is released) and nothing stays pinned.
  const auto report = json::parse(sampled.residency_report_json());  // outlives the loop below
  for (const auto& u : report.at("unit_list")) {
    EXPECT_EQ(u.at("planned_tier"), "disk");
    EXPECT_EQ(u.at("policy"), "cacheable");
    EXPECT_FALSE(u.at("device_resident").get<bool>()) << u.at("id");
    EXPECT_EQ(u.at("device_pins").get<std::uint64_t>(), 0u);
    EXPECT_EQ(u.at("host_pins").get<std::uint64_t>(), 0u);
  }
}

}  // namespace

namespace {

// A streamed run's predicted peak counts the weights it brings in (window, host cache, staging):
// measured ≤ predicted, so a budget refusal before the run is sound under every policy.
TEST(ResidencyPrediction, PredictedPeakCoversTheStreamedWeights) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  for (const Case& c : qsmtest::twin_cases()) {
    if (c.file != "qsmnet.onnx" && c.file != "hd-bet.onnx" && c.file != "susep-net.onnx") continue;
    for (const auto& r : {stream(1ull << 30, 0, 0, 0), stream(1ull << 30, 1ull << 30, 2, 2), layerwise(2)}) {
      SCOPED_TRACE(c.file + " " + qsmcore::to_string(r));
      auto m = qsmcore::OnnxModel::load(dir + "/" + c.file, options(r));
      const auto in = qsmtest::twin_inputs(c, 8);
      std::vector<qsmcore::Shape> shapes;
      for (const auto& t : in) shapes.push_back(t.shape());
      const qsmcore::PlanMemory pm = m.plan_memory(shapes);
      EXPECT_GT(pm.weight_window_bytes, 0);
      const std::int64_t predicted = qsmcore::memory_current() + pm.run_peak_bytes();
      qsmcore::reset_memory_peak();
      (void)m.run(in);
      EXPECT_LE(qsmcore::memory_peak(), predicted);
    }
  }
}

}  // namespace

namespace {

// Under LayerwiseHost a split concat's per-input convs read channel slices of one weight, cut as
// copies while their unit is built, beside the derived (BN-folded) copy and the packed one: the
// prediction must count the slice. A graph where those slices are the largest units: two 1->256
// convs, concatenated, into a 512->256 conv with a BatchNormalization (its 14 MiB weight folded
// and run as two 7 MiB parts); before the fix it ran one slice (7 MiB) above its prediction.
qsmtest::onnxw::GraphParts split_concat_graph() {
  using namespace qsmtest::onnxw;
  GraphParts p;
  p.inputs.push_back(value_info("x", 1, {1, 1, 8, 8, 8}));
  p.outputs.push_back(value_info("y", 1, {}));
  const auto conv = [&](const std::string& in, const std::string& out, std::int64_t c, std::int64_t m) {
    const std::int64_t n = m * c * 27;
    std::vector<float> w(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      w[static_cast<std::size_t>(i)] = static_cast<float>((i * 7919) % 201 - 100) * 1e-4f;
    p.initializers.push_back(float_tensor(out + "_w", {m, c, 3, 3, 3}, w));
    p.nodes.push_back(node("Conv", {in, out + "_w"}, {out}, out + "_conv", {attr_ints("pads", {1, 1, 1, 1, 1, 1})}));
  };
  conv("x", "a", 1, 256);
  conv("x", "b", 1, 256);
  p.nodes.push_back(node("Concat", {"a", "b"}, {"ab"}, "cat", {attr_int("axis", 1)}));
  conv("ab", "c", 512, 256);
  for (const char* t : {"scale", "bias", "mean", "var"})
    p.initializers.push_back(float_tensor(std::string("bn_") + t, {256}, std::vector<float>(256, 0.5f)));
  p.nodes.push_back(node("BatchNormalization", {"c", "bn_scale", "bn_bias", "bn_mean", "bn_var"}, {"y"}, "bn"));
  return p;
}

TEST(ResidencyPrediction, LayerwiseCountsTheChannelSliceOfASplitConcat) {
  const std::string path = testing::TempDir() + "/split_concat_layerwise.onnx";
  qsmtest::onnxw::write_file(path, qsmtest::onnxw::model(qsmtest::onnxw::graph(split_concat_graph())).bytes);
  const qsmcore::Shape shape{1, 1, 8, 8, 8};
  const std::vector<qsmcore::Tensor> in{qsmcore::Tensor::from_vector(shape, std::vector<float>(512, 0.5f))};
  for (std::size_t depth : {1, 2}) {
    SCOPED_TRACE("layerwise depth " + std::to_string(depth));
    auto m = qsmcore::OnnxModel::load(path, options(layerwise(depth)));
    const qsmcore::PlanMemory pm = m.plan_memory({shape});
    const std::int64_t predicted = qsmcore::memory_current() + pm.run_peak_bytes();
    qsmcore::reset_memory_peak();
    (void)m.run(in);
    const std::int64_t measured = qsmcore::memory_peak();
    std::printf("  depth %zu: measured %lld B, predicted %lld B\n", depth, static_cast<long long>(measured),
                static_cast<long long>(predicted));
    EXPECT_LE(measured, predicted);
    EXPECT_LE(static_cast<double>(predicted), 1.05 * static_cast<double>(measured));  // and not far above
  }
  std::remove(path.c_str());
}

}  // namespace
