// The WebAssembly SIMD128 backend: kernels for the heavy ops on plain (NCDHW) layouts, written
// with <wasm_simd128.h>. Factories decline (nullptr) what they do not implement and the planner
// falls back to the reference kernel, so every op still runs.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>

#include "kernels/backend.h"

namespace qsmcore::kernels::wasm {

using MakeFn = std::unique_ptr<Kernel> (*)(const graph::TypedGraph& g, const graph::TNode& n);
using KernelTable = std::unordered_map<std::string, MakeFn>;

/// Each kernel file registers its ops here.
void register_conv_kernels(KernelTable& table);    // conv.cpp: Conv
void register_deconv_kernels(KernelTable& table);  // deconv.cpp: ConvTranspose
void register_pool_kernels(KernelTable& table);    // pool.cpp: MaxPool, AveragePool
void register_conv_chain_kernel(KernelTable& table);  // conv_chain.cpp: qsm.ConvChain
/// Whether conv_chain.cpp runs this chain node: its convs, sources and pooling as plane kernels.
bool can_run_conv_chain(const graph::TypedGraph& g, const graph::TNode& n);

/// ConvTranspose with overlapping windows and stride 2 along x (deconv_strided.cpp), or nullptr;
/// deconv.cpp's factory turns to it for what it declines.
std::unique_ptr<Kernel> make_strided_deconv(const graph::TypedGraph& g, const graph::TNode& n);

}  // namespace qsmcore::kernels::wasm
