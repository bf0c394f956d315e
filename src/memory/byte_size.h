// Byte sizes as users write them: "2GiB", "500MB", "1.5G", "123456". Shared by the qsm command
// (--mem-budget) and the library's --residency parser, so both accept exactly the same text.
#pragma once
#include <cstdint>
#include <string>

namespace qsmcore::memory {

inline constexpr std::int64_t kMiB = std::int64_t{1} << 20;

/// Decimal units (kB, KB, MB, GB, TB: powers of 1000), binary units (KiB, MiB, GiB, TiB, and the
/// bare K, M, G, T that SLURM's --mem uses, plus k: powers of 1024), B or nothing for bytes; a
/// fractional number is allowed (rounded up). Throws Error{InvalidInput} naming `what` and the text.
std::uint64_t parse_byte_size(const std::string& text, const std::string& what);

}  // namespace qsmcore::memory
