// LSMR and LSQR (see lsmr.h), written from the papers' algorithms (Fong & Saunders 2011, §2 and
// the ‖r‖ estimate of §3.2; Paige & Saunders 1982, §4), without damping. Vector updates run
// over max_threads() threads; every value is computed by one thread, so results do not depend
// on the thread count (the caller's norms must not either).
#include "inversion/lsmr.h"

#include <cmath>

#include "core/parallel.h"

namespace qsmcore::inversion {
namespace {

// a ← a·s.
void scale(AccountedArray<float>& a, double s) {
  const auto f = static_cast<float>(s);
  float* p = a.data();
  parallel_for(static_cast<std::int64_t>(a.size()), true, [&](std::int64_t q) { p[q] *= f; });
}

// a ← a/‖a‖ (when non-zero); returns ‖a‖.
double normalise(AccountedArray<float>& a, const std::function<double(const float*)>& norm) {
  const double n = norm(a.data());
  if (n > 0.0) scale(a, 1.0 / n);
  return n;
}

// The first Golub–Kahan step: β₁u₁ = b, α₁v₁ = Aᵀu₁.
struct Bidiag {
  AccountedArray<float> u, v;
  double alpha = 0.0, beta = 0.0;
};
Bidiag start(const LinearOperator& A, AccountedArray<float> b) {
  Bidiag g;
  g.u = std::move(b);
  g.beta = normalise(g.u, A.norm_u);
  g.v = AccountedArray<float>(static_cast<std::size_t>(A.n));
  A.at_step(g.u.data(), 0.0, g.v.data());
  g.alpha = normalise(g.v, A.norm_v);
  return g;
}
void advance(const LinearOperator& A, Bidiag& g) {
  A.a_step(g.v.data(), g.alpha, g.u.data());
  g.beta = normalise(g.u, A.norm_u);
  A.at_step(g.u.data(), g.beta, g.v.data());
  g.alpha = normalise(g.v, A.norm_v);
}

// LSMR's scalar recurrences (damp = 0) with the ‖r‖ estimate.
struct LsmrScalars {
  double alphabar, zetabar, rho = 1.0, rhobar = 1.0, cbar = 1.0, sbar = 0.0, zeta = 0.0;
  double betadd, betad = 0.0, rhodold = 1.0, tautildeold = 0.0, thetatilde = 0.0;
  double normA2, normb;
  // The vector updates' coefficients of this iteration: hbar ← h − ch·hbar, x ← x + cx·hbar, h ← v − chh·h.
  double c_hbar = 0.0, c_x = 0.0, c_h = 0.0;
  double normr = 0.0, normar = 0.0, normA = 0.0;

  LsmrScalars(double alpha, double beta)
      : alphabar(alpha), zetabar(alpha * beta), betadd(beta), normA2(alpha * alpha), normb(beta) {}

  void step(double alpha, double beta) {
    const double rhoold = rho, rhobarold = rhobar, zetaold = zeta;
    rho = std::hypot(alphabar, beta);
    const double c = alphabar / rho, s = beta / rho;
    const double thetanew = s * alpha;
    alphabar = c * alpha;
    const double thetabar = sbar * rho, rhotemp = cbar * rho;
    rhobar = std::hypot(rhotemp, thetanew);
    cbar = rhotemp / rhobar;
    sbar = thetanew / rhobar;
    zeta = cbar * zetabar;
    zetabar = -sbar * zetabar;
    c_hbar = thetabar * rho / (rhoold * rhobarold);
    c_x = zeta / (rho * rhobar);
    c_h = thetanew / rho;
    // ‖r‖ (Fong & Saunders §3.2, damp = 0).
    const double betahat = c * betadd;
    betadd = -s * betadd;
    const double thetatildeold = thetatilde, rhotildeold = std::hypot(rhodold, thetabar);
    const double ctildeold = rhodold / rhotildeold, stildeold = thetabar / rhotildeold;
    thetatilde = stildeold * rhobar;
    rhodold = ctildeold * rhobar;
    betad = -stildeold * betad + ctildeold * betahat;
    tautildeold = (zetaold - thetatildeold * tautildeold) / rhotildeold;
    const double taud = (zeta - thetatilde * tautildeold) / rhodold;
    normr = std::sqrt((betad - taud) * (betad - taud) + betadd * betadd);
    normA2 += beta * beta;
    normA = std::sqrt(normA2);
    normA2 += alpha * alpha;
    normar = std::abs(zetabar);
  }
};

bool converged(const KrylovOptions& o, double normr, double normb, double normA, double normar) {
  if (o.rtol > 0.0 && normr <= o.rtol * normb) return true;
  return o.artol > 0.0 && normar <= o.artol * normA * normr;
}

}  // namespace

KrylovResult lsmr(const LinearOperator& A, AccountedArray<float> b, const KrylovOptions& o) {
  Bidiag g = start(A, std::move(b));
  KrylovResult out;
  out.x = AccountedArray<float>(static_cast<std::size_t>(A.n));
  out.residual = g.beta > 0.0 ? 1.0 : 0.0;
  if (g.alpha * g.beta == 0.0) return out;
  AccountedArray<float> h(static_cast<std::size_t>(A.n)), hbar(static_cast<std::size_t>(A.n));
  std::copy(g.v.begin(), g.v.end(), h.begin());
  LsmrScalars sc(g.alpha, g.beta);
  for (int it = 1; it <= o.max_iterations; ++it) {
    advance(A, g);
    sc.step(g.alpha, g.beta);
    const auto ch = static_cast<float>(sc.c_hbar), cx = static_cast<float>(sc.c_x), chh = static_cast<float>(sc.c_h);
    float *x = out.x.data(), *hp = h.data(), *hb = hbar.data();
    const float* v = g.v.data();
    parallel_for(A.n, true, [&](std::int64_t q) {
      hb[q] = hp[q] - ch * hb[q];
      x[q] += cx * hb[q];
      hp[q] = v[q] - chh * hp[q];
    });
    out.iterations = it;
    out.residual = sc.normr / sc.normb;
    if (o.on_iteration) o.on_iteration(it);
    if (converged(o, sc.normr, sc.normb, sc.normA, sc.normar)) break;
  }
  return out;
}

KrylovResult lsqr(const LinearOperator& A, AccountedArray<float> b, const KrylovOptions& o) {
  Bidiag g = start(A, std::move(b));
  KrylovResult out;
  out.x = AccountedArray<float>(static_cast<std::size_t>(A.n));
  out.residual = g.beta > 0.0 ? 1.0 : 0.0;
  if (g.alpha * g.beta == 0.0) return out;
  AccountedArray<float> w(static_cast<std::size_t>(A.n));
  std::copy(g.v.begin(), g.v.end(), w.begin());
  const double normb = g.beta;
  double phibar = g.beta, rhobar = g.alpha, normA2 = 0.0;
  for (int it = 1; it <= o.max_iterations; ++it) {
    normA2 += g.alpha * g.alpha;
    advance(A, g);
    normA2 += g.beta * g.beta;
    const double rho = std::hypot(rhobar, g.beta), c = rhobar / rho, s = g.beta / rho;
    const double theta = s * g.alpha, phi = c * phibar;
    rhobar = -c * g.alpha;
    phibar = s * phibar;
    const auto t1 = static_cast<float>(phi / rho), t2 = static_cast<float>(-theta / rho);
    float *x = out.x.data(), *wp = w.data();
    const float* v = g.v.data();
    parallel_for(A.n, true, [&](std::int64_t q) {
      x[q] += t1 * wp[q];
      wp[q] = v[q] + t2 * wp[q];
    });
    out.iterations = it;
    out.residual = phibar / normb;
    if (o.on_iteration) o.on_iteration(it);
    const double normar = phibar * g.alpha * std::abs(c);
    if (converged(o, phibar, normb, std::sqrt(normA2), normar)) break;
  }
  return out;
}

}  // namespace qsmcore::inversion
