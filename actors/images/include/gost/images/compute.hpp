#pragma once
// What the image functions compute (seed 003, MISSION I1 and I8), as plain functions over an
// image's encoded bytes on libvips: no actor, no I/O, no cache. The pools call them; tests
// call them directly.
//
// Every function checks the image before decoding a pixel: the loader must be one of JPEG,
// PNG, WebP and GIF (the others libvips knows, SVG, PDF, TIFF, HEIF, ImageMagick's, are
// refused: more attack surface than a marketplace photo needs), and width × height must be
// within `image_limits::max_pixels` (a decompression bomb is refused from its header). A
// truncated or corrupt file fails instead of being decoded half grey. All these failures are
// final: the same bytes give the same answer, so the caller caches them as error statuses.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gost::images {

struct image_limits {
  /// Width × height above this is refused before decoding (`images.max_pixels`).
  uint64_t max_pixels = 40'000'000;
};

/// Why an image cannot be computed. Every kind is final for these bytes.
enum class image_error : uint8_t {
  not_an_image = 1,   ///< no loader recognises the bytes
  unsupported_format, ///< an image, but not JPEG, PNG, WebP or GIF
  too_many_pixels,    ///< width × height above the limit
  corrupt,            ///< recognised, but truncated or damaged
  bad_argument,       ///< an argument of the function is out of its range
};

const char* to_string(image_error e);

struct failure {
  image_error kind = image_error::corrupt;
  std::string message; ///< what was found, for the cached status and the log
};

/// A value, or why there is none.
template <class T>
struct outcome {
  std::optional<T> value;
  failure error;

  outcome(T v) : value(std::move(v)) {}       // NOLINT: implicit, as expected<T>
  outcome(failure f) : error(std::move(f)) {} // NOLINT
  explicit operator bool() const { return value.has_value(); }
  T& operator*() { return *value; }
  const T& operator*() const { return *value; }
  const T* operator->() const { return &*value; }
};

/// What the header says: read without decoding the pixels (`Ratio`).
struct header {
  int width = 0;
  int height = 0;
  std::string format; ///< jpeg, png, webp or gif
  /// The EXIF orientation (1..8; 1 upright, 6 turned 90° clockwise to display, 3 180°, 8 270°);
  /// 1 when the image has none. width and height are as stored, before it is applied.
  int orientation = 1;
  double ratio() const { return height > 0 ? static_cast<double>(width) / height : 0.0; }
};

struct rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const rgb& o) const { return r == o.r && g == o.g && b == o.b; }
};

/// An encoded image with its format and size (`Rotate`'s and `Preview`'s results).
struct encoded {
  std::string bytes;
  std::string format; ///< jpeg, png or webp (a GIF is rotated into a PNG)
  int width = 0;
  int height = 0;
};

/// Starts libvips once per process (idempotent, thread-safe): one thread per operation (the
/// pools give the parallelism) and no operation cache (it would keep images' buffers).
void init();

/// The header: width, height, format (the first frame of an animation).
outcome<header> probe(std::string_view bytes, const image_limits& limits = {});

/// The main colour: the image shrunk to at most 64 px a side (shrink-on-load), in sRGB, an
/// alpha channel flattened onto white; its pixels counted in 4,096 bins (4 bits a channel); the
/// mean of the pixels of the most populated bin (ties: the lower bin). A photo's dominant
/// colour, not its average: a red car on grey tarmac that covers most of it gives red.
outcome<rgb> main_color(std::string_view bytes, const image_limits& limits = {});

/// A tiny placeholder: the image as displayed (EXIF orientation applied) shrunk to at most
/// `side` px a side (aspect kept), as a JPEG of low quality (Q 40, optimized Huffman tables)
/// with no metadata: a few hundred bytes at 16 px. A JPEG is decoded at a reduced DCT scale
/// on libjpeg directly (src/jpeg_preview.hpp), the rest on libvips' thumbnail.
outcome<encoded> preview(std::string_view bytes, const image_limits& limits = {}, int side = 16);

/// The image as displayed (its EXIF orientation applied) turned clockwise by `degrees`
/// (-360..360): multiples of 90 exactly, other angles with the corners filled white. Encoded
/// in the source's format (a GIF as PNG).
outcome<encoded> rotate(std::string_view bytes, double degrees, const image_limits& limits = {});

} // namespace gost::images
