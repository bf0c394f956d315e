// The registry: every network qsmcore knows, in the reference's order (models.md §1.1–1.4).
// The facts are mirrored in registry_facts.tsv, which the tests compare against this table, so
// an edit here must be made there too (and the other way round).
#include <algorithm>
#include <array>

#include "models/measured_memory.h"
#include "models/measured_wasm_tiles.h"
#include "qsmcore/error.h"
#include "qsmcore/models.h"

namespace qsmcore {
namespace {

// String-literal concatenation keeps each URL a compile-time constant; the tests check that
// it agrees with kModelHostingBaseUrl.
#define QSM_HOSTED(file) "https://huggingface.co/qsmxt/qsm-onnx-weights/resolve/main/" file

using sv = std::string_view;

// Logical inputs and outputs, shared where networks agree.
constexpr sv kField[] = {"field"};
constexpr sv kFieldMask[] = {"field", "mask"};
constexpr sv kFieldMaskBvec[] = {"field", "mask", "b_vec"};
constexpr sv kIqsmInputs[] = {"phase", "mask", "te", "b0", "border"};
constexpr sv kIqsmPlusInputs[] = {"phase", "mask", "te", "b0", "z_prjs", "border"};
constexpr sv kSusepInputs[] = {"qsm", "r2prime", "lfs"};
constexpr sv kChiSepInputs[] = {"local_field", "qsm", "r2prime"};
constexpr sv kR2star[] = {"r2star"};
constexpr sv kImage[] = {"image"};
constexpr sv kInput[] = {"input"};
constexpr sv kChi[] = {"chi"};
constexpr sv kLocalField[] = {"local_field"};
constexpr sv kLocalfield[] = {"localfield"};  // iQFM's graph spells it so
constexpr sv kChiPosNeg[] = {"chi_pos", "chi_neg"};
constexpr sv kR2prime[] = {"r2prime"};
constexpr sv kLogits[] = {"logits"};
constexpr sv kUnetPrediction[] = {"unet_prediction"};

// The tables below are laid out by hand, one network per block, so that they read as tables.
// clang-format off
constexpr WeightFile kBfrnetFiles[] = {
    {"bfrnet.onnx", QSM_HOSTED("bfrnet.onnx"),
     "6f693f0a02c94550179c4b5188ce652fc4bd8198ff57aaddd102fba67fe873d7", 79'600'612}};
constexpr WeightFile kXqsmFiles[] = {
    {"xqsm.onnx", QSM_HOSTED("xqsm.onnx"),
     "81854ec2ca85bba25c2f9aae05efdcac299d0efffb03fe6a0e6797019e46b487", 20'901'826}};
constexpr WeightFile kQsmnetFiles[] = {
    {"qsmnet.onnx", QSM_HOSTED("qsmnet.onnx"),
     "8fd1d79b7a9258a262a2faab9e8469757ae7735f3da6212e431acfb207c21b54", 397'801'854}};
constexpr WeightFile kQsmnetPlusFiles[] = {
    {"qsmnet-plus.onnx", QSM_HOSTED("qsmnet-plus.onnx"),
     "0ed31f9a1b66f75fee4a96022b6bc3838b91bc5b819714dade5ca87cd331683d", 397'801'854}};
constexpr WeightFile kQsmganFiles[] = {
    {"qsmgan.onnx", QSM_HOSTED("qsmgan.onnx"),
     "238573a6fa8a563004fc28e63a30694289d1a1a204f3c406daba486b1122d604", 10'753'955}};
constexpr WeightFile kLpcnnFiles[] = {
    {"lpcnn.onnx", QSM_HOSTED("lpcnn.onnx"),
     "831f2a161f6ab8ee7bf64cc2dd8bca532fc971d0083cf5729d6302d3ed31625d", 1'790'869}};
constexpr WeightFile kIr2qsmFiles[] = {
    {"ir2qsm.onnx", QSM_HOSTED("ir2qsm.onnx"),
     "dcaf7a26d6633900f339f94be16d580ccea6147bbf6da26eacb9a5e1acdc0c53", 40'259'354}};
constexpr WeightFile kAutoqsmFiles[] = {
    {"autoqsm.onnx", QSM_HOSTED("autoqsm.onnx"),
     "c2f23c6ae735fd1677e8623da22cb6f25b4a932ae50ba1ef08a75439e240977e", 5'609'662}};
constexpr WeightFile kIqsmFiles[] = {
    {"iqsm.onnx", QSM_HOSTED("iqsm.onnx"),
     "8538a33892a877812e6cd0e22927a5040827c126e9347073d3dd0934bf226b09", 17'233'763}};
constexpr WeightFile kIqsmPlusFiles[] = {
    {"iqsm-plus.onnx", QSM_HOSTED("iqsm-plus.onnx"),
     "f93a4c83804759a4a0d24603f7754efb997ddd2ba5e3a0346ed6493725cafb1d", 17'740'526}};
constexpr WeightFile kIqfmFiles[] = {
    {"iqfm.onnx", QSM_HOSTED("iqfm.onnx"),
     "81965f4c0981612d979977c9618847e4cb1d340efa287b8dde894bdea5bf6ac9", 17'233'763}};
// The order is part of the contract: the background-removal net first, the VJP net second.
constexpr WeightFile kNextqsmFiles[] = {
    {"nextqsm-bf.onnx", QSM_HOSTED("nextqsm-bf.onnx"),
     "d0f0b0391153f8e5e07ef85d46fbe492afc8394fab008350540a6868d0b4a3ba", 113'211'474},
    {"nextqsm-vjp.onnx", QSM_HOSTED("nextqsm-vjp.onnx"),
     "50fe388663c05b1d3996139975270e500e13feb025f1b792576dbc0da814a4bc", 42'437'407}};
constexpr WeightFile kModlFiles[] = {
    {"modl-qsm.onnx", QSM_HOSTED("modl-qsm.onnx"),
     "1f8da7d39eaaa4c3f0f9e67298fba5f14230e769cfd6349c81d0b74a6f800c57", 1'794'143}};
constexpr WeightFile kSusepFiles[] = {
    {"susep-net.onnx", QSM_HOSTED("susep-net.onnx"),
     "9bc85aa28451fda2c661de4b8fae8604ced7a54f028f94ed33629f6111a48b03", 205'743'584}};
constexpr WeightFile kR2primenetFiles[] = {
    {"r2primenet.onnx", QSM_HOSTED("r2primenet.onnx"),
     "44cb5e67d1c68dae87a5f532e501dc0d4bf627d91f9c8ba35a56df5ac7ec3cd0", 90'307'128}};
// The hash of the graph with its spatial axes re-declared dynamic; the fixed-shape original of
// the same size hashed 4f2343649cf36b4c9b371fc732da600720060bf2e76ed845578f16fe3411b3f2.
constexpr WeightFile kChiSepnetFiles[] = {
    {"chi-sepnet.onnx", QSM_HOSTED("chi-sepnet.onnx"),
     "5b442fdfdb88f50ec9149b384dabd0d2d9adb6983947d9cfa58382b78676bed9", 90'314'172}};
constexpr WeightFile kHdBetFiles[] = {
    {"hd-bet.onnx", QSM_HOSTED("hd-bet.onnx"),
     "f15200f9a0697cf53b151e316a0c4fe2cacfdbe2220deb36cb56184be4a227f9", 123'168'028}};
// Known but not hosted: a user's copy in $QSM_MODEL_DIR is still checked against this hash.
constexpr WeightFile kRs2NetFiles[] = {
    {"rs2-net.onnx", "", "a120ce43b06a9f3ddecf85bf18f281cbb54c354ef15b34a6bcaaffa4e3c4a570",
     63'456'162}};
constexpr WeightFile kSynthsegFiles[] = {
    {"synthseg.onnx", QSM_HOSTED("synthseg.onnx"),
     "c2821a74e8a03d4073896b5c2e359b3ef86f9776bacd78e00da1c757aa97bbcc", 52'998'326}};
// Its weights come with FreeSurfer or the UCL download; nothing is known about the file.
constexpr WeightFile kSynthseg2Files[] = {{"synthseg-2.0.onnx", "", "", 0}};

// qsmcore's own network, trained here on synthetic data only (tools/train, models/qsmcore-invnet.md):
// it ships in the repository, so it is never downloaded. Size and hash: tools/train/export.py.
constexpr WeightFile kInvnetFiles[] = {
    {"qsmcore-invnet.onnx", "", "6cee5b8743bb987432ab68406c8c531db949aa3204887b6e05b3fd83c29e602f", 1'366'544,
     true}};

// clang-format on
#undef QSM_HOSTED

// Attaches the measured memory, if the measurement table has the network, and a tiled network's
// tile figures: the native tile cost from that table, and the seed's tile_bytes_per_voxel (wasm32)
// and the whole tiled run's wasm32 figures from the wasm32 tile table.
// (A loop, not find_measured_memory()'s pointer: GCC's -fsanitize=undefined instruments pointer
// null checks, which then no longer evaluate at compile time.)
constexpr ModelSpec measured(ModelSpec spec) {
  for (const auto& row : models_detail::kMeasuredMemory) {
    if (row.id != spec.id) continue;
    spec.memory = row.memory;
    if (spec.tiled && row.native_tile) {
      spec.native_tile_bytes_per_voxel = row.native_tile->bytes_per_voxel;
      spec.native_tile_fixed_bytes = row.native_tile->fixed_bytes;
      spec.native_tile_small = row.native_tile->small;
    }
  }
  for (const auto& row : models_detail::kMeasuredWasmTiles)
    if (spec.tiled && row.id == spec.id) {
      spec.tile_bytes_per_voxel = row.bytes_per_voxel;
      if (row.run.tile_bytes_per_voxel > 0) spec.wasm_tiled_run = row.run;
    }
  return spec;
}

constexpr std::array<std::uint32_t, 3> cube(std::uint32_t m) {
  return {m, m, m};
}

using enum ModelStage;
using enum WeightStatus;
using enum Framework;

// Padding notes (pad_multiple vs size_divisor, models.md §1.4): LPCNN's whole-volume wrapper
// does not pad; MoDL assumes even dimensions but pads nothing; AutoQSM runs a fixed patch;
// iQSM/iQFM pad to 16; χ-sepnet's windows are multiples of 16; HD-BET pads (z, y, x) to
// (16, 32, 32).
// clang-format off
constexpr ModelSpec kModels[] = {
    measured({.id = "bfrnet", .name = "BFRnet", .stage = BackgroundRemoval, .status = Available,
              .origin = Matlab,
              .description = "Background field removal: a 3-D octave-convolution U-Net that "
                             "predicts the background field from the total field",
              .paper = "Kames et al. / Sun group",
              .source = "https://github.com/sunhongfu/BFRnet", .license = "",
              .files = kBfrnetFiles, .inputs = kField, .outputs = kLocalField,
              .size_divisor = 8, .pad_multiple = cube(8)}),
    measured({.id = "xqsm", .name = "xQSM", .stage = DipoleInversion, .status = Available,
              .origin = PyTorch,
              .description = "Dipole inversion with an octave-convolution U-Net and a global "
                             "learned residual",
              .paper = "Gao et al., NMR Biomed 2021; doi:10.1002/nbm.4461",
              .source = "https://github.com/sunhongfu/xQSM", .license = "",
              .files = kXqsmFiles, .inputs = kField, .outputs = kChi, .size_divisor = 8,
              .pad_multiple = cube(8), .tiled = true}),
    measured({.id = "qsmnet", .name = "QSMnet", .stage = DipoleInversion, .status = Available,
              .origin = TensorFlow,
              .description = "Dipole inversion with a 3-D U-Net trained on COSMOS maps",
              .paper = "Yoon et al., NeuroImage 2018; doi:10.1016/j.neuroimage.2018.06.030",
              .source = "https://github.com/SNU-LIST/QSMnet", .license = "",
              .files = kQsmnetFiles, .inputs = kField, .outputs = kChi, .size_divisor = 16,
              .pad_multiple = cube(16), .tiled = true}),
    measured({.id = "qsmnet-plus", .name = "QSMnet+", .stage = DipoleInversion,
              .status = Available, .origin = TensorFlow,
              .description = "QSMnet trained with data augmentation for a wider range of "
                             "susceptibility values",
              .paper = "Jung et al., NeuroImage 2020; doi:10.1016/j.neuroimage.2020.116579",
              .source = "https://github.com/SNU-LIST/QSMnet", .license = "",
              .files = kQsmnetPlusFiles, .inputs = kField, .outputs = kChi,
              .size_divisor = 16, .pad_multiple = cube(16), .tiled = true}),
    measured({.id = "qsmgan", .name = "QSMGAN", .stage = DipoleInversion, .status = Available,
              .origin = PyTorch,
              .description = "Dipole inversion with a WGAN-GP-trained 3-D U-Net generator on "
                             "fixed 64^3 patches",
              .paper = "Chen et al., NeuroImage 2020; doi:10.1016/j.neuroimage.2019.116389",
              .source = "https://github.com/mmorri10/QSMGAN-LupoLab", .license = "MIT (fork)",
              .files = kQsmganFiles, .inputs = kField, .outputs = kChi, .size_divisor = 8,
              .pad_multiple = cube(8)}),
    measured({.id = "lpcnn", .name = "LPCNN", .stage = DipoleInversion, .status = Available,
              .origin = PyTorch,
              .description = "Learned proximal network: three unrolled gradient steps with a "
                             "CNN prior",
              .paper = "Lai et al., MICCAI 2020; doi:10.1007/978-3-030-59713-9_13",
              .source = "https://github.com/Sulam-Group/LPCNN", .license = "",
              .files = kLpcnnFiles, .inputs = kFieldMaskBvec, .outputs = kChi,
              .size_divisor = 8, .pad_multiple = cube(1)}),
    measured({.id = "ir2qsm", .name = "IR2QSM", .stage = DipoleInversion, .status = Available,
              .origin = PyTorch,
              .description = "Dipole inversion with a U-net unrolled four times with reverse "
                             "concatenations and a recurrent middle",
              .paper = "Li et al., Med. Phys. 2025; doi:10.1002/mp.17747; arXiv:2406.12300",
              .source = "https://github.com/YangGaoUQ/IR2QSM", .license = "",
              .files = kIr2qsmFiles, .inputs = kFieldMask, .outputs = kChi,
              .size_divisor = 8, .pad_multiple = cube(8), .tiled = true}),
    measured({.id = "autoqsm", .name = "AutoQSM", .stage = SingleStep, .status = Available,
              .origin = TensorFlow,
              .description = "Single-step QSM from the total field with a V-Net on fixed 64^3 "
                             "patches",
              .paper = "Wei et al., NeuroImage 2019; doi:10.1016/j.neuroimage.2019.116064",
              .source = "https://github.com/AMRI-Lab/AutoQSM", .license = "",
              .files = kAutoqsmFiles, .inputs = kField, .outputs = kChi, .size_divisor = 1,
              .pad_multiple = cube(1)}),
    measured({.id = "iqsm", .name = "iQSM", .stage = SingleStep, .status = Available,
              .origin = PyTorch,
              .description = "Single-step QSM from wrapped phase with a learnable-Laplacian "
                             "U-Net (LoT-Unet)",
              .paper = "Gao et al., NeuroImage 2022; doi:10.1016/j.neuroimage.2022.119410",
              .source = "https://github.com/sunhongfu/iQSM", .license = "",
              .files = kIqsmFiles, .inputs = kIqsmInputs, .outputs = kChi, .size_divisor = 8,
              .pad_multiple = cube(16)}),
    measured({.id = "iqsm-plus", .name = "iQSM+", .stage = SingleStep, .status = Available,
              .origin = PyTorch,
              .description = "iQSM with orientation-adaptive Laplacian blocks for any B0 "
                             "direction",
              .paper = "Gao et al., Med Image Anal 2024; doi:10.1016/j.media.2024.103160",
              .source = "https://github.com/sunhongfu/iQSM_Plus", .license = "",
              .files = kIqsmPlusFiles, .inputs = kIqsmPlusInputs, .outputs = kChi,
              .size_divisor = 16, .pad_multiple = cube(16)}),
    measured({.id = "iqfm", .name = "iQFM", .stage = PhaseToField, .status = Available,
              .origin = PyTorch,
              .description = "Local field from wrapped phase: the iQSM network trained for "
                             "the field",
              .paper = "Gao et al., NeuroImage 2022; doi:10.1016/j.neuroimage.2022.119410",
              .source = "https://github.com/sunhongfu/iQSM", .license = "",
              .files = kIqfmFiles, .inputs = kIqsmInputs, .outputs = kLocalfield,
              .size_divisor = 8, .pad_multiple = cube(16)}),
    measured({.id = "nextqsm", .name = "NeXtQSM", .stage = SingleStep, .status = Available,
              .origin = TensorFlow,
              .description = "Background removal network followed by a variational network "
                             "unrolled six times",
              .paper = "Cognolato et al., NeuroImage 2023; doi:10.1016/j.neuroimage.2022.119729",
              .source = "https://github.com/wayne1123/NeXtQSM", .license = "MIT",
              .files = kNextqsmFiles, .inputs = kFieldMaskBvec, .outputs = kChi,
              .size_divisor = 64, .pad_multiple = cube(64)}),
    measured({.id = "modl-qsm", .name = "MoDL-QSM", .stage = DipoleInversion,
              .status = Available, .origin = TensorFlow,
              .description = "Model-based deep learning: three unrolled steps on a two-channel "
                             "STI state",
              .paper = "Feng et al., NeuroImage 2021; doi:10.1016/j.neuroimage.2021.118376",
              .source = "https://github.com/Ruimin-Feng/MoDL-QSM", .license = "",
              .files = kModlFiles, .inputs = kFieldMaskBvec, .outputs = kChi,
              .size_divisor = 1, .pad_multiple = cube(1)}),
    measured({.id = "susep-net", .name = "SUSEP-Net", .stage = ChiSeparation,
              .status = Available, .origin = PyTorch,
              .description = "Susceptibility source separation with a dual-branch 3-D U-Net",
              .paper = "Li, Gao, Sun et al., arXiv:2506.13293 (2025)",
              .source = "https://github.com/YangGaoUQ/SUSEP-Net", .license = "",
              .files = kSusepFiles, .inputs = kSusepInputs, .outputs = kChiPosNeg,
              .size_divisor = 8, .pad_multiple = cube(8)}),
    measured({.id = "r2primenet", .name = "R2PRIMEnet", .stage = R2PrimeGeneration,
              .status = Available, .origin = Onnx,
              .description = "R2' from R2* at 3 T with a 3-D U-Net",
              .paper = "Kim et al., Hum Brain Mapp 2025; doi:10.1002/hbm.70136",
              .source = "https://github.com/SNU-LIST/chi_sepnet", .license = "",
              .files = kR2primenetFiles, .inputs = kR2star, .outputs = kR2prime,
              .size_divisor = 16, .pad_multiple = cube(16)}),
    measured({.id = "chi-sepnet", .name = "χ-sepnet", .stage = ChiSeparation,
              .status = Available, .origin = Onnx,
              .description = "Susceptibility source separation from QSM, local field and R2' "
                             "with a 3-D U-Net",
              .paper = "Kim et al. / SNU-LIST chi-separation toolbox",
              .source = "https://github.com/SNU-LIST/chi-separation", .license = "",
              .files = kChiSepnetFiles, .inputs = kChiSepInputs, .outputs = kChiPosNeg,
              .size_divisor = 8, .pad_multiple = cube(16)}),
    measured({.id = "hd-bet", .name = "HD-BET", .stage = BrainExtraction, .status = Available,
              .origin = PyTorch,
              .description = "Brain extraction with an nnU-Net v2 plain-convolution U-Net",
              .paper = "Isensee et al., Hum Brain Mapp 40(17):4952-4964 (2019); "
                       "doi:10.1002/hbm.24750",
              .source = "https://github.com/MIC-DKFZ/HD-BET", .license = "CC-BY-NC-4.0",
              .files = kHdBetFiles, .inputs = kImage, .outputs = kLogits, .size_divisor = 32,
              .pad_multiple = {16, 32, 32}}),
    measured({.id = "rs2-net", .name = "RS2-Net", .stage = BrainExtraction, .status = Pending,
              .origin = PyTorch,
              .description = "Rodent skull stripping with a Swin-UNETR on a fixed patch",
              .paper = "Lin et al., NeuroImage 298:120769 (2024); "
                       "doi:10.1016/j.neuroimage.2024.120769",
              .source = "https://github.com/VitoLin21/Rodent-Skull-Stripping",
              .license = "GPL-3.0", .files = kRs2NetFiles, .inputs = kInput,
              .outputs = kLogits, .size_divisor = 32, .pad_multiple = cube(32)}),
    measured({.id = "synthseg", .name = "SynthSeg 1.0", .stage = Segmentation,
              .status = Available, .origin = TensorFlow,
              .description = "Contrast-agnostic whole-brain segmentation into 32 labels",
              .paper = "Billot et al., Med Image Anal 86:102789 (2023); "
                       "doi:10.1016/j.media.2023.102789",
              .source = "https://github.com/BBillot/SynthSeg", .license = "Apache-2.0",
              .files = kSynthsegFiles, .inputs = kImage, .outputs = kUnetPrediction,
              .size_divisor = 32, .pad_multiple = cube(32)}),
    measured({.id = "synthseg-2.0", .name = "SynthSeg 2.0", .stage = Segmentation,
              .status = Pending, .origin = TensorFlow,
              .description = "Robust SynthSeg: segmentation into 33 labels",
              .paper = "Billot et al., PNAS 120(9):e2216399120 (2023); "
                       "doi:10.1073/pnas.2216399120",
              .source = "https://github.com/BBillot/SynthSeg", .license = "Apache-2.0",
              .files = kSynthseg2Files, .inputs = kImage, .outputs = kUnetPrediction,
              .size_divisor = 32, .pad_multiple = cube(32)}),
    measured({.id = "qsmcore-invnet", .name = "qsmcore InvNet", .stage = DipoleInversion,
              .status = Available, .origin = PyTorch,
              .description = "qsmcore's own dipole inversion, trained on synthetic heads: a compact "
                             "3-D U-Net that corrects a TKD estimate (B0 up to 35 deg off z)",
              .paper = "qsmcore model card, models/qsmcore-invnet.md", .source = "tools/train",
              .license = "same as qsmcore", .files = kInvnetFiles, .inputs = kFieldMask,
              .outputs = kChi, .size_divisor = 4, .pad_multiple = cube(4), .tiled = true}),
};
// clang-format on

// A measurement row for an id the registry does not have would be silently ignored.
constexpr bool every_measured_id_registered() {
  for (const auto& row : models_detail::kMeasuredMemory) {
    bool found = false;
    for (const ModelSpec& spec : kModels) found = found || spec.id == row.id;
    if (!found) return false;
  }
  return true;
}
static_assert(every_measured_id_registered(), "measured_memory.h names an unregistered model");

}  // namespace

std::span<const ModelSpec> all_models() {
  return kModels;
}

const ModelSpec* find_model(std::string_view id) {
  const auto it =
      std::find_if(std::begin(kModels), std::end(kModels), [id](const ModelSpec& spec) { return spec.id == id; });
  return it == std::end(kModels) ? nullptr : &*it;
}

const ModelSpec& require_model(std::string_view id) {
  if (const ModelSpec* spec = find_model(id)) return *spec;
  throw Error(ErrorKind::NotFound, "'" + std::string(id) + "' not in model registry");
}

}  // namespace qsmcore
