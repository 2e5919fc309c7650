#pragma once
// The preview of a JPEG straight on libjpeg (issue 26): decoded at a reduced DCT scale (1/8 of
// a 1 MP photo for 16 px), averaged down to the preview's size while the rows are read, its
// EXIF orientation applied to the few pixels left, encoded at Q 40 with optimized Huffman
// tables. The same steps as libvips' thumbnail_buffer takes with its defaults (shrink-on-load
// leaving at least a factor of two for the final reduction, no colour profile imported or
// exported, orientation applied, grey expanded to sRGB), without libvips' per-operation
// machinery, which cost more than the decode itself on a 16 px preview (docs/performance.md,
// "Image functions").
//
// Only the common case is handled here: a baseline or progressive JPEG in YCbCr, RGB or grey
// that is shrunk, decoded without a single libjpeg warning. Anything else (CMYK and YCCK, an
// image smaller than the preview, a truncated or damaged file) returns nothing and the caller
// uses libvips, which gives such files the answers and messages they always had. Private to
// compute.cpp; the caller has checked the format and the pixel limit.

#include <optional>
#include <string_view>

#include "gost/images/compute.hpp"

namespace gost::images::detail {

/// The preview of a JPEG's `bytes` fitting `side` × `side`, turned by EXIF `orientation`
/// (1..8) as displayed; nothing when it is not this path's case.
std::optional<encoded> jpeg_preview(std::string_view bytes, int side, int orientation);

} // namespace gost::images::detail
