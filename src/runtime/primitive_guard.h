// Dropping oneDNN's unused primitives without racing the threads that create primitives.
// kernels::release_unused_primitives() empties oneDNN's process-wide primitive cache by setting
// its capacity to 0 and back; done while another thread creates a primitive (building a plan, or
// a streamed run building a weight unit's kernel), that creation came back corrupt in oneDNN 2.7
// (a wrong output or std::bad_array_new_length from its brgemm kernel, in 4 of 15 runs of
// tests/runtime/concurrent_callers_test.cpp; none of 15 without the toggle). So the engine
// creates primitives inside a PrimitiveCreationScope and drops them through
// release_unused_primitives_when_idle(): at once when no scope is open, else when the last
// open scope closes. The memory those primitives hold is then given back a little later, never
// while a creation is under way (issue #51).
#pragma once

namespace qsmcore {

/// Open while this thread may create oneDNN primitives: a Plan built, a streamed forward (its
/// weight units' kernels are built as it runs). Scopes on any threads may be open at once.
class PrimitiveCreationScope {
 public:
  PrimitiveCreationScope();
  ~PrimitiveCreationScope();
  PrimitiveCreationScope(const PrimitiveCreationScope&) = delete;
  PrimitiveCreationScope& operator=(const PrimitiveCreationScope&) = delete;
};

/// kernels::release_unused_primitives() now if no PrimitiveCreationScope is open in the process,
/// else as the last one closes. Returns whether it ran now.
bool release_unused_primitives_when_idle();

}  // namespace qsmcore
