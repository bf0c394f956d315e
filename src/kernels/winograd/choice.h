// Which algorithm a 3×3×3 convolution gets on the oneDNN backend (issue #50): oneDNN's direct
// convolution or the native Winograd F(2³, 3³) (conv3d_winograd.h), chosen per layer from a
// table of measured Winograd / direct times (choice.cpp), never by timing at plan time, so that a
// plan is the same each time it is built. Opt-in for now (QSM_CONV_ALGO=auto or winograd;
// direct when unset). Auto's weights are packed through the pack cache (counted, not packed, in
// a dry build for a budget check), a residency unit's prediction counts what its Winograd kernel
// derives while packing, and chain slabs stay on even planes so a budget's finer slabs give the
// same bits. What the whole suite run with auto (2026-12-07) still failed: the tests of the
// registry's memory table (measured with direct plans: the tiled runs' host estimates, native
// and Python, under-predict by ~2 %). (SpillBudgetTiles failed too: a tile named from the whole
// volume's per-voxel cost did not fit, Winograd's scratch costing a small patch more a voxel;
// auto-tiling now takes the smaller tile that tile's refusal names, run_network.cpp.)
//
// Why the choice looks at the channels only, not at the volume: Winograd packs transformed
// weights, 64/27 = 2.4x the direct ones, for each layer it takes. A choice by volume took deep
// layers only once their planes were large, so a plan's weights grew with the volume and the
// registry's line of fixed + per-voxel bytes, fitted at 32³-64³, fell below the plans of larger
// volumes (measured 2026-12-06: 13 of 21 networks 6-74 % steeper per voxel, HD-BET's plan 129.6
// MiB at 64x64x32 and 166.6 at 64³). With the set of Winograd layers fixed by the network, the
// weights are a constant and the line holds at every volume. The price: a layer whose plane is
// tiny (8³ and below) may run on Winograd where direct is faster; those layers take a small
// share of a network's time.
//
// Why at most kAutoMaxChannels: in a U-Net the channels double per level as the voxels drop
// eight-fold, so the 256- and 512-channel levels hold most of the weights for little of the
// time; Winograd there would more than double a plan's resident weights for a few per cent.
#pragma once
#include <cstdint>
#include <string>

namespace qsmcore::kernels::winograd {

enum class ConvAlgo { Direct, Winograd };
/// What QSM_CONV_ALGO asks for: Direct (unset or "direct": oneDNN's direct convolution
/// everywhere), Auto ("auto": per layer by the table) or Winograd wherever it fits ("winograd").
enum class ConvAlgoMode { Auto, Direct, Winograd };

/// QSM_CONV_ALGO, read on each call; an unknown value throws InvalidInput naming it.
ConvAlgoMode conv_algo_mode();

/// Winograd's time over direct's predicted for a 3×3×3 stride-1 conv of c → m channels over
/// `voxels` output voxels on an AVX-512 CPU: the measured layer nearest in (log c, log m, log
/// voxels), as measured (choice.cpp's table).
double predicted_winograd_ratio(std::int64_t c, std::int64_t m, std::int64_t voxels);

/// The algorithm for a conv of c → m channels whose geometry winograd_fits() (the caller checks).
/// Auto takes Winograd where the table predicts it at most kWinogradMaxRatio of direct's time on
/// a kAutoReferenceSide³ plane, for layers of at most kAutoMaxChannels channels in and out, on a
/// CPU that runs oneDNN at AVX-512 (where the table was measured; elsewhere direct, unmeasured).
ConvAlgo choose_conv_algo(std::int64_t c, std::int64_t m, ConvAlgoMode mode);
/// choose_conv_algo with conv_algo_mode().
ConvAlgo choose_conv_algo(std::int64_t c, std::int64_t m);

/// The plane auto evaluates the table at: the size of the registry's measurement shapes and of
/// the tiled networks' patches (a layer's choice must not depend on the volume: see the top).
constexpr int kAutoReferenceSide = 64;
/// Auto's channel cap (see the top).
constexpr std::int64_t kAutoMaxChannels = 128;

/// A margin against the noise of the measurements (a shared 2-core machine): Winograd only where
/// predicted at least 15 % faster.
constexpr double kWinogradMaxRatio = 0.85;

/// "winograd" or "direct".
std::string to_string(ConvAlgo a);

}  // namespace qsmcore::kernels::winograd
