// The native 3-D Winograd convolution F(2×2×2, 3×3×3): Lavin & Gray's minimal filtering
// (2016) nested along the three axes (Jia et al., PPoPP'18). Each 2×2×2 block of outputs (a
// tile) is computed from the 4×4×4 block of inputs around it with 64 products per input and
// output channel instead of 8 · 27 = 216: 3.4× fewer multiplies.
//
// Per block of tb tiles, on one thread, in its own scratch:
//   1. V[p][tile][ic] = Bᵀ d B of each tile (transforms.cpp), for the 64 points p;
//   2. M[p] = V[p] · U[p] for each p: 64 products [tb × c] · [c × m], one batched matmul;
//   3. y = Aᵀ M A + bias, the post-ops, stored (transforms.cpp).
// U[p] = G g Gᵀ (nested likewise) is computed once at construction, in double, and packed into
// the matmul's preferred layout (category Weights): 64/27 = 2.4× the weights' bytes. Packed
// through the model's pack cache, as direct convs' weights are: not at all in a dry build (a
// budget check), once for all plans of a model.
//
// Why oneDNN's matmul for step 2 rather than our own intrinsics: it is already the engine's
// dependency, it picks its brgemm kernels for AVX2, AVX-512 or AMX at run time from the CPU it
// finds (the build assumes no ISA), and its register blocking is tuned per ISA; our own
// microkernels would have to be written and tuned twice to reach the same fraction of peak. The
// transforms are ours (adds only, a build per ISA chosen at run time: transforms.cpp).
//
// Threads: the blocks are fixed by the shape (tb tiles each) and each runs whole on
// one thread, with oneDNN's matmul kept to that thread, so results do not depend on the thread
// count. Scratch per thread: V (64 · tb · c floats), M (64 · tb · m) and the matmul's scratchpad.
//
// Why 40 tiles a block, whatever the channels: the 64 batches of V and M lie tb · c (tb · m)
// floats apart, and where that stride is a multiple of 4 KiB or 8 KiB the batches alias in the
// L1 sets: measured (bench/conv_winograd.sh, 2 threads, AVX-512, 2026-12-07), Winograd / direct
// on 32->32 at 64³ was 1.27 at tb = 32 or 64 (4 and 8 KiB strides) against 0.77-0.83 at 24, 40, 56,
// 72, 88 (odd KiB), and 0.87-0.91 at the 48 the old rule (V and M within 768 KiB, "a core's L2")
// gave. 40 was within 0.03 of the best tb on every shape measured: 32->32 at 64³ and 128³ 0.79 /
// 0.81 (old rule 0.87-0.91), 64->64 at 64³ 0.66 (0.65 at the old 24), 128->128 at 32³ 0.52 (0.65
// at the old 8), 16->16 at 128³ 1.37 (1.67 at the old 96; auto leaves 16->16 direct). Keeping V and
// M in L2 mattered less than the stride: at 128 channels tb = 40 holds 2.6 MB of them.
#include "kernels/winograd/conv3d_winograd.h"

#include <algorithm>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>

#include "core/accounted_array.h"
#include "core/parallel.h"
#include "kernels/onednn/common.h"
#include "kernels/winograd/transforms.h"
#include "qsmcore/error.h"

namespace qsmcore::kernels::winograd {
namespace {

using dnnl::memory;
constexpr int kTileBlock = 40;  // tiles per block (see the header)

std::size_t round64(std::size_t b) {
  return (b + 63) / 64 * 64;
}

/// The weights' transform along one axis: G = [[1, 0, 0], [½, ½, ½], [½, −½, ½], [0, 0, 1]].
constexpr double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};

/// U[p][ic][oc] (row-major [64][c][m]) from weights [m][c][3][3][3], in double.
AccountedArray<float> transform_weights(const Conv3dShape& s, const float* w) {
  AccountedArray<float> u(static_cast<std::size_t>(kPoints) * s.c * s.m, MemCategory::Weights);
  for (int oc = 0; oc < s.m; ++oc)
    for (int ic = 0; ic < s.c; ++ic) {
      const float* g = w + (static_cast<std::size_t>(oc) * s.c + ic) * 27;
      double a[3][3][4], b[3][4][4];  // G along x, then along y
      for (int z = 0; z < 3; ++z)
        for (int y = 0; y < 3; ++y)
          for (int px = 0; px < 4; ++px)
            a[z][y][px] = kG[px][0] * g[(z * 3 + y) * 3] + kG[px][1] * g[(z * 3 + y) * 3 + 1] +
                          kG[px][2] * g[(z * 3 + y) * 3 + 2];
      for (int z = 0; z < 3; ++z)
        for (int py = 0; py < 4; ++py)
          for (int px = 0; px < 4; ++px)
            b[z][py][px] = kG[py][0] * a[z][0][px] + kG[py][1] * a[z][1][px] + kG[py][2] * a[z][2][px];
      for (int pz = 0; pz < 4; ++pz)
        for (int py = 0; py < 4; ++py)
          for (int px = 0; px < 4; ++px) {
            const double v = kG[pz][0] * b[0][py][px] + kG[pz][1] * b[1][py][px] + kG[pz][2] * b[2][py][px];
            const int p = (pz * 4 + py) * 4 + px;
            u[(static_cast<std::size_t>(p) * s.c + ic) * s.m + oc] = static_cast<float>(v);
          }
    }
  return u;
}

}  // namespace

bool winograd_fits(const std::vector<std::int64_t>& kernel, const std::vector<std::int64_t>& strides,
                   const std::vector<std::int64_t>& dilations, const std::vector<std::int64_t>& pads,
                   std::int64_t groups) {
  const auto all = [](const std::vector<std::int64_t>& v, std::size_t n, std::int64_t x) {
    return v.size() == n && std::all_of(v.begin(), v.end(), [x](std::int64_t e) { return e == x; });
  };
  return groups == 1 && all(kernel, 3, 3) && all(strides, 3, 1) && all(dilations, 3, 1) && all(pads, 6, 1);
}

struct WinogradConv3d::Impl {
  Conv3dShape s;
  TileGrid grid;
  int tb = 0;
  std::vector<float> bias;  // [m] padded with zeros to whole chunks: a per-channel table
  std::vector<graph::PostOp> post;
  TransformFns fns{};
  // U in the matmul's weights layout, packed through the model's pack cache (shared by plans of
  // other shapes; counted, not packed, in a dry build for a budget check).
  std::vector<std::shared_ptr<Buffer>> owned;
  std::int64_t packed_bytes = 0;
  memory wei_mem;
  memory::desc src_md, wei_md, dst_md;
  dnnl::matmul prim;
  std::size_t mm_scratch = 0;
  std::string impl;

  std::size_t v_bytes() const { return round64(static_cast<std::size_t>(kPoints) * tb * s.c * sizeof(float)); }
  std::size_t m_bytes() const { return round64(static_cast<std::size_t>(kPoints) * tb * s.m * sizeof(float)); }
  std::size_t worker_bytes() const { return v_bytes() + m_bytes() + round64(mm_scratch); }
  void make_matmul(const float* weights);
  void run_worker(const TileGrid& g, std::span<const WinogradConv3d::Input> xs, std::int64_t job0, std::int64_t job1,
                  const float* add, float* y, std::byte* scratch) const;
  void run_grid(const TileGrid& g, int items, std::span<const WinogradConv3d::Input> xs, const float* add, float* y,
                std::byte* scratch, std::size_t scratch_size, int threads) const;
};

/// The batched matmul [64, tb, c] · [64, c, m] → [64, tb, m], its weights U packed from the
/// transform of `weights` [m][c][3][3][3] (the plain U lives only while it is packed).
void WinogradConv3d::Impl::make_matmul(const float* weights) {
  using dt = memory::data_type;
  using tag = memory::format_tag;
  auto& eng = onednn::engine();
  src_md = memory::desc({kPoints, tb, s.c}, dt::f32, tag::abc);
  dst_md = memory::desc({kPoints, tb, s.m}, dt::f32, tag::abc);
  const memory::desc wei_plain({kPoints, s.c, s.m}, dt::f32, tag::abc);
  const memory::desc wei_any({kPoints, s.c, s.m}, dt::f32, tag::any);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_any, dst_md), attr, eng);
  prim = dnnl::matmul(pd);
  mm_scratch = pd.scratchpad_desc().get_size();
  wei_md = pd.weights_desc();
  const std::span<const float> source(weights, static_cast<std::size_t>(s.m) * s.c * 27);
  wei_mem = onednn::pack_derived(
      std::as_bytes(source), wei_plain, wei_md,
      [&](const std::function<void(const void*)>& pack) { pack(transform_weights(s, weights).data()); }, owned,
      packed_bytes);
  impl = std::string("qsm:winograd_f2_3d(") + fns.isa + ")+" + pd.impl_info_str();
}

WinogradConv3d::WinogradConv3d(const Conv3dShape& s, const float* weights, const float* bias,
                               std::vector<graph::PostOp> post, int tile_block)
    : impl_(std::make_unique<Impl>()) {
  if (s.n < 1 || s.c < 1 || s.m < 1 || s.d < 1 || s.h < 1 || s.w < 1)
    throw Error(ErrorKind::InvalidInput, "Winograd conv: every size must be positive (n " + std::to_string(s.n) +
                                             ", c " + std::to_string(s.c) + ", m " + std::to_string(s.m) + ")");
  Impl& p = *impl_;
  p.s = s;
  p.grid = TileGrid{s.c, s.m, s.d, s.h, s.w, (s.d + 1) / 2, (s.h + 1) / 2, (s.w + 1) / 2, s.d, 1};
  p.tb = tile_block > 0 ? tile_block : kTileBlock;
  p.bias.assign(static_cast<std::size_t>((s.m + kChunk - 1) / kChunk * kChunk), 0.0f);
  if (bias != nullptr) std::copy(bias, bias + s.m, p.bias.begin());
  p.post = std::move(post);
  // At most the ISA oneDNN runs its matmul on (ONEDNN_MAX_CPU_ISA caps both).
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  p.fns = transforms_for_cpu((isa & avx512) == avx512);
  p.make_matmul(weights);
}

WinogradConv3d::~WinogradConv3d() = default;

std::size_t WinogradConv3d::scratch_bytes(int threads) const {
  return impl_->worker_bytes() * static_cast<std::size_t>(std::max(1, threads));
}
std::int64_t WinogradConv3d::packed_bytes() const {
  return impl_->packed_bytes;
}
std::int64_t WinogradConv3d::derived_bytes() const {
  return static_cast<std::int64_t>(kPoints) * impl_->s.c * impl_->s.m * static_cast<std::int64_t>(sizeof(float));
}
int WinogradConv3d::tile_block() const {
  return impl_->tb;
}
std::string WinogradConv3d::impl_name() const {
  return impl_->impl;
}

/// Jobs [job0, job1) (job = batch item · blocks + block) of grid g on this thread, in its scratch.
void WinogradConv3d::Impl::run_worker(const TileGrid& g, std::span<const WinogradConv3d::Input> xs, std::int64_t job0,
                                      std::int64_t job1, const float* add, float* y, std::byte* scratch) const {
  ScopedThreads one(1);  // the matmul stays on this thread: same blocking, whatever the count
  auto& eng = onednn::engine();
  dnnl::stream st(eng);
  float* v = reinterpret_cast<float*>(scratch);
  float* mres = reinterpret_cast<float*>(scratch + v_bytes());
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, memory(src_md, eng, v)}, {DNNL_ARG_WEIGHTS, wei_mem}, {DNNL_ARG_DST, memory(dst_md, eng, mres)}};
  if (mm_scratch > 0) {
    const memory::desc smd({static_cast<memory::dim>(mm_scratch)}, memory::data_type::u8, memory::format_tag::a);
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(smd, eng, scratch + v_bytes() + m_bytes()));
  }
  const std::int64_t blocks = (g.tiles() + tb - 1) / tb;
  const std::int64_t in_voxels = static_cast<std::int64_t>(g.di) * g.h * g.w;
  const std::int64_t out_item = static_cast<std::int64_t>(g.d) * g.h * g.w * g.m;
  for (std::int64_t j = job0; j < job1; ++j) {
    const std::int64_t item = j / blocks, t0 = j % blocks * tb;
    const int count = static_cast<int>(std::min<std::int64_t>(tb, g.tiles() - t0));
    int c0 = 0;  // each input fills its own columns of V
    for (const auto& in : xs) {
      TileGrid gi = g;
      gi.c = in.c;
      fns.input(BlockArgs{&gi, t0, count, tb, g.c}, in.x + item * in_voxels * in.c, v + c0);
      c0 += in.c;
    }
    prim.execute(st, args);
    st.wait();
    const OutputArgs o{bias.data(), post, add != nullptr ? add + item * out_item : nullptr, y + item * out_item};
    fns.output(BlockArgs{&g, t0, count, tb, g.m}, mres, o);
  }
}

/// The jobs of grid g split evenly over the workers the scratch holds (at most `threads`): each
/// block is computed whole by one worker, so the split changes nothing in the results.
void WinogradConv3d::Impl::run_grid(const TileGrid& g, int items, std::span<const WinogradConv3d::Input> xs,
                                    const float* add, float* y, std::byte* scratch, std::size_t scratch_size,
                                    int threads) const {
  const std::size_t per = worker_bytes();
  QSM_ASSERT(scratch_size >= per, "Winograd conv: scratch smaller than scratch_bytes(1)");
  const int workers =
      static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(std::max(1, threads)), scratch_size / per));
  bool sum = false;
  for (const auto& op : post) sum = sum || op.kind == graph::PostOp::Kind::Sum;
  if (sum && add == nullptr) throw Error(ErrorKind::InvalidInput, "Winograd conv: a Sum post-op without its addend");
  const std::int64_t jobs = static_cast<std::int64_t>(items) * ((g.tiles() + tb - 1) / tb);
  ScopedThreads team(workers);
  parallel_for(workers, workers > 1, [&](std::int64_t w) {
    run_worker(g, xs, jobs * w / workers, jobs * (w + 1) / workers, add, y, scratch + w * per);
  });
}

void WinogradConv3d::run(const float* x, const float* add, float* y, std::byte* scratch, std::size_t scratch_size,
                         int threads) const {
  const Input in{x, impl_->s.c};
  impl_->run_grid(impl_->grid, impl_->s.n, {&in, 1}, add, y, scratch, scratch_size, threads);
}

void WinogradConv3d::run_window(const float* x, const float* add, float* y, const DepthWindow& win, std::byte* scratch,
                                std::size_t scratch_size, int threads) const {
  const Input in{x, impl_->s.c};
  run_window({&in, 1}, add, y, win, scratch, scratch_size, threads);
}

void WinogradConv3d::run_window(std::span<const Input> xs, const float* add, float* y, const DepthWindow& win,
                                std::byte* scratch, std::size_t scratch_size, int threads) const {
  const Impl& p = *impl_;
  int c = 0;
  for (const auto& in : xs) c += in.c;
  if (c != p.s.c)
    throw Error(ErrorKind::InvalidInput,
                "Winograd conv: inputs of " + std::to_string(c) + " channels in all for " + std::to_string(p.s.c));
  if (win.d_out < 1 || win.d_in < 1 || win.pad_front < 0 || win.pad_front > 1 ||
      win.d_in > win.d_out + 2 - win.pad_front)
    throw Error(ErrorKind::InvalidInput, "Winograd conv: a depth window of " + std::to_string(win.d_out) +
                                             " output planes cannot read " + std::to_string(win.d_in) +
                                             " input planes with front pad " + std::to_string(win.pad_front));
  TileGrid g = p.grid;
  g.d = win.d_out;
  g.td = (win.d_out + 1) / 2;
  g.di = win.d_in;
  g.pz = win.pad_front;
  p.run_grid(g, 1, xs, add, y, scratch, scratch_size, threads);
}

void WinogradConv3d::run(const float* x, const float* add, float* y) const {
  const int threads = max_threads();
  AccountedArray<std::byte> scratch(scratch_bytes(threads), MemCategory::Scratch);
  run(x, add, y, scratch.data(), scratch.size(), threads);
}

}  // namespace qsmcore::kernels::winograd
