// Deferred constants. Under a weight-residency policy other than FullyResident, large weight
// initializers are not read at load: the typed graph carries, instead of their values, a recipe
// saying how each constant is obtained — an initializer read from the file, or a derivation
// (a folded node, a BN fold, a channel slice) of other constants. A unit's weights are then
// materialised on demand from its recipes, with the *same* functions that the eager path runs,
// so a streamed run is bitwise identical to a resident one.
#pragma once
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "qsmcore/tensor.h"

namespace qsmcore::graph {

struct TValue;

using DeriveFn = std::function<Tensor(std::span<const Tensor>)>;

struct ConstRecipe {
  int initializer = -1;                 // leaf read from the model file (index in initializers)
  std::shared_ptr<const Tensor> value;  // leaf already resident (small constants, shapes)
  DeriveFn derive;                      // otherwise: derive(args evaluated)
  std::vector<std::shared_ptr<const ConstRecipe>> args;
};

/// Leaf reader: the tensor of initializer i (as stored in the file).
using LeafFn = std::function<Tensor(int initializer)>;

/// Evaluates a recipe, reading leaves through `leaf`.
Tensor evaluate(const ConstRecipe& r, const LeafFn& leaf);
/// Initializer indices the recipe reads (sorted, unique), appended to `out`.
void collect_leaves(const ConstRecipe& r, std::vector<int>& out);

/// The recipe of a constant value: its own when deferred, else an inline leaf of its tensor.
std::shared_ptr<const ConstRecipe> recipe_of(const TValue& v);

/// Sets `out` to fn(args): computed now when every arg is resident, deferred otherwise. Both
/// paths run the same `fn`, so the values are identical bit for bit.
void set_derived(TValue& out, std::span<const TValue* const> args, DeriveFn fn);

}  // namespace qsmcore::graph
