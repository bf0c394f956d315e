// The per-layer choice between oneDNN's direct convolution and the native Winograd F(2³, 3³): a
// nearest-neighbour cost model over measured layers. Why a table rather than an autotune at plan
// time: timing inside plan building would make two builds of one plan differ (and a plan is
// rebuilt per weight unit under residency), and it would cost seconds per layer at 128³.
#include "kernels/winograd/choice.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>

#include "qsmcore/error.h"

namespace qsmcore::kernels::winograd {
namespace {

struct Measured {
  int c, m, side;  // channels in, out; a cube of side³ output voxels
  double ratio;    // Winograd / direct time: the mean of best-time ratio and median pair ratio
};

// Measured 2026-12-06 with bench/conv_winograd.sh (2 threads, best of 3 alternating runs, conv +
// bias + ReLU) on this project's AVX-512 EPYC (oneDNN brgconv:avx512_core against
// qsm:winograd_f2_3d(avx512)+brg:avx512_core). Winograd loses below 16 channels (its transforms
// dominate) and on 8³ volumes (too few tiles per block), wins ~2× from 32 channels on.
constexpr Measured kTable[] = {
    {1, 32, 64, 4.81},     {4, 4, 64, 3.88},     {8, 8, 64, 2.99},     {16, 16, 64, 0.99},   {16, 32, 64, 0.785},
    {32, 16, 64, 0.81},    {32, 32, 64, 0.625},  {64, 32, 64, 0.585},  {64, 64, 64, 0.53},   {16, 16, 32, 6.3},
    {32, 32, 32, 0.68},    {64, 64, 32, 0.49},   {128, 64, 32, 0.48},  {128, 128, 32, 0.50}, {256, 128, 16, 0.48},
    {256, 256, 16, 0.625}, {512, 256, 8, 1.0},   {512, 512, 8, 1.215}, {16, 16, 128, 0.94},  {32, 32, 128, 0.685},
    {64, 32, 128, 0.48},   {96, 32, 128, 0.565},
};

double lg(double v) {
  return std::log2(std::max(v, 1.0));
}

}  // namespace

ConvAlgoMode conv_algo_mode() {
  // Unset means direct for now: what auto still lacks is listed in choice.h.
  const char* e = std::getenv("QSM_CONV_ALGO");
  if (e == nullptr || *e == '\0' || std::string(e) == "direct") return ConvAlgoMode::Direct;
  if (std::string(e) == "auto") return ConvAlgoMode::Auto;
  if (std::string(e) == "winograd") return ConvAlgoMode::Winograd;
  throw Error(ErrorKind::InvalidInput, std::string("QSM_CONV_ALGO='") + e + "': expected direct, auto or winograd");
}

double predicted_winograd_ratio(std::int64_t c, std::int64_t m, std::int64_t voxels) {
  // Distances in octaves of each: a factor 2 in channels weighs as much as one in the side.
  const double lc = lg(static_cast<double>(c)), lm = lg(static_cast<double>(m));
  const double ls = lg(std::cbrt(static_cast<double>(voxels)));
  double best = INFINITY, ratio = 1.0;
  for (const Measured& t : kTable) {
    const double dc = lc - lg(t.c), dm = lm - lg(t.m), ds = ls - lg(t.side);
    const double dist = dc * dc + dm * dm + ds * ds;
    if (dist < best) best = dist, ratio = t.ratio;
  }
  return ratio;
}

ConvAlgo choose_conv_algo(std::int64_t c, std::int64_t m, ConvAlgoMode mode) {
  if (mode == ConvAlgoMode::Direct) return ConvAlgo::Direct;
  if (mode == ConvAlgoMode::Winograd) return ConvAlgo::Winograd;
  // The table holds AVX-512 measurements: at a lower ISA (or ONEDNN_MAX_CPU_ISA capping it),
  // direct until measured there. Asked at run time: the build assumes no ISA.
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  if ((isa & avx512) != avx512) return ConvAlgo::Direct;
  if (std::max(c, m) > kAutoMaxChannels) return ConvAlgo::Direct;
  const double side = kAutoReferenceSide;
  return predicted_winograd_ratio(c, m, static_cast<std::int64_t>(side * side * side)) <= kWinogradMaxRatio
             ? ConvAlgo::Winograd
             : ConvAlgo::Direct;
}

ConvAlgo choose_conv_algo(std::int64_t c, std::int64_t m) {
  return choose_conv_algo(c, m, conv_algo_mode());
}

std::string to_string(ConvAlgo a) {
  return a == ConvAlgo::Winograd ? "winograd" : "direct";
}

}  // namespace qsmcore::kernels::winograd
