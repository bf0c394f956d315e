// LPCNN, MoDL-QSM and NeXtQSM: networks unrolled around an FFT data-consistency step
// (models.md §5). They run on the whole volume: tiling them is off-design.
#include <algorithm>
#include <cmath>

#include "networks/unroll.h"
#include "networks/wrappers.h"
#include "qsmcore/error.h"

namespace qsmcore::networks {

using tiling::Box;

namespace {

void ignore_tile(Context& c) {
  if (c.opts.tile && (c.opts.tile->core[0] > 0 || c.opts.tile->core[1] > 0 || c.opts.tile->core[2] > 0))
    c.warn(
        c.id() +
        " runs on the whole volume (tiling its FFT data-consistency step is off-design); the tile request is ignored");
}

std::span<double> span_of(Volume& v, std::int64_t frame = 0) {
  return v.frame(frame);
}

}  // namespace

void run_lpcnn(Context& c) {
  const Volume& grid = *c.in.field;
  const Dims3 dims = grid.dims();
  const std::int64_t V = grid.voxels();
  ignore_tile(c);
  c.load(c.pool());
  Context::Reservation res;
  res.shapes = {{{1, 1, dims[0], dims[1], dims[2]}}};
  res.wrapper_fixed = 5 * V * 8 + DipoleOp::bytes(dims) + V * 4 + V * 8 + 8192;
  // No graph reads y, x_est, den, p or D's kernel, nor the inputs (the mask is read between the
  // runs): they may wait in the spill directory while one runs.
  res.parks = true;
  res.wrapper_parkable = {V * 8, V * 8, V * 8, V * 8, (dims[0] / 2 + 1) * dims[1] * dims[2] * 8};
  c.reserve(res);
  c.stage("prepare");
  const Volume* mask = c.in.mask;
  Volume y = field_ppm(c.in);
  DipoleOp d(dims, grid.voxel_mm(), b0_direction(c.in, grid), KernelOptions::lpcnn_modl());
  Volume x_est = make_like(grid), den = make_like(grid), p = make_like(grid);
  const Context::Parked parked[] = {c.park_while_running(y.storage()), c.park_while_running(x_est.storage()),
                                    c.park_while_running(den.storage()), c.park_while_running(p.storage()),
                                    c.park_while_running(d.kernel_storage())};
  d.apply(y.data(), x_est.data());
  for (double& v : x_est.values()) v *= kLpcnnAlpha;
  c.stage("iterations");
  for (int i = 0; i < 3; ++i) {
    lpcnn_step(d, kLpcnnAlpha, x_est.values(), den.values(), i, p.values());
    Tensor t = f32_tensor({1, 1, dims[0], dims[1], dims[2]});
    tiling::pack_box(p.data(), dims, {{0, 0, 0}, dims}, tiling::kXYZ, tiling::Fill::Zero, t.data<float>(),
                     [&](double v, std::int64_t k) { return inside(mask, k) ? (v - kLpcnnMean) / kLpcnnStd : 0.0; });
    std::vector<Tensor> o = c.run_model(0, {t});
    tiling::unpack_box(o.at(0).data<float>(), dims, {{0, 0, 0}, dims}, tiling::kXYZ, {{0, 0, 0}, dims},
                       [&](std::int64_t k, double v, std::int64_t) {
                         den.data()[k] = inside(mask, k) ? v * kLpcnnStd + kLpcnnMean : 0.0;
                       });
    c.progress((i + 1) / 3.0, "iterations");
  }
  add_output(c, "chi", "ppm", std::move(den));
}

// MoDL-QSM runs on even dimensions: its authors drop the first slice of each odd axis from the
// field and the mask (Ruimin-Feng/MoDL-QSM test/test_tools.py model_test -> crop_array,
// np.delete(data, 0, axis)); χ there is returned as 0 (#19).
void run_modl(Context& c) {
  const Volume& grid = *c.in.field;
  const Dims3 full = grid.dims();
  ignore_tile(c);
  const Vec3& vox = grid.voxel_mm();
  if (std::abs(vox[0] - 1) > 0.05 || std::abs(vox[1] - 1) > 0.05 || std::abs(vox[2] - 1) > 0.05)
    c.warn(c.id() +
           " assumes 1 mm isotropic voxels (its authors resample k-space to 1 mm and back); this volume "
           "has " +
           describe_grid(grid));
  // network_input_shape: each axis rounded down to even; the dropped slice is the first.
  const Dims3 even = input_shape(c, full);
  const Box keep{{full[0] - even[0], full[1] - even[1], full[2] - even[2]}, even};
  const Dims3 dims = keep.size;
  if (dims[0] < 2 || dims[1] < 2 || dims[2] < 2)
    throw Error(ErrorKind::InvalidInput,
                c.id() + ": input 'field' is " + describe_grid(grid) + "; every dimension must be at least 2");
  const std::int64_t V = dims[0] * dims[1] * dims[2];
  c.load(c.pool());
  Context::Reservation res;
  res.shapes = {{{1, 2, dims[0], dims[1], dims[2]}}};
  // y, x, l (2 channels each), the cropped field and mask; the output and the full-grid field.
  res.wrapper_fixed = 8 * V * 8 + 2 * grid.voxels() * 8 + DipoleOp::bytes(dims) + 2 * V * 4 + V * 8 + 8192;
  // No graph reads y, x, l, the cropped field and mask or D's kernel, nor the inputs.
  res.parks = true;
  res.wrapper_parkable = {2 * V * 8, 2 * V * 8, 2 * V * 8, V * 8, V * 8, (dims[0] / 2 + 1) * dims[1] * dims[2] * 8};
  c.reserve(res);
  c.stage("prepare");
  const Volume mask_c = crop_box(*c.in.mask, keep);
  const Volume* mask = &mask_c;
  const Volume phi = crop_box(field_ppm(c.in), keep);
  DipoleOp d(dims, vox, b0_direction(c.in, grid), KernelOptions::lpcnn_modl());
  Volume y = Volume::zeros(dims, grid.geometry(), 2), x = Volume::zeros(dims, grid.geometry(), 2),
         l = Volume::zeros(dims, grid.geometry(), 2);
  const Context::Parked parked[] = {c.park_while_running(y.storage()),      c.park_while_running(x.storage()),
                                    c.park_while_running(l.storage()),      c.park_while_running(phi.storage()),
                                    c.park_while_running(mask_c.storage()), c.park_while_running(d.kernel_storage())};
  modl_adjoint(d, phi.values(), span_of(y, 0), span_of(y, 1));
  for (double& v : y.values()) v *= kModlAlpha;
  c.stage("iterations");
  for (int i = 0; i < 3; ++i) {
    modl_step(d, kModlAlpha, y.frame(0), y.frame(1), x.frame(0), x.frame(1), i, span_of(l, 0), span_of(l, 1));
    Tensor t = f32_tensor({1, 2, dims[0], dims[1], dims[2]});
    for (int ch = 0; ch < 2; ++ch)
      tiling::pack_box(
          l.frame(ch).data(), dims, {{0, 0, 0}, dims}, tiling::kXYZ, tiling::Fill::Zero, t.data<float>() + ch * V,
          [&](double v, std::int64_t k) { return inside(mask, k) ? (v - kModlMean[ch]) / kModlStd[ch] : 0.0; });
    std::vector<Tensor> o = c.run_model(0, {t});
    for (int ch = 0; ch < 2; ++ch)
      tiling::unpack_box(o.at(0).data<float>() + ch * V, dims, {{0, 0, 0}, dims}, tiling::kXYZ, {{0, 0, 0}, dims},
                         [&](std::int64_t k, double v, std::int64_t) {
                           // Masked, then de-normalised (model/MoDL_QSM.py define_generator):
                           // outside the mask the state is the training mean, which the next
                           // step's dipole convolution carries inside (#19).
                           x.frame(ch)[static_cast<std::size_t>(k)] =
                               (inside(mask, k) ? v : 0.0) * kModlStd[ch] + kModlMean[ch];
                         });
    c.progress((i + 1) / 3.0, "iterations");
  }
  Volume out = make_like(grid);
  for (std::int64_t k = 0; k < dims[2]; ++k)
    for (std::int64_t j = 0; j < dims[1]; ++j)
      for (std::int64_t i = 0; i < dims[0]; ++i)
        if (inside(mask, i + dims[0] * (j + dims[1] * k)))
          out.at(keep.origin[0] + i, keep.origin[1] + j, keep.origin[2] + k) = x.at(i, j, k, 0);
  add_output(c, "chi", "ppm", std::move(out));
}

namespace {

// NeXtQSM's buffers on its frame of N voxels, as reserve() counts them (networks/context.h).
Context::Reservation nextqsm_reservation(const Context& c, const Shape& shape, const Dims3& frame) {
  const std::int64_t N = frame[0] * frame[1] * frame[2], V = c.in.field->voxels();
  const std::int64_t kernel = DipoleOp::kernel_bytes(frame), fft = DipoleOp::fft_bytes(frame);
  const std::int64_t fft_real = N * 8 + 64;
  Context::Reservation res;
  res.shapes = {{shape}, {shape}};
  // Held through the graph runs: the padded mask (a byte a voxel), bf (floats: the background
  // network's output times 0 or 1, so exact), x (doubles), D's kernel and a run's input
  // (floats; its output is the run's own). Only between the runs (issue #16: they do not sit
  // beside a run's activations): each step's FFT buffers with the VJP's output they are read
  // beside (released before the next run), then χ.
  res.wrapper_fixed = N + N * 4 + N * 8 + kernel + N * 4 + 8192;
  res.wrapper_between = std::max(V * 8, fft + N * 4) + 4096;
  // Before the first run, beside the inputs: the mask, the first input and the field in ppm.
  res.wrapper_prepare = N + N * 4 + FieldPpm::own_bytes(c.in) + 8192;
  // No graph reads the mask, bf, x or D's kernel: they may wait in the spill directory while
  // one runs (with the inputs, which nothing reads after "prepare").
  res.parks = true;
  res.wrapper_parkable = {N, N * 4, N * 8, kernel - 64};
  res.inputs_read_in_prepare = true;
  // Or between the runs too: then a step holds at most the FFT's two buffers beside D's kernel,
  // or its real one (the data term) beside x, the VJP's output and the mask as it updates x.
  res.wrapper_between_parked = std::max({fft + kernel, fft_real + N * 8 + N * 4 + N, N * 8 + N + V * 8}) + 8192;
  return res;
}

// The padded mask into `mpad` (a byte a voxel) and the masked field in ppm into `t`, on the
// frame: through a tensor of the frame (row-major) and back into a column-major frame.
void pack_nextqsm_input(const Context& c, const Box& frame, std::uint8_t* mpad, Tensor& t) {
  const Volume* mask = c.in.mask;
  const Dims3 dims = c.in.field->dims();
  const Box all{{0, 0, 0}, frame.size};
  const FieldPpm f(c.in);
  tiling::pack_box(f.data(), dims, frame, tiling::kXYZ, tiling::Fill::Zero, t.data<float>(),
                   [&](double, std::int64_t k) { return inside(mask, k) ? 1.0 : 0.0; });
  tiling::unpack_box(t.data<float>(), frame.size, all, tiling::kXYZ, all,
                     [&](std::int64_t k, double v, std::int64_t) { mpad[k] = v != 0.0 ? 1 : 0; });
  tiling::pack_box(f.data(), dims, frame, tiling::kXYZ, tiling::Fill::Zero, t.data<float>(),
                   [&](double v, std::int64_t k) { return inside(mask, k) ? v : 0.0; });
}

// NeXtQSM's blocks held across its graph runs, and the guards that send them away (parked
// around each graph run, or, under the tightest budgets, between the runs too: then each is
// back only for the steps that read it).
struct NextqsmBlocks {
  Volume& x;
  std::span<const float> bf;
  const std::uint8_t* mpad;
  Context::Parked &x_away, &kernel_away, &bf_away, &mask_away;

  void all_away() {
    for (Context::Parked* p : {&mask_away, &kernel_away, &bf_away, &x_away}) p->away();
  }

  // One gradient step on the VJP's output: the data term D(D·x − bf) in D's FFT buffer, then
  // the update as the VJP is read (grad_r = VJP/N: no gradient volume is held).
  void gradient_step(Context& c, DipoleOp& d, double lambda, const Tensor& vjp) {
    const Buffer* vjp_block = vjp.storage();
    QSM_ASSERT(vjp_block != nullptr, "a graph output that is not a block of its own");
    Context::Parked vjp_away = c.away_between_runs(*vjp_block);
    vjp_away.away();
    x_away.back();
    d.load(x.data());
    x_away.away();
    kernel_away.back();
    d.convolve();
    d.release_spectrum();
    bf_away.back();
    const double lambda_scale = lambda * nextqsm_residual(d, bf);
    bf_away.away();
    d.convolve();
    d.release_spectrum();
    kernel_away.away();
    x_away.back();
    vjp_away.back();
    mask_away.back();
    const double* dt = d.buffer();
    const Dims3& frame = x.dims();
    const Box all{{0, 0, 0}, frame};
    const double n = static_cast<double>(x.voxels());
    tiling::unpack_box(vjp.data<float>(), frame, all, tiling::kXYZ, all, [&](std::int64_t k, double v, std::int64_t) {
      x.data()[k] = nextqsm_update(x.data()[k], lambda_scale, dt[k], v / n, mpad[k]);
    });
    d.release();
  }
};

}  // namespace

void run_nextqsm(Context& c) {
  const Volume& grid = *c.in.field;
  const Dims3 dims = grid.dims();
  ignore_tile(c);
  // The odd padding voxel goes before the volume, as NeXtQSM's authors centre it (#19 item 6).
  const Box frame = tiling::pad_frame(dims, {1, 1, 1}, tiling::PadRule::CentredCeil, input_shape(c, dims));
  const std::int64_t N = frame.voxels();
  const Shape shape{1, 1, frame.size[0], frame.size[1], frame.size[2]};
  c.load(c.pool());
  c.reserve(nextqsm_reservation(c, shape, frame.size), {0, 1});
  axial_check(c, grid);
  c.stage("prepare");
  Buffer mpad_bytes(static_cast<std::size_t>(N), MemCategory::Other);
  auto* mpad = reinterpret_cast<std::uint8_t*>(mpad_bytes.data());
  Context::Parked parked_mask = c.park_while_running(mpad_bytes);
  const Box all{{0, 0, 0}, frame.size};
  Tensor t = f32_tensor(shape);
  pack_nextqsm_input(c, frame, mpad, t);
  c.done_with_inputs();
  // D is made once the field's ppm copy is gone: the inputs are not parked before.
  const Vec3 b = c.in.b0_dir ? *c.in.b0_dir : b0_dir_from_affine(grid.affine());  // used as given (not renormalised)
  DipoleOp d(frame.size, grid.voxel_mm(), b, KernelOptions::nextqsm());
  Context::Parked parked_kernel = c.park_while_running(d.kernel_storage());
  // Where the run keeps these away between the graph runs too, each comes back only for the
  // steps that read it (else away and back do nothing: they park around each graph run).
  parked_mask.away();
  parked_kernel.away();
  c.stage("background");
  Buffer bf_bytes(static_cast<std::size_t>(N) * sizeof(float), MemCategory::Other);
  const std::span<float> bf(reinterpret_cast<float*>(bf_bytes.data()), static_cast<std::size_t>(N));
  Context::Parked parked_bf = c.park_while_running(bf_bytes);
  parked_bf.away();
  Volume x = Volume::zeros(frame.size, grid.geometry());
  Context::Parked parked_x = c.park_while_running(x.storage());
  NextqsmBlocks blocks{x, bf, mpad, parked_x, parked_kernel, parked_bf, parked_mask};
  blocks.all_away();
  {
    std::vector<Tensor> o = c.run_model(0, {t});
    t = Tensor();
    parked_mask.back();
    parked_bf.back();
    tiling::unpack_box(o.at(0).data<float>(), frame.size, all, tiling::kXYZ, all,
                       [&](std::int64_t k, double v, std::int64_t) {
                         bf[static_cast<std::size_t>(k)] = static_cast<float>(v) * static_cast<float>(mpad[k]);
                       });
  }
  parked_mask.away();
  parked_x.back();
  std::copy(bf.begin(), bf.end(), x.values().begin());
  c.stage("iterations");
  const int iters = static_cast<int>(std::size(kNextqsmLambdas));
  for (int i = 0; i < iters; ++i) {
    std::vector<Tensor> o;
    {
      Tensor t = f32_tensor(shape);  // a run's input, made for it (the step between holds none)
      tiling::pack_box(x.data(), frame.size, all, tiling::kXYZ, tiling::Fill::Zero, t.data<float>());
      blocks.all_away();
      o = c.run_model(1, {t});
    }
    blocks.gradient_step(c, d, kNextqsmLambdas[i], o.at(0));
    c.progress((i + 1) / static_cast<double>(iters), "iterations");
  }
  Volume out = make_like(grid);
  for (std::int64_t k = 0; k < dims[2]; ++k)
    for (std::int64_t j = 0; j < dims[1]; ++j)
      for (std::int64_t i = 0; i < dims[0]; ++i)
        out.at(i, j, k) = x.at(i - frame.origin[0], j - frame.origin[1], k - frame.origin[2]);
  add_output(c, "chi", "ppm", std::move(out));
}

}  // namespace qsmcore::networks
