// A tiny bitmap font (5×7 glyphs, two rows more for descenders) for the labels of PNG figures (io/png_preview.h):
// libpng writes pixels and text chunks but draws no text, and a font library (FreeType) with a font file would be a
// dependency for a few dozen characters. Printable ASCII letters, digits and common punctuation;
// anything else is drawn as '?'. The glyphs are our own, drawn for this file.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace qsmcore::io {

inline constexpr int kGlyphWidth = 5, kGlyphHeight = 7;
/// Rows below the baseline that g, j, p, q, y and the comma reach into.
inline constexpr int kGlyphDescent = 2;
/// Horizontal advance of one character in font pixels (the glyph and one blank column).
inline constexpr int kGlyphAdvance = kGlyphWidth + 1;

/// An 8-bit grey image, row-major, top row first.
struct GreyImage {
  std::int64_t width = 0, height = 0;
  std::vector<std::uint8_t> grey;
  void fill(std::int64_t x, std::int64_t y, std::int64_t w, std::int64_t h, std::uint8_t value);
  void set(std::int64_t x, std::int64_t y, std::uint8_t value) {
    if (x >= 0 && y >= 0 && x < width && y < height) grey[static_cast<std::size_t>(y * width + x)] = value;
  }
};

/// Width in image pixels of `text` drawn at `scale` (each font pixel a scale × scale square).
std::int64_t text_width(std::string_view text, int scale);
/// Height in image pixels of one line at `scale`.
inline std::int64_t text_height(int scale) {
  return static_cast<std::int64_t>(kGlyphHeight) * scale;
}

/// Draws `text` with its top-left corner at (x, y) in `value`; pixels outside the image are
/// skipped.
void draw_text(GreyImage& img, std::int64_t x, std::int64_t y, std::string_view text, int scale,
               std::uint8_t value = 255);

}  // namespace qsmcore::io
