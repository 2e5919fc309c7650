#include "gost/images/compute.hpp"

#include <array>
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include <vips/vips8>

#include "jpeg_preview.hpp"

namespace gost::images {

const char* to_string(image_error e) {
  switch (e) {
    case image_error::not_an_image: return "not_an_image";
    case image_error::unsupported_format: return "unsupported_format";
    case image_error::too_many_pixels: return "too_many_pixels";
    case image_error::corrupt: return "corrupt";
    case image_error::bad_argument: return "bad_argument";
  }
  return "unknown";
}

namespace {

using vips::VError;
using vips::VImage;

/// The loaders accepted (by the class libvips picks for the bytes) and their format names.
struct accepted_format {
  const char* loader_prefix;
  const char* name;
};
constexpr std::array<accepted_format, 5> accepted{{
  {"VipsForeignLoadJpeg", "jpeg"},
  {"VipsForeignLoadPng", "png"},
  {"VipsForeignLoadWebp", "webp"},
  {"VipsForeignLoadNsgif", "gif"},
  {"VipsForeignLoadGif", "gif"},
}};

failure fail(image_error kind, std::string message) {
  return {kind, std::move(message)};
}

/// libvips' message on one line (it accumulates lines in a per-thread buffer: cleared here).
std::string vips_message(const VError& e) {
  std::string out = e.what();
  vips_error_clear();
  while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
    out.pop_back();
  for (auto& c : out)
    if (c == '\n')
      c = ';';
  return out;
}

/// The accepted format the bytes are in, or why they are not.
outcome<std::string> format_of(std::string_view bytes) {
  if (bytes.empty())
    return fail(image_error::not_an_image, "no bytes");
  const char* loader = vips_foreign_find_load_buffer(bytes.data(), bytes.size());
  if (loader == nullptr) {
    vips_error_clear();
    return fail(image_error::not_an_image,
                "no image format recognised in " + std::to_string(bytes.size()) + " bytes");
  }
  for (auto& f : accepted)
    if (std::strncmp(loader, f.loader_prefix, std::strlen(f.loader_prefix)) == 0)
      return std::string{f.name};
  return fail(image_error::unsupported_format, std::string{"format not accepted (loader "} + loader
                                                 + "); accepted: JPEG, PNG, WebP, GIF");
}

vips::VOption* load_options(VipsAccess access) {
  return VImage::option()->set("access", access)->set("fail_on", VIPS_FAIL_ON_TRUNCATED);
}

/// The header and the checks every function makes before decoding a pixel.
outcome<header> checked_header(std::string_view bytes, const image_limits& limits) {
  auto format = format_of(bytes);
  if (!format)
    return format.error;
  try {
    auto img =
      VImage::new_from_buffer(bytes.data(), bytes.size(), "", load_options(VIPS_ACCESS_SEQUENTIAL));
    header h{img.width(), img.height(), *format, vips_image_get_orientation(img.get_image())};
    auto pixels = static_cast<uint64_t>(h.width) * static_cast<uint64_t>(h.height);
    if (pixels > limits.max_pixels)
      return fail(image_error::too_many_pixels,
                  std::to_string(h.width) + "x" + std::to_string(h.height) + " = "
                    + std::to_string(pixels) + " pixels, above the limit of "
                    + std::to_string(limits.max_pixels) + " (images.max_pixels)");
    return h;
  } catch (const VError& e) {
    return fail(image_error::corrupt, "header unreadable: " + vips_message(e));
  }
}

/// The image shrunk to fit `side` × `side` (shrink-on-load where the format has it: JPEG and
/// WebP decode at a fraction of their size), EXIF orientation applied.
VImage thumbnail(std::string_view bytes, int side) {
  VipsBlob* blob = vips_blob_copy(bytes.data(), bytes.size());
  struct unref {
    VipsBlob* b;
    ~unref() { vips_area_unref(VIPS_AREA(b)); }
  } guard{blob};
  return VImage::thumbnail_buffer(
    blob, side, VImage::option()->set("height", side)->set("option_string", "fail_on=truncated"));
}

/// 8-bit sRGB with three bands: alpha flattened onto white, grey expanded, 16 bits reduced.
VImage srgb8(VImage img) {
  if (img.has_alpha())
    img = img.flatten(VImage::option()->set("background", std::vector<double>{255, 255, 255}));
  img = img.colourspace(VIPS_INTERPRETATION_sRGB);
  if (img.bands() > 3)
    img = img.extract_band(0, VImage::option()->set("n", 3));
  if (img.format() != VIPS_FORMAT_UCHAR)
    img = img.cast(VIPS_FORMAT_UCHAR);
  return img;
}

} // namespace

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (VIPS_INIT("gost") != 0)
      vips_error_exit("libvips failed to start");
    vips_concurrency_set(1);
    vips_cache_set_max(0);
    // libvips warns on stderr about what it tried (a probe of each loader, a damaged tile);
    // every failure that matters comes back as a `failure`, with its message.
    g_log_set_handler(
      "VIPS",
      static_cast<GLogLevelFlags>(G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_INFO),
      [](const gchar*, GLogLevelFlags, const gchar*, gpointer) {}, nullptr);
  });
}

outcome<header> probe(std::string_view bytes, const image_limits& limits) {
  init();
  return checked_header(bytes, limits);
}

outcome<rgb> main_color(std::string_view bytes, const image_limits& limits) {
  init();
  if (auto h = checked_header(bytes, limits); !h)
    return h.error;
  try {
    auto img = srgb8(thumbnail(bytes, 64));
    size_t size = 0;
    auto* data = static_cast<uint8_t*>(img.write_to_memory(&size));
    struct release {
      void* p;
      ~release() { g_free(p); }
    } guard{data};
    std::array<uint32_t, 4096> count{};
    std::array<std::array<uint64_t, 3>, 4096> sum{};
    for (size_t i = 0; i + 2 < size; i += 3) {
      auto bin = (data[i] >> 4) << 8 | (data[i + 1] >> 4) << 4 | (data[i + 2] >> 4);
      ++count[bin];
      for (int c = 0; c < 3; ++c)
        sum[bin][c] += data[i + c];
    }
    size_t best = 0;
    for (size_t b = 1; b < count.size(); ++b)
      if (count[b] > count[best])
        best = b;
    if (count[best] == 0)
      return fail(image_error::corrupt, "no pixels");
    auto mean = [&](int c) {
      return static_cast<uint8_t>(std::lround(static_cast<double>(sum[best][c]) / count[best]));
    };
    return rgb{mean(0), mean(1), mean(2)};
  } catch (const VError& e) {
    return fail(image_error::corrupt, vips_message(e));
  }
}

outcome<encoded> preview(std::string_view bytes, const image_limits& limits, int side) {
  init();
  if (side < 1 || side > 256)
    return fail(image_error::bad_argument,
                "preview side " + std::to_string(side) + " is outside 1..256");
  auto h = checked_header(bytes, limits);
  if (!h)
    return h.error;
  // A JPEG on libjpeg directly (jpeg_preview.hpp: the same steps, a third of the CPU); what it
  // does not handle, and every other format, on libvips' thumbnail.
  if (h->format == "jpeg")
    if (auto fast = detail::jpeg_preview(bytes, side, h->orientation))
      return std::move(*fast);
  try {
    auto img = srgb8(thumbnail(bytes, side));
    encoded out;
    void* buf = nullptr;
    size_t size = 0;
    img.write_to_buffer(
      ".jpg", &buf, &size,
      VImage::option()->set("Q", 40)->set("strip", true)->set("optimize_coding", true));
    out.bytes.assign(static_cast<const char*>(buf), size);
    g_free(buf);
    out.format = "jpeg";
    out.width = img.width();
    out.height = img.height();
    return out;
  } catch (const VError& e) {
    return fail(image_error::corrupt, vips_message(e));
  }
}

outcome<encoded> rotate(std::string_view bytes, double degrees, const image_limits& limits) {
  init();
  if (!std::isfinite(degrees) || degrees < -360 || degrees > 360)
    return fail(image_error::bad_argument, "angle must be within -360..360 degrees");
  auto h = checked_header(bytes, limits);
  if (!h)
    return h.error;
  try {
    auto img =
      VImage::new_from_buffer(bytes.data(), bytes.size(), "", load_options(VIPS_ACCESS_RANDOM))
        .autorot();
    double turn = std::fmod(degrees, 360.0);
    if (turn < 0)
      turn += 360.0;
    if (turn == 90)
      img = img.rot(VIPS_ANGLE_D90);
    else if (turn == 180)
      img = img.rot(VIPS_ANGLE_D180);
    else if (turn == 270)
      img = img.rot(VIPS_ANGLE_D270);
    else if (turn != 0) {
      std::vector<double> white(static_cast<size_t>(img.bands()), 255.0);
      if (img.has_alpha())
        white.back() = 0; // transparent corners where the format keeps alpha
      img = img.rotate(turn, VImage::option()->set("background", white));
    }
    encoded out;
    out.format = h->format == "gif" ? "png" : h->format;
    const char* suffix = out.format == "jpeg" ? ".jpg" : out.format == "png" ? ".png" : ".webp";
    auto* opts = out.format == "jpeg" ? VImage::option()->set("Q", 90) : VImage::option();
    void* buf = nullptr;
    size_t size = 0;
    img.write_to_buffer(suffix, &buf, &size, opts);
    out.bytes.assign(static_cast<const char*>(buf), size);
    g_free(buf);
    out.width = img.width();
    out.height = img.height();
    return out;
  } catch (const VError& e) {
    return fail(image_error::corrupt, vips_message(e));
  }
}

} // namespace gost::images
