// A parked block's read-back that fails (issue #51): the run fails with the read's error, the
// process goes on (it ended in std::terminate: a guard's destructor asserted on the still-parked
// parking), no accounted byte is left behind, and the caller's input volumes, parked with the
// run's buffers, are back as they were. The failure is injected (SpillFile::fail_read_after: a
// local disk does not fail reads on demand) at the first, a middle and the last read of a run of
// the LPCNN twin at the budget where it parks. Oracles: the inputs' bytes copied before the run,
// memory_current() before and after, and the unbudgeted run's output for the run after.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "faults/faults_support.h"
#include "qsmcore/error.h"
#include "qsmcore/memory.h"
#include "qsmcore/models.h"
#include "qsmcore/networks.h"
#include "qsmcore/phantom.h"
#include "spill/spill.h"
#include "support/test_data.h"

namespace {

using namespace qsmcore;
using residency::SpillFile;

void fill(const Buffer& b, std::uint64_t seed) {
  auto* w = reinterpret_cast<std::uint64_t*>(b.data());
  for (std::size_t i = 0; i < b.size() / 8; ++i) w[i] = 0x9e3779b97f4a7c15ULL * (i + seed);
}

bool filled(const Buffer& b, std::uint64_t seed) {
  const auto* w = reinterpret_cast<const std::uint64_t*>(b.data());
  for (std::size_t i = 0; i < b.size() / 8; ++i)
    if (w[i] != 0x9e3779b97f4a7c15ULL * (i + seed)) return false;
  return true;
}

TEST(Parking, ABlockRemovedWhileParkedAfterAFailedReadBackIsForgottenAndTheOthersComeBack) {
  const std::int64_t before = memory_current();
  {
    const Buffer keep(std::size_t{1} << 20, MemCategory::Other);
    auto gone = std::make_unique<Buffer>(std::size_t{1} << 20, MemCategory::Other);
    fill(keep, 1);
    fill(*gone, 2);
    networks::Parking p("");
    p.add(*gone);
    p.add(keep);
    p.park();
    SpillFile::fail_read_after(1, EIO);  // the first block's read fails
    EXPECT_THROW(p.unpark(), Error);
    SpillFile::fail_read_after(0, 0);
    ASSERT_TRUE(p.parked());
    // What a guard's destructor does as the failing run unwinds (networks/context.cpp).
    EXPECT_NO_THROW(p.remove(*gone));
    gone.reset();
    EXPECT_EQ(memory_current(), before)  // `keep` still parked, `gone` freed
        << "the removed block's bytes were not counted in for its free";
    p.unpark();
    EXPECT_FALSE(p.parked());
    EXPECT_TRUE(filled(keep, 1)) << "the block after the removed one came back from the wrong place";
    EXPECT_EQ(memory_current(), before + static_cast<std::int64_t>(keep.size()));
    qsmfault::record(filled(keep, 1));
  }
  EXPECT_EQ(memory_current(), before);
}

std::vector<std::string> twin_paths(const std::string& dir, const ModelSpec& spec) {
  std::vector<std::string> p;
  for (const auto& f : spec.files) p.push_back(dir + "/" + std::string(f.name));
  return p;
}

// "… the whole run N …" of a refusal: the least a run fits in.
std::int64_t least_named(const std::string& msg) {
  const auto at = msg.find("the whole run ");
  return at == std::string::npos ? -1 : std::stoll(msg.substr(at + 14));
}

TEST(ParkedReadBack, AFailedReadFailsTheRunNotTheProcessAndTheCallersVolumesComeBack) {
  const std::string dir = qsmfault::twins_dir();
  QSM_REQUIRE_DATA(dir, "QSM_TWINS_DIR");
  const ModelSpec& spec = require_model("lpcnn");
  PhantomOptions po;
  po.dims = {32, 32, 32};
  po.b0_t = 3.0;
  const Phantom ph = make_head_phantom(po);
  NetworkInputs in;
  in.field = network_needs(spec).field_kind == "total field" ? &ph.total_field : &ph.local_field;
  in.mask = &ph.mask;
  in.b0_tesla = 3.0;
  const std::vector<double> field(in.field->values().begin(), in.field->values().end());
  const std::vector<double> mask(in.mask->values().begin(), in.mask->values().end());
  NetworkOptions o;
  o.model.threads = 1;
  o.park_inputs = true;
  const NetworkRun whole = run_network(spec, twin_paths(dir, spec), in, o);
  const std::int64_t held = memory_current();
  o.model.mem_budget = held + whole.predicted_peak_bytes / 8;
  o.auto_tile = false;
  std::int64_t least = -1;
  try {
    run_network(spec, twin_paths(dir, spec), in, o);
  } catch (const Error& e) {
    least = least_named(e.what());
  }
  ASSERT_GT(least, 0);
  o.model.mem_budget = least;
  const std::int64_t r0 = SpillFile::reads_so_far();
  const std::int64_t parked = run_network(spec, twin_paths(dir, spec), in, o).parked_bytes;  // output freed
  const std::int64_t reads = SpillFile::reads_so_far() - r0;
  ASSERT_GT(parked, 0) << "the run at its least did not park";
  ASSERT_GT(reads, 0);
  auto same = [&] {
    return std::memcmp(in.field->data(), field.data(), field.size() * sizeof(double)) == 0 &&
           std::memcmp(in.mask->data(), mask.data(), mask.size() * sizeof(double)) == 0;
  };
  for (const std::int64_t n : {std::int64_t{1}, (reads + 1) / 2, reads}) {
    SpillFile::fail_read_after(n, EIO);
    std::string message;
    try {
      run_network(spec, twin_paths(dir, spec), in, o);
    } catch (const Error& e) {
      message = e.what();
    }
    SpillFile::fail_read_after(0, 0);
    EXPECT_NE(message.find("Input/output error"), std::string::npos) << "read " << n << ": " << message;
    EXPECT_EQ(memory_current(), held) << "read " << n << ": accounted bytes left behind";
    EXPECT_TRUE(same()) << "read " << n << ": the caller's volumes were not read back";
    const std::int64_t lost = same() ? 0 : static_cast<std::int64_t>((field.size() + mask.size()) * sizeof(double));
    qsmfault::record(!message.empty() && memory_current() == held, lost);
  }
  const NetworkRun again = run_network(spec, twin_paths(dir, spec), in, o);
  ASSERT_EQ(again.outputs.size(), whole.outputs.size());
  EXPECT_EQ(std::memcmp(again.outputs[0].volume.data(), whole.outputs[0].volume.data(),
                        static_cast<std::size_t>(whole.outputs[0].volume.size()) * sizeof(double)),
            0);
}

}  // namespace
