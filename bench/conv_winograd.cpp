// The native 3-D Winograd conv F(2³, 3³) (src/kernels/winograd/) against oneDNN's direct conv
// (the primitive the engine's conv kernel builds: channels-last where the engine keeps its
// activations channels-last, else oneDNN's blocked choice) on the same 3×3×3 layers with bias and
// ReLU, side by side in one process, alternating, so that a busy machine slows both alike.
// Prints one table: per layer shape the best time of each, their ratio, effective GFLOP/s
// (direct-convolution FLOPs / time) and the largest difference between the two outputs.
// Usage: conv_winograd THREADS REPEAT [C,M,D ...]   (built by bench/conv_winograd.sh)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/accounted_array.h"
#include "core/parallel.h"
#include "kernels/onednn/common.h"
#include "kernels/winograd/conv3d_winograd.h"

namespace {

using namespace qsmcore;
using dnnl::memory;
namespace wg = kernels::winograd;

struct Layer {
  int c, m, d;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

/// oneDNN's direct conv + bias + ReLU on x (channels-last when the engine asks for it).
struct Direct {
  dnnl::convolution_forward prim;
  memory src, wei, bias, dst, scratch_mem;
  AccountedArray<std::byte> packed, scratch, dst_buf, src_buf;
  std::string impl;
  bool plain_io = true;

  Direct(const Layer& l, const float* x, const float* w, const float* b) {
    using dt = memory::data_type;
    using tag = memory::format_tag;
    auto& eng = kernels::onednn::engine();
    const memory::dims xd{1, l.c, l.d, l.d, l.d}, yd{1, l.m, l.d, l.d, l.d}, wd{l.m, l.c, 3, 3, 3};
    const tag io = kernels::onednn::activation_block() < 0 ? tag::ndhwc : tag::any;
    const memory::desc sd(xd, dt::f32, io), dd(yd, dt::f32, io), wany(wd, dt::f32, tag::any),
        bd({l.m}, dt::f32, tag::a);
    const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                               sd, wany, bd, dd, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1});
    std::vector<graph::PostOp> post{graph::PostOp{graph::PostOp::Kind::Relu, 0.0f, 0.0f, -1}};
    const dnnl::convolution_forward::primitive_desc pd(desc, kernels::onednn::make_attr(post), eng);
    prim = dnnl::convolution_forward(pd);
    impl = pd.impl_info_str();
    dnnl::stream st(eng);
    packed = AccountedArray<std::byte>(pd.weights_desc().get_size(), MemCategory::Weights);
    memory wplain({wd, dt::f32, tag::oidhw}, eng, const_cast<float*>(w));
    wei = memory(pd.weights_desc(), eng, packed.data());
    dnnl::reorder(wplain, wei).execute(st, wplain, wei);
    bias = memory(bd, eng, const_cast<float*>(b));
    plain_io = pd.src_desc() == memory::desc(xd, dt::f32, tag::ndhwc);
    src_buf = AccountedArray<std::byte>(plain_io ? 0 : pd.src_desc().get_size(), MemCategory::IO);
    src = memory(pd.src_desc(), eng, plain_io ? const_cast<float*>(x) : static_cast<void*>(src_buf.data()));
    if (!plain_io) {  // a blocked engine keeps its activations blocked: reorder once, untimed
      memory xplain({xd, dt::f32, tag::ndhwc}, eng, const_cast<float*>(x));
      dnnl::reorder(xplain, src).execute(st, xplain, src);
    }
    dst_buf = AccountedArray<std::byte>(pd.dst_desc().get_size(), MemCategory::IO);
    dst = memory(pd.dst_desc(), eng, dst_buf.data());
    scratch = AccountedArray<std::byte>(pd.scratchpad_desc().get_size(), MemCategory::Scratch);
    scratch_mem = memory(pd.scratchpad_desc(), eng, scratch.data());
    st.wait();
  }
  void run() {
    dnnl::stream st(kernels::onednn::engine());
    prim.execute(st, {{DNNL_ARG_SRC, src},
                      {DNNL_ARG_WEIGHTS, wei},
                      {DNNL_ARG_BIAS, bias},
                      {DNNL_ARG_DST, dst},
                      {DNNL_ARG_SCRATCHPAD, scratch_mem}});
    st.wait();
  }
};

/// Max |Δ| between the two outputs over the direct one's range (channels-last direct only).
double difference(const Direct& dir, const float* y, std::size_t n) {
  if (!dir.plain_io) return NAN;
  const float* r = reinterpret_cast<const float*>(dir.dst_buf.data());
  double err = 0, lo = r[0], hi = r[0];
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(y[i])) return INFINITY;
    err = std::max(err, static_cast<double>(std::abs(y[i] - r[i])));
    lo = std::min(lo, static_cast<double>(r[i]));
    hi = std::max(hi, static_cast<double>(r[i]));
  }
  return err / (hi - lo);
}

void bench_layer(const Layer& l, int threads, int repeat) {
  const std::size_t vox = static_cast<std::size_t>(l.d) * l.d * l.d;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  AccountedArray<float> x(vox * l.c, MemCategory::IO), y(vox * l.m, MemCategory::IO);
  for (auto& v : x) v = u(rng);
  std::vector<float> w(static_cast<std::size_t>(l.m) * l.c * 27), b(static_cast<std::size_t>(l.m));
  const float ws = 1.0f / std::sqrt(27.0f * l.c);
  for (auto& v : w) v = ws * u(rng);
  for (auto& v : b) v = 0.1f * u(rng);
  Direct dir(l, x.data(), w.data(), b.data());
  const char* tb_env = std::getenv("QSM_WINOGRAD_TILE_BLOCK");
  const wg::WinogradConv3d wino({1, l.c, l.m, l.d, l.d, l.d}, w.data(), b.data(),
                                {graph::PostOp{graph::PostOp::Kind::Relu, 0.0f, 0.0f, -1}},
                                tb_env ? std::atoi(tb_env) : 0);
  AccountedArray<std::byte> scratch(wino.scratch_bytes(threads), MemCategory::Scratch);
  std::vector<double> td, tw;
  for (int r = 0; r <= repeat; ++r) {  // run 0 warms both up, untimed
    auto t0 = std::chrono::steady_clock::now();
    dir.run();
    const double a = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    wino.run(x.data(), nullptr, y.data(), scratch.data(), scratch.size(), threads);
    const double c = seconds_since(t0);
    if (r > 0) td.push_back(a), tw.push_back(c);
  }
  std::vector<double> pair(td.size());
  for (std::size_t i = 0; i < td.size(); ++i) pair[i] = tw[i] / td[i];
  const double flop = 2.0 * l.c * l.m * 27 * static_cast<double>(vox);
  const double md = *std::min_element(td.begin(), td.end()), mw = *std::min_element(tw.begin(), tw.end());
  char shape[64];
  std::snprintf(shape, sizeof shape, "%d->%d at %d^3", l.c, l.m, l.d);
  std::printf("%-18s | %9.3f %9.3f | %5.2f %5.2f | %8.1f %8.1f | %4d | %.1e\n", shape, md, mw, mw / md, median(pair),
              flop / md / 1e9, flop / mw / 1e9, wino.tile_block(), difference(dir, y.data(), y.size()));
  std::fflush(stdout);
  static bool said = false;
  if (!said) std::fprintf(stderr, "direct: %s; winograd: %s\n", dir.impl.c_str(), wino.impl_name().c_str());
  said = true;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int repeat = argc > 2 ? std::atoi(argv[2]) : 3;
  std::vector<Layer> layers;
  for (int i = 3; i < argc; ++i) {
    Layer l{};
    if (std::sscanf(argv[i], "%d,%d,%d", &l.c, &l.m, &l.d) != 3)
      return std::fprintf(stderr, "bad shape %s\n", argv[i]), 2;
    layers.push_back(l);
  }
  if (layers.empty()) layers = {{32, 32, 64}, {64, 64, 64}, {16, 16, 128}, {32, 32, 128}, {64, 64, 128}};
  ScopedThreads team(threads);
  std::printf("%-18s | %9s %9s | %5s %5s | %8s %8s | %4s | %s\n", "3x3x3 conv+ReLU", "direct s", "wino s", "w/d",
              "pairs", "dir GF/s", "win GF/s", "tb", "max|d|/range");
  for (const auto& l : layers) bench_layer(l, threads, repeat);
  std::printf(
      "threads=%d; best of %d runs each after a warm-up, alternating; w/d = Winograd / direct (best times), pairs = "
      "median of the per-run ratios; GF/s = direct FLOPs / best time\n",
      threads, repeat);
  return 0;
}
