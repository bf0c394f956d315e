#include "graph/const_recipe.h"

#include <algorithm>

#include "graph/typed_graph.h"
#include "qsmcore/error.h"

namespace qsmcore::graph {

Tensor evaluate(const ConstRecipe& r, const LeafFn& leaf) {
  if (r.value) return *r.value;
  if (r.initializer >= 0) return leaf(r.initializer);
  QSM_ASSERT(static_cast<bool>(r.derive), "a constant recipe with neither a leaf nor a derivation");
  std::vector<Tensor> args;
  args.reserve(r.args.size());
  for (const auto& a : r.args) args.push_back(a ? evaluate(*a, leaf) : Tensor());
  return r.derive(args);
}

void collect_leaves(const ConstRecipe& r, std::vector<int>& out) {
  if (r.initializer >= 0) {
    auto it = std::lower_bound(out.begin(), out.end(), r.initializer);
    if (it == out.end() || *it != r.initializer) out.insert(it, r.initializer);
  }
  for (const auto& a : r.args)
    if (a) collect_leaves(*a, out);
}

std::shared_ptr<const ConstRecipe> recipe_of(const TValue& v) {
  if (v.recipe) return v.recipe;
  QSM_ASSERT(v.constant != nullptr, "recipe of the non-constant value '" + v.name + "'");
  auto r = std::make_shared<ConstRecipe>();
  r->value = v.constant;
  return r;
}

void set_derived(TValue& out, std::span<const TValue* const> args, DeriveFn fn) {
  bool resident = true;
  for (const TValue* a : args) resident = resident && (a == nullptr || a->constant != nullptr);
  if (resident) {
    std::vector<Tensor> in;
    for (const TValue* a : args) in.push_back(a ? *a->constant : Tensor());
    out.constant = std::make_shared<const Tensor>(fn(in));
    out.recipe.reset();
    return;
  }
  auto r = std::make_shared<ConstRecipe>();
  for (const TValue* a : args) r->args.push_back(a ? recipe_of(*a) : nullptr);
  r->derive = std::move(fn);
  out.constant.reset();
  out.recipe = std::move(r);
}

}  // namespace qsmcore::graph
