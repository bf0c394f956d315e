// Parking (issue #16, spill/parking.h): buffers no graph reads wait in the spill directory
// while a graph runs. The block's pages go back to the OS and its accounted bytes with them, the
// same bytes come back at the same address, and a budgeted run that parks is the unbudgeted run
// bit for bit, with a lower least than without.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/models.h"
#include "qsmcore/networks.h"
#include "qsmcore/phantom.h"
#include "spill/spill.h"
#include "support/same_outputs.h"
#include "support/test_data.h"

using namespace qsmcore;

namespace {

// A pattern no zero-filled page matches, different in every 8-byte word.
void fill(const Buffer& b) {
  auto* w = reinterpret_cast<std::uint64_t*>(b.data());
  for (std::size_t i = 0; i < b.size() / 8; ++i) w[i] = 0x9e3779b97f4a7c15ULL * (i + 1);
}

bool filled(const Buffer& b) {
  const auto* w = reinterpret_cast<const std::uint64_t*>(b.data());
  for (std::size_t i = 0; i < b.size() / 8; ++i)
    if (w[i] != 0x9e3779b97f4a7c15ULL * (i + 1)) return false;
  return true;
}

TEST(Parking, ABlocksPagesAndAccountedBytesLeaveAndTheSameBytesComeBackInPlace) {
  // Not a whole number of pages: the last page's tail is written and read back too.
  const Buffer a(std::size_t{24} << 20, MemCategory::Other), b((std::size_t{3} << 20) + 4104, MemCategory::Other);
  const Buffer small(4096, MemCategory::Other);
  ASSERT_TRUE(a.parkable());
  ASSERT_TRUE(b.parkable());
  EXPECT_FALSE(small.parkable()) << "a block that shares its pages cannot give them back";
  fill(a);
  fill(b);
  std::byte* const where = a.data();
  networks::Parking p("");
  p.add(a);
  p.add(b);
  p.add(small);  // left out
  p.add(a);      // once
  EXPECT_EQ(p.bytes(), static_cast<std::int64_t>(a.size() + b.size()));

  const std::int64_t held = memory_current(), rss = process_rss_bytes();
  p.park();
  EXPECT_TRUE(p.parked());
  EXPECT_EQ(memory_current(), held - p.bytes());
  if (rss > 0) {
    EXPECT_LT(process_rss_bytes(), rss - (std::int64_t{20} << 20)) << "the pages stayed resident";
  }
  p.unpark();
  EXPECT_EQ(memory_current(), held);
  EXPECT_EQ(a.data(), where);
  EXPECT_TRUE(filled(a));
  EXPECT_TRUE(filled(b));
  EXPECT_EQ(p.written(), static_cast<std::int64_t>(a.page_span() + b.page_span()));

  // A scope parks and reads back, also when what runs in it throws.
  try {
    const networks::Parking::Scope s(&p);
    EXPECT_EQ(memory_current(), held - p.bytes());
    throw Error(ErrorKind::OutOfBudget, "a run failing");
  } catch (const Error&) {
  }
  EXPECT_FALSE(p.parked());
  EXPECT_EQ(memory_current(), held);
  EXPECT_TRUE(filled(a));
  EXPECT_TRUE(filled(b));
}

TEST(Parking, AReadBackPastTheMemoryCapThrowsAndGoesOnWhenCalledAgain) {
  const Buffer a(std::size_t{1} << 20, MemCategory::Other), b(std::size_t{1} << 20, MemCategory::Other);
  fill(a);
  fill(b);
  networks::Parking p("");
  p.add(a);
  p.add(b);
  const std::int64_t held = memory_current();
  p.park();
  const std::int64_t cap = memory_cap();
  set_memory_cap(held - static_cast<std::int64_t>(b.size()) + 1);  // room for the first block only
  EXPECT_THROW(p.unpark(), Error);
  EXPECT_TRUE(p.parked());
  EXPECT_EQ(memory_current(), held - static_cast<std::int64_t>(b.size()));
  set_memory_cap(cap);
  p.unpark();
  EXPECT_FALSE(p.parked());
  EXPECT_EQ(memory_current(), held);
  EXPECT_TRUE(filled(a));
  EXPECT_TRUE(filled(b));
}

TEST(Parking, ABlockForgottenWhileParkedIsCountedAgainForItsFreeAndNotReadBack) {
  const std::int64_t before = memory_current();
  std::int64_t written = 0;
  {
    const Buffer a(std::size_t{2} << 20, MemCategory::Other);
    fill(a);
    networks::Parking p("");
    p.add(a);
    p.park();
    const std::int64_t rss = process_rss_bytes();
    p.forget();
    EXPECT_FALSE(p.parked());
    EXPECT_EQ(memory_current(), before + static_cast<std::int64_t>(a.size())) << "its free would count it out twice";
    EXPECT_EQ(a.data()[12345], std::byte{0}) << "forgotten bytes are not read back: its pages come back as zeros";
    // Read back, its 2 MiB would be resident again; less than half of that is the touched page
    // and what the test itself allocates (84 KiB under ASan+UBSan: shadow and reports).
    if (rss > 0) {
      EXPECT_LT(process_rss_bytes(), rss + (std::int64_t{1} << 20)) << "forgetting read the block back";
    }
    written = p.written();
  }
  EXPECT_EQ(memory_current(), before);
  EXPECT_EQ(written, std::int64_t{2} << 20);
}

const Phantom& phantom() {
  static const Phantom* p = [] {
    PhantomOptions o;
    o.dims = {32, 32, 32};
    o.b0_t = 3.0;
    return new Phantom(make_head_phantom(o));
  }();
  return *p;
}

std::vector<std::string> twin_paths(const std::string& dir, const ModelSpec& spec) {
  std::vector<std::string> p;
  for (const auto& f : spec.files) p.push_back(dir + "/" + std::string(f.name));
  return p;
}

std::int64_t least_named(const std::string& msg) {
  const auto at = msg.find("the whole run ");
  return at == std::string::npos ? -1 : std::stoll(msg.substr(at + 14));
}

struct ParkingCase {
  std::string id;
  int graph_runs;
  std::int64_t wrapper_bytes;  // what the wrapper parks besides the inputs, a graph run (32³ phantom)
  bool inputs_once = false;    // its inputs park once, until the end, not around each graph run
  bool away_between = false;   // at its least, its blocks wait on disk between the graph runs too
};

class ParkingBudget : public testing::TestWithParam<ParkingCase> {};

// xQSM parks the caller's field and mask; the unrolled networks their own full-volume buffers
// too (NeXtQSM: padded mask, background field, iterate and D's kernel on its 64³ frame; LPCNN:
// four volumes and D's kernel; MoDL-QSM: three two-channel volumes, the cropped field and mask
// and D's kernel), across every graph run.
TEST_P(ParkingBudget, WhatNoGraphReadsWaitsOnDiskAndTheRunIsTheUnbudgetedOneBitForBit) {
  const std::string dir = qsmtest::data_dir("QSM_TWINS_DIR");
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const ParkingCase& pc = GetParam();
  const ModelSpec& spec = require_model(pc.id);
  const Phantom& ph = phantom();
  NetworkInputs in;
  in.field = network_needs(spec).field_kind == "total field" ? &ph.total_field : &ph.local_field;
  in.mask = &ph.mask;
  in.b0_tesla = 3.0;
  const std::int64_t input_bytes = static_cast<std::int64_t>(in.field->storage().size() + in.mask->storage().size());
  ASSERT_TRUE(in.field->storage().parkable());
  const std::vector<double> field(in.field->values().begin(), in.field->values().end());
  const std::vector<double> mask(in.mask->values().begin(), in.mask->values().end());

  NetworkOptions o;
  o.model.threads = 2;
  o.model.mem_budget = 0;
  o.park_inputs = true;
  const NetworkRun whole = run_network(spec, twin_paths(dir, spec), in, o);
  EXPECT_EQ(whole.parked_bytes, 0) << "a run within its budget parks nothing";

  // The least a refusal names, with nothing parked and with everything that may be.
  const std::int64_t held = memory_current();
  o.model.mem_budget = held + whole.predicted_peak_bytes / 8;
  o.auto_tile = false;
  auto least = [&](bool park) {
    o.park_inputs = o.park_buffers = park;
    try {
      run_network(spec, twin_paths(dir, spec), in, o);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::OutOfBudget) << e.what();
      // Where the buffers between the graph runs set the peak, that term says what parks.
      const std::string m = e.what();
      EXPECT_EQ(m.find("parked in the spill directory") != std::string::npos ||
                    m.find(" parked while it runs)") != std::string::npos,
                park)
          << m;
      return least_named(e.what());
    }
    ADD_FAILURE() << spec.id << ": an eighth of the peak fit";
    return std::int64_t{-1};
  };
  const std::int64_t without = least(false), with = least(true);
  EXPECT_EQ(memory_current(), held) << "a refusal leaks";
  ASSERT_GT(with, 0);
  // What parks leaves the run's term; what the wrapper holds between runs (xQSM's output volume,
  // NeXtQSM's FFT buffers) may bound the least instead, as it does NeXtQSM's on this phantom.
  EXPECT_LE(with, without);
  if (!pc.away_between) {
    EXPECT_GE(with, without - input_bytes - pc.wrapper_bytes);
  }

  o.model.mem_budget = with;
  const NetworkRun run = run_network(spec, twin_paths(dir, spec), in, o);
  EXPECT_LE(held + run.measured_peak_bytes, o.model.mem_budget) << "the accounted high-water passed the budget";
  // Every graph run writes the wrapper's buffers out (whole pages), and the inputs at least once
  // (NeXtQSM parks them once, from its first graph run to the end).
  EXPECT_GE(run.parked_bytes, pc.graph_runs * pc.wrapper_bytes + input_bytes);
  if (!pc.inputs_once) {
    EXPECT_GE(run.parked_bytes, pc.graph_runs * (input_bytes + pc.wrapper_bytes));
  }
  // NeXtQSM's step between its runs (FFTs beside the iterate) set its least: there each block is
  // back only while the step reads it, so every step writes at least all of them out again.
  if (pc.away_between) {
    EXPECT_GE(run.parked_between_bytes, (pc.graph_runs - 1) * pc.wrapper_bytes);
  } else {
    EXPECT_EQ(run.parked_between_bytes, 0);
  }
  qsmtest::expect_same_outputs(run, whole, std::string(spec.id));
  // The caller's volumes are back as they were.
  EXPECT_EQ(std::memcmp(in.field->data(), field.data(), field.size() * sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(in.mask->data(), mask.data(), mask.size() * sizeof(double)), 0);
  // Without parking, that budget does not fit, or (where the buffers between the runs bound the
  // least) fits by spilling more activations than parking left to spill.
  o.park_inputs = o.park_buffers = false;
  o.model.mem_budget = with + memory_current() - held;  // beside the parked run's output
  if (with < without) {
    EXPECT_THROW(run_network(spec, twin_paths(dir, spec), in, o), Error);
  } else {
    const NetworkRun unparked = run_network(spec, twin_paths(dir, spec), in, o);
    EXPECT_EQ(unparked.parked_bytes, 0);
    EXPECT_LT(run.spill_written_bytes, unparked.spill_written_bytes);
  }
}

constexpr std::int64_t kV = 32 * 32 * 32, kFrame = 64 * 64 * 64;

INSTANTIATE_TEST_SUITE_P(Networks, ParkingBudget,
                         testing::Values(ParkingCase{"xqsm", 1, 0},
                                         ParkingCase{"nextqsm", 7, kFrame * 13 + 33 * 64 * 64 * 8, true, true},
                                         ParkingCase{"lpcnn", 3, kV * 32 + 17 * 32 * 32 * 8},
                                         ParkingCase{"modl-qsm", 3, kV * 64 + 17 * 32 * 32 * 8}),
                         [](const testing::TestParamInfo<ParkingCase>& i) {
                           std::string n = i.param.id;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
