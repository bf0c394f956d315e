// The data-consistency algebra of the unrolled networks (models.md §5): the dipole operator
// D·v = real(ifft(D̂·fft(v))) in f64 on the network's grid, and the per-iteration updates of
// LPCNN, MoDL-QSM and NeXtQSM written as plain functions so tests can check them against a
// direct computation.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "physics/fft.h"
#include "qsmcore/physics.h"

namespace qsmcore::networks {

class DipoleOp {
 public:
  DipoleOp(const Dims3& dims, const Vec3& voxel_mm, const Vec3& b0_dir, const KernelOptions& o);
  const Dims3& dims() const { return dims_; }
  std::int64_t count() const { return dims_[0] * dims_[1] * dims_[2]; }
  /// out = D·in (column-major, `dims`); in and out may alias. Its three steps follow, for a
  /// caller that pages its own buffers between them (NeXtQSM under a budget).
  void apply(const double* in, double* out);
  /// The FFT's real buffer (buffer()) = in.
  void load(const double* in);
  /// buffer() = D·buffer(): the spectrum is made for it (after a release_spectrum()).
  void convolve();
  /// Frees the FFT's spectrum until the next convolve, keeping buffer()'s contents.
  void release_spectrum() {
    if (fft_) fft_->release_spectrum();
  }
  /// out = F⁻¹(D² · F(in)) in one pass (in and out may alias): LPCNN's dk·dk, which differs from
  /// two passes of apply() on the Nyquist planes of even grids, where D(−k) ≠ D(k).
  void apply_squared(const double* in, double* out);
  /// Bytes of its buffers (FFT real + half spectrum + the kernels of D and D²), for budgets.
  static std::int64_t bytes(const Dims3& dims);
  /// Of those, the FFT's (real + half spectrum): made by the first apply after a release().
  static std::int64_t fft_bytes(const Dims3& dims);
  /// Of those, D's kernel: held from construction (D² is made only by apply_squared).
  static std::int64_t kernel_bytes(const Dims3& dims);
  /// The FFT's real buffer (count() doubles; made if released): room a caller may use between
  /// applies, and pass to apply() as its input or output.
  double* buffer();
  /// Frees the FFT's buffers and D² until the next apply (an unrolled network's graph runs
  /// while they are not needed: NeXtQSM's budget counts them between its runs only).
  void release();
  /// D's kernel's block, held from construction (to park while a graph runs: spill/parking.h).
  const Buffer& kernel_storage() const { return kernel_.storage(); }

 private:
  Dims3 dims_;
  DipoleKernel kernel_;
  DipoleKernel kernel_squared_;  // built by the first apply_squared
  Vec3 voxel_mm_, b0_dir_;
  KernelOptions options_;
  std::unique_ptr<physics::RealFft3<double>> fft_;
};

// LPCNN (α, μ, σ of models.md §5).
inline constexpr double kLpcnnAlpha = 3.718820571899414;
inline constexpr double kLpcnnMean = -0.00024724603240382513;
inline constexpr double kLpcnnStd = 0.028365555003933052;
/// The proximal input of iteration i: x_est = α·D(y) at i = 0, else den + x_est − α·D(D(den)).
/// `x_est` = α·D(y) (precomputed); `den` is the previous iteration's de-normalised output.
void lpcnn_step(DipoleOp& d, double alpha, std::span<const double> x_est, std::span<const double> den, int i,
                std::span<double> p);

// MoDL-QSM.
inline constexpr double kModlAlpha = 1.101906418800354;
inline constexpr double kModlMean[2] = {-0.0022565326653420925, -0.0004852914426010102};
inline constexpr double kModlStd[2] = {0.026074999943375587, 0.004082275088876486};
/// Aᴴ(φ) = [D(φ), φ] into two channels (c0, c1).
void modl_adjoint(DipoleOp& d, std::span<const double> phi, std::span<double> c0, std::span<double> c1);
/// A(χ) = D(χ₀) + χ₁.
void modl_forward(DipoleOp& d, std::span<const double> x0, std::span<const double> x1, std::span<double> out);
/// Layer input of iteration i: y at i = 0, else x − α·Aᴴ(A(x)) + y (two channels each).
void modl_step(DipoleOp& d, double alpha, std::span<const double> y0, std::span<const double> y1,
               std::span<const double> x0, std::span<const double> x1, int i, std::span<double> out0,
               std::span<double> out1);

// NeXtQSM.
inline constexpr double kNextqsmLambdas[6] = {15.141516, 15.005543, 16.733437, 14.574243, 7.072418, 0.7588475};
/// One gradient step: dx = D(x); u = bf − dx; scale = 100/(‖bf‖·‖u‖) (0 if either is 0);
/// x ← (x − (λ·scale·D(dx − bf) + grad_r))·mask, with grad_r = VJP(x)/N already divided.
/// bf is the background network's output (masked): floats, held as such.
void nextqsm_step(DipoleOp& d, double lambda, std::span<const float> bf, std::span<const double> grad_r,
                  std::span<const double> mask, std::span<double> x);
/// The step's data term, so a caller can apply the update as it reads grad_r: D(dx − bf) into
/// d.buffer(), and returns scale. In steps: d.load(x); d.convolve(); nextqsm_residual; d.convolve().
double nextqsm_data_term(DipoleOp& d, std::span<const float> bf, std::span<const double> x);
/// With d.buffer() = D·x: scale, and d.buffer() = D·x − bf.
double nextqsm_residual(DipoleOp& d, std::span<const float> bf);
/// The step's update of one voxel: `lambda_scale` = λ·scale, `t` = D(dx − bf) there.
inline double nextqsm_update(double x, double lambda_scale, double t, double grad_r, double mask) {
  return (x - (lambda_scale * t + grad_r)) * mask;
}

}  // namespace qsmcore::networks
