// The inversions' building blocks against independent oracles: LSMR's and LSQR's k-th iterates
// against the minimisers that define them (solved densely here), the half-spectrum tables against
// physics.h's kernel and the Laplacian stencil applied to Fourier modes, the forward differences
// against their adjoint identity, and one step of the compact ADMM splitting against the
// textbook z/u update.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "inversion/gradient_split.h"
#include "inversion/kspace.h"
#include "inversion/lsmr.h"
#include "inversion_util.h"
#include "physics/fft.h"
#include "physics/pcg.h"

namespace qsmcore::inversion {
namespace {

using Mat = std::vector<std::vector<double>>;

// Solves the small dense system M y = r (Gaussian elimination with partial pivoting).
std::vector<double> solve(Mat M, std::vector<double> r) {
  const std::size_t n = r.size();
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t p = c;
    for (std::size_t q = c + 1; q < n; ++q)
      if (std::abs(M[q][c]) > std::abs(M[p][c])) p = q;
    std::swap(M[c], M[p]);
    std::swap(r[c], r[p]);
    for (std::size_t q = c + 1; q < n; ++q) {
      const double f = M[q][c] / M[c][c];
      for (std::size_t k = c; k < n; ++k) M[q][k] -= f * M[c][k];
      r[q] -= f * r[c];
    }
  }
  std::vector<double> y(n);
  for (std::size_t c = n; c-- > 0;) {
    double s = r[c];
    for (std::size_t k = c + 1; k < n; ++k) s -= M[c][k] * y[k];
    y[c] = s / M[c][c];
  }
  return y;
}

struct Dense {
  std::size_t m, n;
  Mat a;
  std::vector<double> b;
  std::vector<double> mul(const std::vector<double>& x) const {
    std::vector<double> y(m, 0.0);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) y[i] += a[i][j] * x[j];
    return y;
  }
  std::vector<double> mul_t(const std::vector<double>& y) const {
    std::vector<double> x(n, 0.0);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) x[j] += a[i][j] * y[i];
    return x;
  }
};

Dense random_problem(std::size_t m, std::size_t n, std::uint64_t seed) {
  physics::Pcg32 rng(seed);
  Dense d{m, n, Mat(m, std::vector<double>(n)), std::vector<double>(m)};
  for (auto& row : d.a)
    for (double& v : row) v = rng.normal();
  for (std::size_t j = 0; j < n; ++j) d.a[j][j] += 3.0;  // well conditioned enough for f32
  for (double& v : d.b) v = rng.normal();
  return d;
}

LinearOperator as_operator(const Dense& d) {
  LinearOperator A;
  A.m = static_cast<std::int64_t>(d.m);
  A.n = static_cast<std::int64_t>(d.n);
  A.a_step = [&d](const float* v, double alpha, float* u) {
    const auto y = d.mul(std::vector<double>(v, v + d.n));
    for (std::size_t i = 0; i < d.m; ++i) u[i] = static_cast<float>(y[i] - alpha * u[i]);
  };
  A.at_step = [&d](const float* u, double beta, float* v) {
    const auto x = d.mul_t(std::vector<double>(u, u + d.m));
    for (std::size_t j = 0; j < d.n; ++j) v[j] = static_cast<float>(x[j] - beta * v[j]);
  };
  const auto norm = [](std::size_t len) {
    return [len](const float* a) {
      double s = 0.0;
      for (std::size_t q = 0; q < len; ++q) s += double(a[q]) * a[q];
      return std::sqrt(s);
    };
  };
  A.norm_u = norm(d.m);
  A.norm_v = norm(d.n);
  return A;
}

AccountedArray<float> as_array(const std::vector<double>& v) {
  AccountedArray<float> a(v.size());
  for (std::size_t q = 0; q < v.size(); ++q) a[q] = static_cast<float>(v[q]);
  return a;
}

// The Krylov basis K_k(AᵀA, Aᵀb) and, over it, the minimiser of ‖B(b − Ax)‖ for B = I (LSQR) or
// B = Aᵀ (LSMR): both are k×k least-squares problems, solved through their normal equations.
std::vector<double> krylov_minimiser(const Dense& d, int k, bool normal_residual) {
  std::vector<std::vector<double>> basis{d.mul_t(d.b)};
  for (int i = 1; i < k; ++i) basis.push_back(d.mul_t(d.mul(basis.back())));
  std::vector<std::vector<double>> cols;  // B·A·basis_i
  for (const auto& p : basis) cols.push_back(normal_residual ? d.mul_t(d.mul(p)) : d.mul(p));
  const std::vector<double> rhs = normal_residual ? d.mul_t(d.b) : d.b;
  Mat G(static_cast<std::size_t>(k), std::vector<double>(static_cast<std::size_t>(k)));
  std::vector<double> r(static_cast<std::size_t>(k));
  for (std::size_t i = 0; i < cols.size(); ++i) {
    for (std::size_t j = 0; j < cols.size(); ++j)
      for (std::size_t q = 0; q < cols[i].size(); ++q) G[i][j] += cols[i][q] * cols[j][q];
    for (std::size_t q = 0; q < cols[i].size(); ++q) r[i] += cols[i][q] * rhs[q];
  }
  const auto c = solve(G, r);
  std::vector<double> x(d.n, 0.0);
  for (std::size_t i = 0; i < basis.size(); ++i)
    for (std::size_t j = 0; j < d.n; ++j) x[j] += c[i] * basis[i][j];
  return x;
}

double rel_diff(const AccountedArray<float>& x, const std::vector<double>& ref) {
  double e = 0.0, n = 0.0;
  for (std::size_t q = 0; q < ref.size(); ++q) {
    e += (x[q] - ref[q]) * (x[q] - ref[q]);
    n += ref[q] * ref[q];
  }
  return std::sqrt(e / n);
}

TEST(Krylov, LsmrIteratesMinimiseTheNormalResidualOverTheKrylovSpace) {
  const Dense d = random_problem(30, 8, 7);
  const LinearOperator A = as_operator(d);
  for (int k : {1, 2, 3}) {
    KrylovOptions o;
    o.max_iterations = k;
    const KrylovResult r = lsmr(A, as_array(d.b), o);
    EXPECT_EQ(r.iterations, k);
    EXPECT_LT(rel_diff(r.x, krylov_minimiser(d, k, true)), 1e-4) << "iteration " << k;
  }
}

TEST(Krylov, LsqrIteratesMinimiseTheResidualOverTheKrylovSpace) {
  const Dense d = random_problem(30, 8, 8);
  const LinearOperator A = as_operator(d);
  for (int k : {1, 2, 3}) {
    KrylovOptions o;
    o.max_iterations = k;
    const KrylovResult r = lsqr(A, as_array(d.b), o);
    EXPECT_LT(rel_diff(r.x, krylov_minimiser(d, k, false)), 1e-4) << "iteration " << k;
  }
}

TEST(Krylov, BothReachTheLeastSquaresSolutionAndEstimateItsResidual) {
  const Dense d = random_problem(40, 10, 9);
  Mat G(d.n, std::vector<double>(d.n));  // AᵀA x = Aᵀb
  for (std::size_t i = 0; i < d.n; ++i)
    for (std::size_t j = 0; j < d.n; ++j)
      for (std::size_t q = 0; q < d.m; ++q) G[i][j] += d.a[q][i] * d.a[q][j];
  const std::vector<double> x_ls = solve(G, d.mul_t(d.b));
  const auto r_ls = d.mul(x_ls);
  double rr = 0.0, bb = 0.0;
  for (std::size_t q = 0; q < d.m; ++q) {
    rr += (d.b[q] - r_ls[q]) * (d.b[q] - r_ls[q]);
    bb += d.b[q] * d.b[q];
  }
  const LinearOperator A = as_operator(d);
  KrylovOptions o;
  o.max_iterations = 30;
  o.artol = 1e-6;
  for (bool use_lsmr : {true, false}) {
    const KrylovResult r = use_lsmr ? lsmr(A, as_array(d.b), o) : lsqr(A, as_array(d.b), o);
    EXPECT_LT(rel_diff(r.x, x_ls), 1e-4) << (use_lsmr ? "LSMR" : "LSQR");
    EXPECT_NEAR(r.residual, std::sqrt(rr / bb), 1e-4) << (use_lsmr ? "LSMR" : "LSQR");
    EXPECT_LT(r.iterations, 30) << "the normal-residual test stops it once converged";
  }
}

TEST(Krylov, StopsAtTheResidualTolerance) {
  const Dense d = random_problem(10, 10, 10);  // square, consistent: the residual reaches 0
  const LinearOperator A = as_operator(d);
  KrylovOptions o;
  o.max_iterations = 50;
  o.rtol = 1e-2;
  const KrylovResult r = lsqr(A, as_array(d.b), o);
  EXPECT_LE(r.residual, 1e-2);
  EXPECT_LT(r.iterations, 50);
}

TEST(SpectrumAxes, DipoleIsPhysicsKernelOnTheHalfSpectrum) {
  const Vec3 b{0.3, -0.2, 0.93}, vox{1.0, 1.2, 0.9};
  for (const Dims3& d : {Dims3{8, 7, 6}, Dims3{6, 6, 8}, Dims3{5, 9, 4}}) {
    const SpectrumAxes axes(d, vox, b);
    const DipoleKernel ref = make_kernel(d, vox, b, KernelOptions::lpcnn_modl());
    ASSERT_EQ(axes.count(), ref.count());
    for (std::int64_t k = 0; k < d[2]; ++k)
      for (std::int64_t j = 0; j < d[1]; ++j)
        for (std::int64_t i = 0; i < axes.half_nx(); ++i)
          ASSERT_NEAR(axes.dipole(i, j, k), ref.half(i, j, k), 1e-15) << i << "," << j << "," << k;
  }
}

TEST(SpectrumAxes, LaplacianIsTheStencilsEigenvalue) {
  // −Δ (7-point, voxel-scaled, periodic) applied to a Fourier mode gives the mode times L̂(m).
  const Dims3 d{10, 8, 6};
  const Vec3 vox{1.0, 0.8, 1.5};
  const SpectrumAxes axes(d, vox, {0, 0, 1});
  for (const auto& m : {std::array<std::int64_t, 3>{1, 0, 0}, {2, 3, 1}, {5, 4, 3}, {0, 7, 5}}) {
    const Volume v = qsmtest::fourier_mode(d, vox, m);
    for (std::int64_t k = 0; k < d[2]; ++k)
      for (std::int64_t j = 0; j < d[1]; ++j)
        for (std::int64_t i = 0; i < d[0]; ++i) {
          const auto at = [&](std::int64_t a, std::int64_t b, std::int64_t c) {
            return v.at((a + d[0]) % d[0], (b + d[1]) % d[1], (c + d[2]) % d[2]);
          };
          const double lap = (2 * at(i, j, k) - at(i - 1, j, k) - at(i + 1, j, k)) / (vox[0] * vox[0]) +
                             (2 * at(i, j, k) - at(i, j - 1, k) - at(i, j + 1, k)) / (vox[1] * vox[1]) +
                             (2 * at(i, j, k) - at(i, j, k - 1) - at(i, j, k + 1)) / (vox[2] * vox[2]);
          ASSERT_NEAR(lap, axes.laplacian(m[0], m[1], m[2]) * v.at(i, j, k), 1e-12);
        }
  }
}

TEST(SpectrumAxes, MultiplicityWeightsGiveParseval) {
  for (const Dims3& d : {Dims3{8, 5, 4}, Dims3{7, 6, 5}}) {
    physics::RealFft3<double> fft(d);
    physics::Pcg32 rng(3);
    double energy = 0.0;
    for (std::int64_t q = 0; q < fft.real_count(); ++q) {
      fft.real()[q] = rng.normal();
      energy += fft.real()[q] * fft.real()[q];
    }
    fft.forward();
    const SpectrumAxes axes(d, {1, 1, 1}, {0, 0, 1});
    double spectral = 0.0;
    for (std::int64_t q = 0; q < axes.count(); ++q)
      spectral += axes.multiplicity(q % axes.half_nx()) * std::norm(fft.spectrum()[q]);
    EXPECT_NEAR(spectral / static_cast<double>(fft.real_count()), energy, 1e-9 * energy);
  }
}

// The lengths themselves: physics' SmoothFftLength test.
TEST(FftGrid, TheGridIsTheVolumeRoundedUpToFastLengths) {
  EXPECT_EQ(inversion_fft_dims({181, 217, 181}), (Dims3{192, 224, 189}));
  InversionOptions none;
  none.pad = -1;
  EXPECT_EQ(inversion_fft_dims({181, 217, 181}, none), (Dims3{181, 217, 181}));
  InversionOptions some;
  some.pad = 10;
  EXPECT_EQ(inversion_fft_dims({64, 64, 64}, some), (Dims3{80, 75, 75}));
}

TEST(GradientSplit, DifferencesAndDivergenceAreAdjoint) {
  const Dims3 g{7, 6, 5};
  const Vec3 vox{1.0, 0.7, 1.3};
  const std::int64_t n = g[0] * g[1] * g[2];
  physics::Pcg32 rng(11);
  AccountedArray<float> x(static_cast<std::size_t>(n)), grad(static_cast<std::size_t>(3 * n)),
      div(static_cast<std::size_t>(n));
  GradientSplit gsplit{AccountedArray<float>(static_cast<std::size_t>(3 * n)), INFINITY, 0.0f};
  for (float& v : x) v = static_cast<float>(rng.normal());
  for (float& v : gsplit.w) v = static_cast<float>(rng.normal());
  gradient_step(g, vox, x.data(), 1.0f, 0.0f, grad.data());
  split_divergence(g, vox, gsplit, div.data());  // t = ∞: z − u = −w, so div = −∇ᵀw
  double lhs = 0.0, rhs = 0.0;
  for (std::int64_t q = 0; q < 3 * n; ++q) lhs += double(grad[q]) * gsplit.w[q];
  for (std::int64_t q = 0; q < n; ++q) rhs -= double(x[q]) * div[q];
  EXPECT_NEAR(lhs, rhs, 1e-4 * std::abs(lhs));
  // And the forward difference itself, at an interior voxel and across the periodic edge.
  const auto at = [&](std::int64_t i, std::int64_t j, std::int64_t k) { return x[i + g[0] * (j + g[1] * k)]; };
  EXPECT_FLOAT_EQ(grad[2 + g[0] * (3 + g[1] * 1)], (at(3, 3, 1) - at(2, 3, 1)) / 1.0f);
  EXPECT_FLOAT_EQ(grad[n + 2 + g[0] * (5 + g[1] * 1)], (at(2, 0, 1) - at(2, 5, 1)) / 0.7f);
}

TEST(GradientSplit, OneStepIsTheTextbookZUUpdate) {
  // State: u = s·clip(w, t), z − u = shrink(w, t) − clip(w, t). After an x-update the textbook
  // ADMM does z' = soft(∇x' + u, t'), u' = u + ∇x' − z'; the split keeps w' = ∇x' + u.
  const Dims3 g{6, 5, 4};
  const Vec3 vox{1.0, 1.0, 2.0};
  const std::int64_t n = g[0] * g[1] * g[2];
  physics::Pcg32 rng(12);
  const float t = 0.4f, s = 0.2f, t_new = 0.3f;
  GradientSplit split{AccountedArray<float>(static_cast<std::size_t>(3 * n)), t, s};
  AccountedArray<float> x(static_cast<std::size_t>(n)), x_new(static_cast<std::size_t>(n));
  for (float& v : split.w) v = static_cast<float>(rng.normal());
  for (float& v : x) v = static_cast<float>(rng.normal());
  for (float& v : x_new) v = static_cast<float>(rng.normal());
  const auto soft = [](double v, double th) { return v > th ? v - th : v < -th ? v + th : 0.0; };
  std::vector<double> u(static_cast<std::size_t>(3 * n)), zmu(static_cast<std::size_t>(3 * n));
  for (std::int64_t q = 0; q < 3 * n; ++q) {
    const double w = split.w[q], c = std::clamp(w, -double(t), double(t));
    u[q] = s * c;
    zmu[q] = soft(w, t) - c;
  }
  // The divergence of z − u, against the adjoint of gradient_step.
  AccountedArray<float> div(static_cast<std::size_t>(n)), grad(static_cast<std::size_t>(3 * n));
  split_divergence(g, vox, split, div.data());
  gradient_step(g, vox, x_new.data(), 1.0f, 0.0f, grad.data());
  double lhs = 0.0, rhs = 0.0;
  for (std::int64_t q = 0; q < 3 * n; ++q) lhs += grad[q] * zmu[q];
  for (std::int64_t q = 0; q < n; ++q) rhs += double(x_new[q]) * div[q];
  EXPECT_NEAR(lhs, rhs, 1e-4 * std::abs(lhs));
  // The update.
  double change = 0.0, norm = 0.0, primal = 0.0;
  for (std::int64_t q = 0; q < n; ++q) {
    change += (double(x_new[q]) - x[q]) * (double(x_new[q]) - x[q]);
    norm += double(x_new[q]) * x_new[q];
    double r2 = 0.0;
    for (int a = 0; a < 3; ++a) {
      const double z = soft(grad[q + a * n] + u[q + a * n], t_new);
      r2 += (grad[q + a * n] - z) * (grad[q + a * n] - z);
    }
    primal += std::sqrt(r2);
  }
  const SplitSums sums = update_split(g, vox, x_new.data(), x.data(), split, true, t_new);
  EXPECT_NEAR(sums.change2, change, 1e-5 * change);
  EXPECT_NEAR(sums.norm2, norm, 1e-5 * norm);
  EXPECT_NEAR(sums.primal, primal, 1e-4 * primal);
  for (std::int64_t q = 0; q < n; ++q) ASSERT_EQ(x[q], x_new[q]);
  for (std::int64_t q = 0; q < 3 * n; ++q) {
    const double w_new = grad[q] + u[q];
    ASSERT_NEAR(split.w[q], w_new, 1e-5 * (1 + std::abs(w_new)));
    // z' and u' as the textbook has them, from the kept w'.
    const double z = soft(w_new, t_new), u_new = u[q] + grad[q] - z;
    ASSERT_NEAR(split.w[q] - std::clamp(double(split.w[q]), -double(t_new), double(t_new)), z, 1e-5);
    ASSERT_NEAR(std::clamp(double(split.w[q]), -double(t_new), double(t_new)), u_new, 1e-5);
  }
}

}  // namespace
}  // namespace qsmcore::inversion
