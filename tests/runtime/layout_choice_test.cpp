// The layout choice (runtime/layout_choice.h) on hand-made plans and layouts, with expected
// figures worked out by hand from the accounting rule (a run takes (arena + outputs) per input
// set plus the weight window once), and on the smallest real plan that can spill: room above the
// in-memory need takes the plan's own layout, room between the least and that need a spilled
// layout whose accounted bytes fit the room, room below the least nothing (and the refusal names
// the least).
#include "runtime/layout_choice.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "onnx/onnx_writer.h"
#include "qsmcore/onnx_model.h"
#include "runtime/model_internals.h"
#include "runtime/plan.h"

namespace lc = qsmcore::layout_choice;
using qsmcore::ArenaLayout;
using qsmcore::Plan;
using qsmcore::PlanMemory;

namespace {

// A plan whose spilled layouts follow a simple rule: any arena limit down to `least_arena`
// fits, spilling what does not stay (the file holds the difference). Records the limits asked.
struct FakePlan {
  PlanMemory pm;
  std::size_t least_arena = 0;
  mutable std::vector<std::size_t> asked;
  const PlanMemory& memory() const { return pm; }
  std::size_t min_arena_bytes() const { return least_arena; }
  std::shared_ptr<const ArenaLayout> layout_within(std::size_t limit, Plan::Streams s = Plan::Streams::Lean) const {
    auto l = std::make_shared<ArenaLayout>();
    const auto own = static_cast<std::size_t>(pm.arena_bytes);
    if (limit == 0 || limit >= own) {
      l->arena_bytes = own;
      return l;
    }
    asked.push_back(limit);
    l->arena_bytes = std::max(limit, least_arena);
    l->fits = limit >= least_arena;
    l->file_bytes = own - l->arena_bytes;
    l->write_bytes = l->read_bytes = l->file_bytes;
    l->direct_streams = s == Plan::Streams::Direct;
    return l;
  }
};

FakePlan fake() {
  FakePlan p;
  p.pm.arena_bytes = 1000;
  p.pm.io_bytes = 100;
  p.pm.weight_window_bytes = 50;
  p.least_arena = 400;
  return p;
}

// The bytes a run of `sets` takes on layout `l` of plan `p`.
std::int64_t accounted(const PlanMemory& pm, const ArenaLayout& l, std::int64_t sets) {
  return (static_cast<std::int64_t>(l.arena_bytes) + pm.io_bytes) * sets + pm.weight_window_bytes;
}

}  // namespace

TEST(LayoutChoice, RunRoomIsTheBudgetsRoomOrTheCapWhicheverIsLess) {
  EXPECT_EQ(lc::run_room(0, 300, 0), std::numeric_limits<std::int64_t>::max());  // no budget, no cap
  EXPECT_EQ(lc::run_room(1000, 300, 0), 700);
  EXPECT_EQ(lc::run_room(1000, 300, 500), 500);
  EXPECT_EQ(lc::run_room(1000, 300, 900), 700);
  EXPECT_EQ(lc::run_room(0, 300, 500), 500);
  EXPECT_EQ(lc::run_room(1000, 1200, 500), -200);  // held beyond the budget: no room, whatever the cap
}

TEST(LayoutChoice, RoomAboveTheInMemoryNeedTakesThePlansOwnLayout) {
  const FakePlan p = fake();
  // Two sets: (1000 + 100) * 2 + 50 = 2250.
  EXPECT_EQ(lc::unspilled_run(p.pm, 2), 2250);
  for (const std::int64_t room : {std::int64_t{2250}, std::int64_t{5000}}) {
    const auto l = lc::layout_for(p, room, 2, Plan::Streams::Direct, true);
    ASSERT_NE(l, nullptr);
    EXPECT_FALSE(l->spills());
    EXPECT_EQ(l->arena_bytes, 1000u);
  }
  EXPECT_TRUE(p.asked.empty()) << "no spilled layout is planned where the plan's own fits";
}

TEST(LayoutChoice, RoomBetweenTheLeastAndTheNeedTakesASpilledLayoutThatFits) {
  const FakePlan p = fake();
  // The least with two sets: (400 + 100) * 2 + 50 = 1050.
  EXPECT_EQ(lc::least_run(p, 2, true), 1050);
  for (const std::int64_t room : {std::int64_t{2249}, std::int64_t{1700}, std::int64_t{1051}, std::int64_t{1050}}) {
    for (const auto streams : {Plan::Streams::Lean, Plan::Streams::Direct}) {
      const auto l = lc::layout_for(p, room, 2, streams, true);
      ASSERT_NE(l, nullptr) << room;
      EXPECT_TRUE(l->spills()) << room;
      EXPECT_LE(accounted(p.pm, *l, 2), room);
      EXPECT_EQ(l->direct_streams, streams == Plan::Streams::Direct);
    }
  }
  // The arena asked for is what the room leaves per set: (2249 - 50) / 2 - 100 = 999.
  EXPECT_EQ(p.asked.front(), 999u);
}

TEST(LayoutChoice, RoomBelowTheLeastTakesNothing) {
  const FakePlan p = fake();
  EXPECT_EQ(lc::layout_for(p, 1049, 2, Plan::Streams::Lean, true), nullptr);  // arena 399 < 400
  EXPECT_EQ(lc::layout_for(p, 0, 2, Plan::Streams::Lean, true), nullptr);
  EXPECT_EQ(lc::layout_for(p, -5, 2, Plan::Streams::Lean, true), nullptr);
  p.asked.clear();
  // Room for the window and outputs but no arena: nothing is planned.
  EXPECT_EQ(lc::layout_for(p, 250, 2, Plan::Streams::Lean, true), nullptr);  // (250 - 50) / 2 - 100 = 0
  EXPECT_TRUE(p.asked.empty());
}

TEST(LayoutChoice, WithoutSpillingTheLeastIsTheInMemoryNeed) {
  const FakePlan p = fake();
  EXPECT_EQ(lc::least_run(p, 3, false), (1000 + 100) * 3 + 50);
  EXPECT_EQ(lc::layout_for(p, 2249, 2, Plan::Streams::Lean, false), nullptr);
  EXPECT_NE(lc::layout_for(p, 2250, 2, Plan::Streams::Lean, false), nullptr);
}

namespace {

ArenaLayout spilled(std::uint64_t moved_each_way, bool direct, std::uint64_t streamed = 0) {
  ArenaLayout l;
  l.file_bytes = moved_each_way;
  l.write_bytes = l.read_bytes = moved_each_way;
  l.direct_streams = direct;
  l.streamed_bytes = streamed;
  return l;
}

}  // namespace

TEST(LayoutChoice, ShareSearchTakesTheCheapestUpToTheShareWhereDirectFits) {
  using Next = lc::ShareSearch::Next;
  lc::ShareSearch s(1);
  // Share 6: only the page cache fits, moving 100 bytes; finer shares differ.
  const ArenaLayout lean6 = spilled(50, false);
  EXPECT_EQ(s.weigh(6, nullptr, &lean6, 10, 500, 900, true), Next::Finer);
  // Share 12: direct fits, moving 200 of which 200 streamed: 200 - 0.4 * 200 = 120 > 100. The
  // cheapest stays share 6's; direct fitting here ends the search.
  const ArenaLayout direct12 = spilled(100, true, 200), lean12 = spilled(80, false);
  EXPECT_DOUBLE_EQ(direct12.transfer_cost(), 120.0);
  EXPECT_EQ(s.weigh(12, &direct12, &lean12, 20, 300, 900, true), Next::Stop);
  ASSERT_TRUE(s.best());
  EXPECT_EQ(s.best()->share, 6);
  EXPECT_EQ(s.best()->streams, Plan::Streams::Lean);
  EXPECT_DOUBLE_EQ(s.best()->cost, 100.0);
}

TEST(LayoutChoice, ShareSearchTakesAShareWhoseDirectLayoutIsCheapest) {
  lc::ShareSearch s(1);
  const ArenaLayout lean6 = spilled(100, false);  // cost 200
  EXPECT_EQ(s.weigh(6, nullptr, &lean6, 10, 500, 900, true), lc::ShareSearch::Next::Finer);
  const ArenaLayout direct12 = spilled(100, true, 200), lean12 = spilled(90, false);  // 120 against 180
  EXPECT_EQ(s.weigh(12, &direct12, &lean12, 10, 300, 900, true), lc::ShareSearch::Next::TakeBest);
  EXPECT_EQ(s.best()->share, 12);
  EXPECT_EQ(s.best()->streams, Plan::Streams::Direct);
  // A direct layout that spills nothing is taken at once, before any search.
  const ArenaLayout own;
  EXPECT_TRUE(lc::ShareSearch::spills_nothing(&own));
  EXPECT_FALSE(lc::ShareSearch::spills_nothing(&direct12));
  EXPECT_FALSE(lc::ShareSearch::spills_nothing(nullptr));
}

TEST(LayoutChoice, ShareSearchWithNothingFittingGivesTheRefusalsFigures) {
  using Next = lc::ShareSearch::Next;
  lc::ShareSearch s(2);
  // The first share: held 100, least 800, unbudgeted run 2000. A finer one known without its
  // plan: least (250 + 50) * 2 + 20 = 620 at held 120. The last, without chains: least 700.
  EXPECT_EQ(s.weigh(6, nullptr, nullptr, 100, 800, 2000, true), Next::Finer);
  lc::ShareFigures f;
  f.arena = 250;
  f.unspilled = 900;
  f.io = 50;
  f.window = 20;
  f.chains = true;
  EXPECT_EQ(f.least(2), 620);
  EXPECT_EQ(f.run(2), 1920);
  EXPECT_EQ(s.known_too_large(f, 120), Next::Finer);
  EXPECT_EQ(s.weigh(24, nullptr, nullptr, 130, 700, 1900, false), Next::Stop);
  EXPECT_FALSE(s.best());
  EXPECT_EQ(s.held(), 100);  // the first share's
  EXPECT_EQ(s.run(), 2000);
  EXPECT_EQ(s.least(), 120 + 620 - 100);  // the least needed, above the first share's held
  f.chains = false;
  lc::ShareSearch t(2);
  EXPECT_EQ(t.known_too_large(f, 120), Next::Stop);  // nothing finer differs
  EXPECT_EQ(t.held(), 120);
  EXPECT_EQ(t.run(), 1920);
  EXPECT_EQ(t.least(), 620);
}

TEST(LayoutChoice, RefusalNamesTheNeedTheBudgetAndTheLeast) {
  lc::RefusalFigures f;
  f.path = "m.onnx";
  f.shape = {1, 1, 10, 10, 10};
  f.budget = 1000;
  f.budget_source = "--mem-budget";
  f.held = 200;
  f.run = 1600;
  f.least = 1000;
  std::string s = lc::refusal(f);
  EXPECT_NE(s.find("m.onnx: a run at input shape"), std::string::npos) << s;
  EXPECT_NE(s.find("needs 1800 bytes (model and plans 200 + run 1600)"), std::string::npos) << s;
  EXPECT_NE(s.find("above the budget of 1000 bytes from --mem-budget"), std::string::npos) << s;
  EXPECT_NE(s.find("spilled to disk it would need 1200"), std::string::npos) << s;
  // Room 800 of a least of 1000: 80 % of the 1000 input elements.
  EXPECT_NE(s.find("at most about 800 input elements (80 % of these)"), std::string::npos) << s;
  // A budget on the whole process: what it holds outside the engine counts as held.
  f.outside = 50;
  s = lc::refusal(f);
  EXPECT_NE(s.find("needs 1850 bytes (the process outside the engine 50 + model and plans 200"), std::string::npos)
      << s;
  EXPECT_NE(s.find("budget of 1050 bytes"), std::string::npos) << s;
  EXPECT_NE(s.find("would need 1250"), std::string::npos) << s;
  // No spilled figure where spilling lowers nothing; no room at all where the model fills the budget.
  f.least = f.run;
  f.held = 1000;
  s = lc::refusal(f);
  EXPECT_EQ(s.find("spilled"), std::string::npos) << s;
  EXPECT_NE(s.find("nothing would fit"), std::string::npos) << s;
}

namespace {

using namespace qsmtest::onnxw;

// a = Relu(x) lives across b = Sigmoid(a), c = Concat(b, b), e = ReduceMean(c) to y = a + e: at
// the Concat it is idle beside b and c, so spilling it lowers the arena.
Proto skip_over_concat() {
  GraphParts p;
  p.nodes.push_back(node("Relu", {"x"}, {"a"}, "relu"));
  p.nodes.push_back(node("Sigmoid", {"a"}, {"b"}, "sig"));
  p.nodes.push_back(node("Concat", {"b", "b"}, {"c"}, "cat", {attr_int("axis", 1)}));
  p.nodes.push_back(node("ReduceMean", {"c"}, {"e"}, "mean", {attr_ints("axes", {1}), attr_int("keepdims", 1)}));
  p.nodes.push_back(node("Add", {"a", "e"}, {"y"}, "add"));
  p.inputs.push_back(value_info("x", 1, {1, 4, 16, 16, 16}));
  p.outputs.push_back(value_info("y", 1, {1, 4, 16, 16, 16}));
  return model(graph(p));
}

}  // namespace

TEST(LayoutChoice, OnARealPlanTheLayoutsFitTheRoomTheyWereChosenFor) {
  qsmcore::ModelOptions o;
  o.backend = qsmcore::Backend::Reference;
  o.threads = 1;
  o.mem_budget = 0;
  o.spill_activations = true;
  const Proto m = skip_over_concat();
  qsmcore::OnnxModel model = qsmcore::OnnxModel::load(m.bytes, o, "skip.onnx");
  const Plan& p = qsmcore::plan_for(model, {{1, 4, 16, 16, 16}});
  const PlanMemory& pm = p.memory();
  const std::int64_t need = lc::unspilled_run(pm, 1), least = lc::least_run(p, 1, true);
  ASSERT_LT(least, need) << "the skipped-over value can spill";
  // Room for it all: the plan's own layout.
  auto l = lc::layout_for(p, need, 1, Plan::Streams::Lean, true);
  ASSERT_NE(l, nullptr);
  EXPECT_FALSE(l->spills());
  EXPECT_EQ(static_cast<std::int64_t>(l->arena_bytes), pm.arena_bytes);
  // Between the least and the need: spilled, within the room.
  for (const std::int64_t room : {need - 1, (need + least) / 2, least}) {
    l = lc::layout_for(p, room, 1, Plan::Streams::Lean, true);
    ASSERT_NE(l, nullptr) << room;
    EXPECT_TRUE(l->spills()) << room;
    EXPECT_LE(accounted(pm, *l, 1), room);
    EXPECT_GT(l->write_bytes, 0u);
    EXPECT_EQ(l->read_bytes, l->write_bytes) << "what leaves the arena comes back";
  }
  // Below the least: nothing.
  EXPECT_EQ(lc::layout_for(p, least - 1, 1, Plan::Streams::Lean, true), nullptr);
  // The model itself refuses a run capped below the least, naming it.
  try {
    model.plan_memory({{1, 4, 16, 16, 16}}, least - 1);
    FAIL() << "a run below its least was planned";
  } catch (const qsmcore::Error& e) {
    EXPECT_EQ(e.kind(), qsmcore::ErrorKind::OutOfBudget);
    EXPECT_NE(std::string(e.what()).find("is " + std::to_string(least) + " bytes"), std::string::npos) << e.what();
  }
}
