// The engine's instantiation of the plan cache (runtime/plan_cache.h), compiled once here.
#include "runtime/plan_cache.h"

#include "runtime/plan.h"
#include "runtime/residency_executor.h"

namespace qsmcore {

template class PlanCacheOf<Plan, ResidencyExecutor>;

}  // namespace qsmcore
