// Measures this machine's FP32 peak: each thread runs 16 independent chains of vector FMAs
// (enough to cover the FMA latency on AVX2 and AVX-512), and the total FLOP count over time
// is the peak the conv benchmark is compared with. Build: g++ -O3 -march=native -fopenmp.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  constexpr int kChains = 16, kLanes = 16;
  const long iters = 20'000'000;
  omp_set_num_threads(threads);
  double sink = 0.0;
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel reduction(+ : sink)
  {
    float acc[kChains][kLanes];
    for (int c = 0; c < kChains; ++c)
      for (int l = 0; l < kLanes; ++l) acc[c][l] = 1.0f + 1e-3f * static_cast<float>(c + l + omp_get_thread_num());
    const float a = 0.999999f, b = 1e-7f;
    for (long i = 0; i < iters; ++i)
      for (int c = 0; c < kChains; ++c)
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) acc[c][l] = acc[c][l] * a + b;
    for (int c = 0; c < kChains; ++c)
      for (int l = 0; l < kLanes; ++l) sink += acc[c][l];
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double flops = 2.0 * kChains * kLanes * static_cast<double>(iters) * threads;
  std::printf("%.1f\n", flops / s / 1e9);
  return sink == 12345.0 ? 1 : 0;  // keep the result alive
}
