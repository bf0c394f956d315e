// Dipole operator and unrolled updates (unroll.h).
#include "networks/unroll.h"

#include <cmath>
#include <vector>

#include "physics/spectral.h"

namespace qsmcore::networks {

DipoleOp::DipoleOp(const Dims3& dims, const Vec3& voxel_mm, const Vec3& b0_dir, const KernelOptions& o)
    : dims_(dims),
      kernel_(make_kernel(dims, voxel_mm, b0_dir, o)),
      voxel_mm_(voxel_mm),
      b0_dir_(b0_dir),
      options_(o) {}  // the FFT's buffers come with the first use

std::int64_t DipoleOp::fft_bytes(const Dims3& d) {
  const std::int64_t half = (d[0] / 2 + 1) * d[1] * d[2];
  return d[0] * d[1] * d[2] * 8 + half * 16 + 2 * std::int64_t{64};  // two 64-byte alignments
}

double* DipoleOp::buffer() {
  if (!fft_) fft_ = std::make_unique<physics::RealFft3<double>>(dims_);
  return fft_->real();
}

void DipoleOp::release() {
  fft_.reset();
  kernel_squared_ = DipoleKernel();
}

std::int64_t DipoleOp::kernel_bytes(const Dims3& d) {
  return (d[0] / 2 + 1) * d[1] * d[2] * 8 + std::int64_t{64};
}

std::int64_t DipoleOp::bytes(const Dims3& d) {
  const std::int64_t half = (d[0] / 2 + 1) * d[1] * d[2];
  return d[0] * d[1] * d[2] * 8 + half * 16 + 2 * half * 8 + 3 * std::int64_t{64};  // two kernels: D, D²
}

void DipoleOp::apply(const double* in, double* out) {
  load(in);
  convolve();
  const double* r = fft_->real();
  const std::int64_t n = count();
  for (std::int64_t i = 0; i < n; ++i) out[i] = r[i];
}

void DipoleOp::load(const double* in) {
  double* r = buffer();
  const std::int64_t n = count();
  for (std::int64_t i = 0; i < n; ++i) r[i] = in[i];
}

void DipoleOp::convolve() {
  buffer();
  fft_->forward();
  physics::multiply_spectrum(*fft_, kernel_, [](double k) { return k; });
  fft_->inverse();
}

void DipoleOp::apply_squared(const double* in, double* out) {
  double* r = buffer();
  const std::int64_t n = count();
  for (std::int64_t i = 0; i < n; ++i) r[i] = in[i];
  fft_->forward();
  if (kernel_squared_.count() == 0) {
    KernelOptions sq = options_;
    sq.squared = true;
    kernel_squared_ = make_kernel(dims_, voxel_mm_, b0_dir_, sq);
  }
  physics::multiply_spectrum(*fft_, kernel_squared_, [](double k) { return k; });
  fft_->inverse();
  for (std::int64_t i = 0; i < n; ++i) out[i] = r[i];
}

void lpcnn_step(DipoleOp& d, double alpha, std::span<const double> x_est, std::span<const double> den, int i,
                std::span<double> p) {
  if (i == 0) {
    std::copy(x_est.begin(), x_est.end(), p.begin());
    return;
  }
  // Sulam-Group/LPCNN lib/model/lpcnn/lpcnn.py forward: ifft(dk * dk * fft(den)), one pass (#19).
  d.apply_squared(den.data(), p.data());
  for (std::size_t k = 0; k < p.size(); ++k) p[k] = den[k] + x_est[k] - alpha * p[k];
}

void modl_adjoint(DipoleOp& d, std::span<const double> phi, std::span<double> c0, std::span<double> c1) {
  d.apply(phi.data(), c0.data());
  std::copy(phi.begin(), phi.end(), c1.begin());
}

void modl_forward(DipoleOp& d, std::span<const double> x0, std::span<const double> x1, std::span<double> out) {
  d.apply(x0.data(), out.data());
  for (std::size_t k = 0; k < out.size(); ++k) out[k] += x1[k];
}

void modl_step(DipoleOp& d, double alpha, std::span<const double> y0, std::span<const double> y1,
               std::span<const double> x0, std::span<const double> x1, int i, std::span<double> out0,
               std::span<double> out1) {
  if (i == 0) {
    std::copy(y0.begin(), y0.end(), out0.begin());
    std::copy(y1.begin(), y1.end(), out1.begin());
    return;
  }
  Buffer axb(x0.size() * sizeof(double), MemCategory::Other);
  std::span<double> ax(reinterpret_cast<double*>(axb.data()), x0.size());
  modl_forward(d, x0, x1, ax);
  // Aᴴ(A(x)) = [D(ax), ax]
  d.apply(ax.data(), out0.data());
  for (std::size_t k = 0; k < out0.size(); ++k) {
    out0[k] = x0[k] - alpha * out0[k] + y0[k];
    out1[k] = x1[k] - alpha * ax[k] + y1[k];
  }
}

double nextqsm_data_term(DipoleOp& d, std::span<const float> bf, std::span<const double> x) {
  // dx and dx − bf in the FFT's own buffer: the step holds no volume of its own.
  d.load(x.data());
  d.convolve();
  const double scale = nextqsm_residual(d, bf);
  d.convolve();
  return scale;
}

double nextqsm_residual(DipoleOp& d, std::span<const float> bf) {
  const std::size_t n = bf.size();
  double* t = d.buffer();
  double nbf = 0.0, nu = 0.0;
  for (std::size_t k = 0; k < n; ++k) {
    const double b = bf[k];  // in double, as the sums are
    nbf += b * b;
    const double u = b - t[k];
    nu += u * u;
    t[k] = t[k] - b;
  }
  nbf = std::sqrt(nbf);
  nu = std::sqrt(nu);
  return (nbf == 0.0 || nu == 0.0) ? 0.0 : 100.0 / (nbf * nu);
}

void nextqsm_step(DipoleOp& d, double lambda, std::span<const float> bf, std::span<const double> grad_r,
                  std::span<const double> mask, std::span<double> x) {
  const double scale = nextqsm_data_term(d, bf, x);
  const double* t = d.buffer();
  for (std::size_t k = 0; k < x.size(); ++k) x[k] = nextqsm_update(x[k], lambda * scale, t[k], grad_r[k], mask[k]);
}

}  // namespace qsmcore::networks
