// Runs one operator directly through its OpDef (infer -> allocate outputs -> ref), without the
// planner, so a reference kernel can be checked against hand-computed values.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph/op_registry.h"
#include "qsmcore/error.h"

namespace opstest {

using qsmcore::DType;
using qsmcore::Shape;
using qsmcore::Tensor;
using qsmcore::graph::Attribute;

inline Attribute ai(const std::string& n, std::int64_t v) {
  Attribute a;
  a.name = n, a.kind = Attribute::Kind::Int, a.i = v;
  return a;
}
inline Attribute ais(const std::string& n, std::vector<std::int64_t> v) {
  Attribute a;
  a.name = n, a.kind = Attribute::Kind::Ints, a.ints = std::move(v);
  return a;
}
inline Attribute af(const std::string& n, float v) {
  Attribute a;
  a.name = n, a.kind = Attribute::Kind::Float, a.f = v;
  return a;
}
inline Attribute afs(const std::string& n, std::vector<float> v) {
  Attribute a;
  a.name = n, a.kind = Attribute::Kind::Floats, a.floats = std::move(v);
  return a;
}
inline Attribute as(const std::string& n, std::string v) {
  Attribute a;
  a.name = n, a.kind = Attribute::Kind::String, a.s = std::move(v);
  return a;
}
inline Attribute at(const std::string& n, Tensor v) {
  Attribute a;
  a.name = n, a.kind = Attribute::Kind::Tensor, a.t = std::move(v);
  return a;
}

inline Tensor F(Shape s, std::vector<float> v) { return Tensor::from_vector<float>(std::move(s), v); }
inline Tensor I(Shape s, std::vector<std::int64_t> v) { return Tensor::from_vector<std::int64_t>(std::move(s), v); }
inline Tensor B(Shape s, std::vector<bool> v) { return Tensor::from_vector<bool>(std::move(s), v); }
/// 0, 1, 2, ... as floats.
inline Tensor iota(Shape s) {
  std::vector<float> v(static_cast<std::size_t>(qsmcore::numel(s)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return F(std::move(s), v);
}

struct OpCall {
  OpCall(std::string o, std::vector<Attribute> a = {}, std::int64_t v = 17, int n = 1)
      : op(std::move(o)), attrs(std::move(a)), opset(v), outputs(n) {}
  OpCall(const char* o) : OpCall(std::string(o)) {}  // NOLINT: {"Relu"} reads naturally
  std::string op;
  std::vector<Attribute> attrs;
  std::int64_t opset;
  int outputs;
};

/// Runs the op; every present input is offered as a constant (as folding would). An
/// undefined Tensor is an absent optional input.
inline std::vector<Tensor> run(const OpCall& c, const std::vector<Tensor>& inputs) {
  const auto* def = qsmcore::graph::OpRegistry::instance().find(c.op);
  if (def == nullptr) throw std::runtime_error("op not registered: " + c.op);
  qsmcore::graph::Node node;
  node.name = "n";
  node.op_type = c.op;
  node.opset = c.opset;
  node.attrs.items = c.attrs;
  std::vector<qsmcore::graph::ValueType> types;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i].defined() ? "in" + std::to_string(i) : "");
    types.push_back({inputs[i].dtype(), inputs[i].shape(), inputs[i].defined() ? &inputs[i] : nullptr});
  }
  for (int i = 0; i < c.outputs; ++i) node.outputs.push_back("out" + std::to_string(i));
  const auto out_types = def->infer(node, types);
  std::vector<Tensor> outs;
  for (const auto& t : out_types) outs.push_back(Tensor::zeros(t.dtype, t.shape));
  def->ref(node, inputs, outs);
  return outs;
}

inline Tensor run1(const OpCall& c, const std::vector<Tensor>& inputs) { return run(c, inputs).at(0); }

/// The message of the Error the call throws (and checks its kind).
inline std::string error_of(const OpCall& c, const std::vector<Tensor>& inputs,
                            qsmcore::ErrorKind kind = qsmcore::ErrorKind::InvalidModel) {
  try {
    run(c, inputs);
  } catch (const qsmcore::Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

template <class T = float>
std::vector<T> values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

inline void expect_near(const Tensor& t, const std::vector<float>& want, float tol = 1e-5f) {
  ASSERT_EQ(static_cast<std::size_t>(t.numel()), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(t.data<float>()[i], want[i], tol) << "at " << i;
}

}  // namespace opstest
