// Deferred constants. Under a weight-residency policy other than FullyResident, large weight
// initializers are not read at load: the typed graph carries, instead of their values, a recipe
// saying how each constant is obtained — an initializer read from the file, or a derivation
// (a folded node, a BN fold, a channel slice) of other constants. A unit's weights are then
// materialised on demand from its recipes, with the *same* functions that the eager path runs,
// so a streamed run is bitwise identical to a resident one.
#pragma once
#include <compare>
#include <cstdint>
#include <compare>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "qsmcore/tensor.h"

namespace qsmcore::graph {

struct TValue;

using DeriveFn = std::function<Tensor(std::span<const Tensor>)>;

/// What a leaf reads from the file: initializer `initializer`, whole (channels < 0) or only
/// input channels [ch0, ch0 + channels) of a weight laid out [out, in, ...] — a sliced unit
/// reads just its slice.
struct LeafKey {
  int initializer = -1;
  std::int64_t ch0 = 0;
  std::int64_t channels = -1;
  auto operator<=>(const LeafKey&) const = default;
};

struct ConstRecipe {
  LeafKey leaf;                         // leaf read from the model file (initializer >= 0)
  std::shared_ptr<const Tensor> value;  // leaf already resident (small constants, shapes)
  DeriveFn derive;                      // otherwise: derive(args evaluated)
  std::vector<std::shared_ptr<const ConstRecipe>> args;
  /// derive() works row by row on args[0] (a weight [out, in, ...]) with per-output-row
  /// parameters in the other args — a BN fold — so it commutes with slicing input channels.
  bool rowwise = false;
};

/// Leaf reader: the tensor a leaf key names (as stored in the file, or its channel slice).
using LeafFn = std::function<Tensor(const LeafKey&)>;

/// Evaluates a recipe, reading leaves through `leaf`.
Tensor evaluate(const ConstRecipe& r, const LeafFn& leaf);
/// Leaves the recipe reads (sorted, unique), merged into `out`.
void collect_leaves(const ConstRecipe& r, std::vector<LeafKey>& out);

/// W[:, c0:c0+c, ...] of a weight [out, in, ...] (f32), as a new tensor.
Tensor slice_input_channels(const Tensor& w, std::int64_t c0, std::int64_t c);

/// The recipe of a constant value: its own when deferred, else an inline leaf of its tensor.
std::shared_ptr<const ConstRecipe> recipe_of(const TValue& v);

/// Sets `out` to fn(args): computed now when every arg is resident, deferred otherwise. Both
/// paths run the same `fn`, so the values are identical bit for bit.
void set_derived(TValue& out, std::span<const TValue* const> args, DeriveFn fn, bool rowwise = false);

/// Sets `out` to the input-channel slice [c0, c0+c) of weight `w`. A deferred weight's slice is
/// pushed down to its leaf (through row-wise derivations), so only the slice is read from disk.
void set_input_channel_slice(TValue& out, const TValue& w, std::int64_t c0, std::int64_t c);

}  // namespace qsmcore::graph
