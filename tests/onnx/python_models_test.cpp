// Models written by the real onnx package (and by torch.onnx.export) parse to the structure
// onnx itself sees: python dumps a summary of nodes/attributes/initializers/values plus each
// initializer and tensor attribute as .npy, and the test compares line by line and byte by byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "io/npy.h"
#include "onnx/reader.h"
#include "onnx/test_util.h"

namespace qsmcore::onnx {
namespace {

// Shared by every model: writes <model>.summary and <model>.<n>.npy files next to the model.
const char* kSummarize = R"(
import numpy as np, onnx
from onnx import numpy_helper, AttributeProto as A

def kind(a):
    n = A.AttributeType.Name(a.type)
    return 'GRAPH' if n == 'GRAPHS' else n if n in ('FLOAT','INT','STRING','TENSOR','GRAPH','FLOATS','INTS','STRINGS') else 'OTHER'

def dims(vi):
    t = vi.type.tensor_type
    return ','.join(d.dim_param if d.HasField('dim_param') else str(d.dim_value) for d in t.shape.dim)

def summarize(path, base):
    m = onnx.load(path, load_external_data=False)
    onnx.external_data_helper.load_external_data_for_model(m, base)
    g = m.graph
    out = ['ir %d' % m.ir_version]
    out += ['opset %s %d' % (o.domain, o.version) for o in m.opset_import]
    for i, n in enumerate(g.node):
        name = n.name or '%s_%d' % (n.op_type, i)
        attrs = ','.join('%s:%s' % (a.name, kind(a)) for a in n.attribute)
        out.append('node %s %s %s in=%s out=%s attrs=%s' % (name, n.op_type, n.domain, ','.join(n.input), ','.join(n.output), attrs))
        for a in n.attribute:
            if a.type == A.TENSOR:
                np.save('%s.%s.%s.npy' % (path, name.replace('/', '_'), a.name), numpy_helper.to_array(a.t))
    inits = set()
    for t in g.initializer:
        inits.add(t.name)
        out.append('init %s %d %s' % (t.name, t.data_type, ','.join(map(str, t.dims))))
        np.save('%s.%s.npy' % (path, t.name.replace('/', '_')), numpy_helper.to_array(t))
    for v in g.input:
        if v.name not in inits:
            out.append('input %s %d %s' % (v.name, v.type.tensor_type.elem_type, dims(v)))
    for v in g.output:
        out.append('output %s %d %s' % (v.name, v.type.tensor_type.elem_type, dims(v)))
    open(path + '.summary', 'w').write('\n'.join(out) + '\n')
)";

const char* kind_name(graph::Attribute::Kind k) {
  using K = graph::Attribute::Kind;
  switch (k) {
    case K::Float: return "FLOAT";
    case K::Int: return "INT";
    case K::String: return "STRING";
    case K::Tensor: return "TENSOR";
    case K::Graph: return "GRAPH";
    case K::Floats: return "FLOATS";
    case K::Ints: return "INTS";
    case K::Strings: return "STRINGS";
    default: return "OTHER";
  }
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + v[i];
  return s;
}

std::string dims_of(const graph::ValueInfo& v) {
  std::vector<std::string> d;
  for (const auto& x : v.dims) d.push_back(x.param.empty() ? std::to_string(std::max<std::int64_t>(x.value, 0)) : x.param);
  return join(d);
}

std::string summarize(const graph::Model& m) {
  std::ostringstream out;
  out << "ir " << m.ir_version << "\n";
  for (const auto& [d, v] : m.opsets) out << "opset " << d << " " << v << "\n";
  for (const auto& n : m.graph.nodes) {
    std::vector<std::string> attrs;
    for (const auto& a : n.attrs.items) attrs.push_back(a.name + ":" + kind_name(a.kind));
    out << "node " << n.name << " " << n.op_type << " " << n.domain << " in=" << join(n.inputs)
        << " out=" << join(n.outputs) << " attrs=" << join(attrs) << "\n";
  }
  for (const auto& i : m.graph.initializers) {
    std::vector<std::string> d;
    for (auto x : i.dims) d.push_back(std::to_string(x));
    out << "init " << i.name << " " << static_cast<int>(i.dtype) << " " << join(d) << "\n";
  }
  for (const auto& v : m.graph.inputs) out << "input " << v.name << " " << static_cast<int>(v.dtype) << " " << dims_of(v) << "\n";
  for (const auto& v : m.graph.outputs) out << "output " << v.name << " " << static_cast<int>(v.dtype) << " " << dims_of(v) << "\n";
  return out.str();
}

/// Names as python put them in file names ('/' is common in exported names).
std::string file_safe(std::string s) {
  std::replace(s.begin(), s.end(), '/', '_');
  return s;
}

void expect_same_bytes(const Tensor& got, const std::string& npy, const std::string& what) {
  const Tensor want = io::read_npy(npy);
  EXPECT_EQ(got.dtype(), want.dtype()) << what;
  EXPECT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.nbytes(), want.nbytes()) << what;
  if (got.nbytes()) {
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0) << what;
  }
}

/// Reads `path` with our reader and checks it against python's summary and .npy dumps.
void check_against_python(const std::string& path) {
  const graph::Model m = read_model(path);
  std::ifstream f(path + ".summary");
  const std::string want((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(summarize(m), want);
  for (const auto& init : m.graph.initializers) {
    expect_same_bytes(graph::load_initializer(m, init), path + "." + file_safe(init.name) + ".npy", init.name);
  }
  for (const auto& n : m.graph.nodes)
    for (const auto& a : n.attrs.items)
      if (a.kind == graph::Attribute::Kind::Tensor)
        expect_same_bytes(a.t, path + "." + file_safe(n.name) + "." + a.name + ".npy", n.label() + " " + a.name);
}

TEST(PythonModels, OnnxHelperModelsMatchOnnxsView) {
  qsmtest::TempDir dir;
  const std::string script = std::string(kSummarize) + R"(
import os
from onnx import helper, TensorProto as T
W = numpy_helper.from_array(np.random.RandomState(0).randn(4, 2, 3, 3, 3).astype(np.float32), 'W')
B = helper.make_tensor('B', T.FLOAT, [4], [0.5, -1.0, 2.0, 3.0])          # float_data
shape = helper.make_tensor('shape', T.INT64, [2], [1, -1])                   # int64_data
half = numpy_helper.from_array(np.array([1.5, -2], dtype=np.float16), 'half')
nodes = [
    helper.make_node('Conv', ['x', 'W', 'B'], ['c'], name='conv', kernel_shape=[3, 3, 3], pads=[1] * 6),
    helper.make_node('Constant', [], ['k'], value=numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3))),
    helper.make_node('LeakyRelu', ['c'], ['r'], alpha=0.1),
    helper.make_node('Reshape', ['r', 'shape'], ['y']),
    helper.make_node('Cast', ['half'], ['h'], to=1),
    helper.make_node('If', ['cond'], ['z'], then_branch=helper.make_graph([], 't', [], []),
                     else_branch=helper.make_graph([], 'e', [], [])),
]
g = helper.make_graph(nodes, 'g',
    [helper.make_tensor_value_info('x', T.FLOAT, ['N', 2, 8, 8, 8]),
     helper.make_tensor_value_info('W', T.FLOAT, [4, 2, 3, 3, 3]),
     helper.make_tensor_value_info('cond', T.BOOL, [])],
    [helper.make_tensor_value_info('y', T.FLOAT, [1, 'M']),
     helper.make_tensor_value_info('h', T.FLOAT, [2])],
    initializer=[W, B, shape, half])
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
onnx.save(m, 'plain.onnx')
summarize('plain.onnx', '.')
os.mkdir('ext')
onnx.save_model(m, 'ext/model.onnx', save_as_external_data=True, all_tensors_to_one_file=True,
                location='weights.bin', size_threshold=0)
summarize('ext/model.onnx', 'ext')
)";
  if (!qsmtest::run_python(script, dir.path(), "onnx")) GTEST_SKIP();
  check_against_python(dir.file("plain.onnx"));
  check_against_python(dir.file("ext/model.onnx"));
  const graph::Model ext = read_model(dir.file("ext/model.onnx"));
  EXPECT_EQ(ext.sources.size(), 2u);  // all tensors in one shard, opened once
}

TEST(PythonModels, TorchExportMatchesOnnxsView) {
  qsmtest::TempDir dir;
  const std::string script = std::string(kSummarize) + R"(
import torch
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv3d(1, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm3d(4)
        self.up = torch.nn.ConvTranspose3d(4, 2, 2, stride=2)
    def forward(self, x):
        return self.up(torch.relu(self.bn(self.conv(x)))).reshape(x.shape[0], -1)
net = Net().eval()
torch.onnx.export(net, torch.zeros(1, 1, 8, 8, 8), 'torch.onnx', input_names=['x'], output_names=['y'],
                  dynamic_axes={'x': {0: 'batch'}}, opset_version=13, do_constant_folding=False)
summarize('torch.onnx', '.')
)";
  if (!qsmtest::run_python(script, dir.path(), "torch, onnx")) GTEST_SKIP();
  check_against_python(dir.file("torch.onnx"));
}

}  // namespace
}  // namespace qsmcore::onnx
