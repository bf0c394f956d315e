#include "graph/const_recipe.h"

#include <algorithm>
#include <cstring>

#include "graph/typed_graph.h"
#include "qsmcore/error.h"

namespace qsmcore::graph {

Tensor evaluate(const ConstRecipe& r, const LeafFn& leaf) {
  if (r.value) return *r.value;
  if (r.leaf.initializer >= 0) return leaf(r.leaf);
  QSM_ASSERT(static_cast<bool>(r.derive), "a constant recipe with neither a leaf nor a derivation");
  std::vector<Tensor> args;
  args.reserve(r.args.size());
  for (const auto& a : r.args) args.push_back(a ? evaluate(*a, leaf) : Tensor());
  return r.derive(args);
}

void collect_leaves(const ConstRecipe& r, std::vector<LeafKey>& out) {
  if (r.leaf.initializer >= 0) {
    auto it = std::lower_bound(out.begin(), out.end(), r.leaf);
    if (it == out.end() || *it != r.leaf) out.insert(it, r.leaf);
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

void set_derived(TValue& out, std::span<const TValue* const> args, DeriveFn fn, bool rowwise) {
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
  r->rowwise = rowwise;
  out.constant.reset();
  out.recipe = std::move(r);
}

Tensor slice_input_channels(const Tensor& w, std::int64_t c0, std::int64_t c) {
  Shape s = w.shape();
  const std::int64_t m = s[0], cin = s[1];
  const std::int64_t k = w.numel() / (m * cin);
  s[1] = c;
  Tensor out = Tensor::empty(DType::F32, s, MemCategory::Weights);
  for (std::int64_t o = 0; o < m; ++o)
    std::memcpy(out.data<float>() + o * c * k, w.data<float>() + (o * cin + c0) * k, static_cast<std::size_t>(c * k) * 4);
  return out;
}

namespace {

std::shared_ptr<const ConstRecipe> slice_recipe(const std::shared_ptr<const ConstRecipe>& r, std::int64_t c0, std::int64_t c) {
  if (r->leaf.initializer >= 0) {  // a slice of a (sliced) leaf is a narrower leaf
    auto leaf = std::make_shared<ConstRecipe>();
    leaf->leaf = LeafKey{r->leaf.initializer, r->leaf.ch0 + c0, c};
    return leaf;
  }
  if (r->rowwise && !r->args.empty() && r->args[0]) {
    auto d = std::make_shared<ConstRecipe>(*r);
    d->args[0] = slice_recipe(r->args[0], c0, c);
    return d;
  }
  auto d = std::make_shared<ConstRecipe>();
  d->args = {r};
  d->derive = [c0, c](std::span<const Tensor> a) { return slice_input_channels(a[0], c0, c); };
  return d;
}

}  // namespace

void set_input_channel_slice(TValue& out, const TValue& w, std::int64_t c0, std::int64_t c) {
  if (w.constant) {
    out.constant = std::make_shared<const Tensor>(slice_input_channels(*w.constant, c0, c));
    out.recipe.reset();
    return;
  }
  out.constant.reset();
  out.recipe = slice_recipe(w.recipe, c0, c);
}

}  // namespace qsmcore::graph
