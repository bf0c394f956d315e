// Byte sizes as users write them on the command line: "2GiB", "500MB", "1.5G", "123456".
#pragma once
#include <cstdint>
#include <string>

namespace qsmcore::cli {

/// Decimal units (kB, MB, GB, TB: powers of 1000), binary units (KiB, MiB, GiB, TiB, and the
/// bare K, M, G, T that SLURM's --mem uses: powers of 1024), B or nothing for bytes; a
/// fractional number is allowed. Throws Error{InvalidInput} naming `what` and the text.
std::int64_t parse_byte_size(const std::string& text, const std::string& what);

/// "1.23 GiB"-style text for a byte count.
std::string format_bytes(std::int64_t bytes);

}  // namespace qsmcore::cli
