// Which algorithm a 3×3×3 convolution gets on the oneDNN backend (issue #50): oneDNN's direct
// convolution or the native Winograd F(2³, 3³) (conv3d_winograd.h), chosen per layer from a
// table of measured Winograd / direct times (choice.cpp), never by timing at plan time, so that a
// plan is the same each time it is built. Opt-in for now: QSM_CONV_ALGO=auto|winograd (direct
// when unset; see conv_algo_mode).
#pragma once
#include <cstdint>
#include <string>

namespace qsmcore::kernels::winograd {

enum class ConvAlgo { Direct, Winograd };
/// What QSM_CONV_ALGO asks for: Direct (unset or "direct": the default until the measured memory
/// tables are regenerated with Winograd's packed weights), Auto ("auto": per layer by the table),
/// or Winograd wherever it fits.
enum class ConvAlgoMode { Auto, Direct, Winograd };

/// QSM_CONV_ALGO, read on each call; an unknown value throws InvalidInput naming it.
ConvAlgoMode conv_algo_mode();

/// Winograd's time over direct's predicted for a 3×3×3 stride-1 conv of c → m channels over
/// `voxels` output voxels on an AVX-512 CPU: the measured layer nearest in (log c, log m, log
/// voxels), as measured (choice.cpp's table).
double predicted_winograd_ratio(std::int64_t c, std::int64_t m, std::int64_t voxels);

/// The algorithm for a conv whose geometry winograd_fits() (the caller checks): Auto takes
/// Winograd where the table predicts it at most kWinogradMaxRatio of direct's time and the CPU
/// runs oneDNN at AVX-512 (where the table was measured; elsewhere direct, unmeasured).
ConvAlgo choose_conv_algo(std::int64_t c, std::int64_t m, std::int64_t voxels, ConvAlgoMode mode);
/// choose_conv_algo with conv_algo_mode().
ConvAlgo choose_conv_algo(std::int64_t c, std::int64_t m, std::int64_t voxels);

/// A margin against the noise of the measurements (a shared 2-core machine): Winograd only where
/// predicted at least 15 % faster.
constexpr double kWinogradMaxRatio = 0.85;

/// "winograd" or "direct".
std::string to_string(ConvAlgo a);

}  // namespace qsmcore::kernels::winograd
