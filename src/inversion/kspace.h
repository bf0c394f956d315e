// The k-space pieces every dipole inversion shares (methods.md §6.1): the FFT grid (the volume
// zero-padded to a fast size), per-axis tables from which the dipole kernel and the symbol of the
// finite-difference Laplacian are evaluated on FFTW's half spectrum, the kernel as an f32 table
// for the iterative methods, and moving the masked field into an FFT buffer and χ out of one.
#pragma once
#include <complex>
#include <cstdint>
#include <vector>

#include "core/accounted_array.h"
#include "core/parallel.h"
#include "physics/fft.h"
#include "qsmcore/volume.h"

namespace qsmcore::inversion {

/// Smallest size ≥ n whose prime factors are 2, 3, 5 and 7 (even when `even`): FFTW and the
/// portable FFT both run those without Bluestein. 181 (prime) → 192: 4.6× faster in f32.

/// The FFT grid for a volume of `dims`: each axis at least n + pad, rounded up to a fast size
/// (x even, for the real transform's half spectrum); pad < 0: the volume itself.
Dims3 fft_grid(const Dims3& dims, int pad);

/// Per-axis tables of a grid's half spectrum (x from 0 to nx/2, all of y and z).
class SpectrumAxes {
 public:
  SpectrumAxes(const Dims3& grid, const Vec3& voxel_mm, const Vec3& b0_dir);

  const Dims3& grid() const { return grid_; }
  std::int64_t half_nx() const { return grid_[0] / 2 + 1; }
  std::int64_t count() const { return half_nx() * grid_[1] * grid_[2]; }
  std::int64_t plane() const { return half_nx() * grid_[1]; }

  /// D = 1/3 − (k·b̂)²/|k|² with D(0) = 0, averaged with its value at the mirrored index as
  /// physics.h's make_kernel does (they differ on even sizes' Nyquist planes, for an oblique b̂),
  /// so that D times a real field's spectrum stays Hermitian.
  double dipole(std::int64_t i, std::int64_t j, std::int64_t k) const;
  /// The symbol of −Δ for the voxel-scaled 7-point stencil (∇ᵀ∇ of periodic forward differences):
  /// Σₐ (2 − 2cos(2π mₐ/Nₐ))/Δxₐ².
  double laplacian(std::int64_t i, std::int64_t j, std::int64_t k) const {
    return lx_[static_cast<std::size_t>(i)] + ly_[static_cast<std::size_t>(j)] + lz_[static_cast<std::size_t>(k)];
  }
  /// How often index i's value occurs in the full spectrum: 1 for x = 0 and an even nx's Nyquist
  /// plane, 2 elsewhere (its conjugate twin). Inner products of half spectra weighted by it are
  /// those of the full spectra, i.e. N times those of the real volumes (Parseval).
  double multiplicity(std::int64_t i) const { return (i == 0 || 2 * i == grid_[0]) ? 1.0 : 2.0; }

 private:
  Dims3 grid_;
  Vec3 b_;
  std::vector<double> fx_, fy_, fz_;     // frequency (1/mm) at each index (numpy's fftfreq)
  std::vector<double> fxm_, fym_, fzm_;  // frequency at the mirrored index (n − p) mod n
  std::vector<double> lx_, ly_, lz_;     // per-axis parts of the Laplacian's symbol
};

/// The kernel on the half spectrum in f32 (2 bytes per grid voxel), for methods that read it
/// every iteration.
AccountedArray<float> dipole_table(const SpectrumAxes& axes);

/// Runs f(k) for every z-plane of the half spectrum, over max_threads() threads.
template <class F>
void for_spectrum_planes(const SpectrumAxes& axes, F&& f) {
  parallel_for(axes.grid()[2], true, f);
}

/// fft.real() = field inside the mask (above 0.5), 0 outside it and in the padding.
void load_masked_field(physics::RealFft3<float>& fft, const Volume& field, const Volume& mask);

}  // namespace qsmcore::inversion
