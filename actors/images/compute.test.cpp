// The image functions' computing on real JPEG, PNG, WebP and GIF files made here with libvips,
// with exact answers where the format is lossless and a small tolerance where it is not.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include <vips/vips8>

#include "gost/images/compute.hpp"

using namespace gost::images;
using vips::VImage;

namespace {

/// A w × h image of one colour (8-bit sRGB).
VImage solid(int w, int h, std::vector<double> colour) {
  return VImage::black(w, h, VImage::option()->set("bands", static_cast<int>(colour.size())))
    .new_from_image(colour)
    .cast(VIPS_FORMAT_UCHAR)
    .copy(VImage::option()->set("interpretation", VIPS_INTERPRETATION_sRGB));
}

/// `base` with the rectangle (x, y, w, h) painted `colour`.
VImage painted(VImage base, std::vector<double> colour, int x, int y, int w, int h) {
  base = base.copy_memory();
  base.draw_rect(colour, x, y, w, h, VImage::option()->set("fill", true));
  return base;
}

std::string encode(const VImage& img, const char* suffix, vips::VOption* opts = nullptr) {
  void* buf = nullptr;
  size_t size = 0;
  img.write_to_buffer(suffix, &buf, &size, opts);
  std::string out(static_cast<const char*>(buf), size);
  g_free(buf);
  return out;
}

VImage decode(const std::string& bytes) {
  return VImage::new_from_buffer(bytes.data(), bytes.size(), "");
}

/// The pixel at (x, y) as 8-bit values.
std::vector<double> at(const VImage& img, int x, int y) {
  return const_cast<VImage&>(img).getpoint(x, y);
}

bool near(const rgb& c, int r, int g, int b, int tolerance) {
  return std::abs(c.r - r) <= tolerance && std::abs(c.g - g) <= tolerance
         && std::abs(c.b - b) <= tolerance;
}

struct start {
  start() { init(); }
} started;

const char* const formats[] = {".jpg", ".png", ".webp", ".gif"};

} // namespace

TEST_CASE("probe reads width, height, ratio and format from the header of every accepted format") {
  auto img = solid(640, 480, {10, 200, 30});
  for (auto* suffix : formats) {
    CAPTURE(suffix);
    auto h = probe(encode(img, suffix));
    REQUIRE_MESSAGE(h, h.error.message);
    CHECK(h->width == 640);
    CHECK(h->height == 480);
    CHECK(h->ratio() == doctest::Approx(4.0 / 3.0));
    CHECK(h->format == (std::string{suffix} == ".jpg" ? "jpeg" : std::string{suffix}.substr(1)));
  }
}

TEST_CASE("main colour is the most populated colour, exact on lossless formats") {
  // 70% red, 30% blue: red, although the average would be purple.
  auto img = painted(solid(200, 100, {255, 0, 0}), {0, 0, 255}, 140, 0, 60, 100);
  for (auto* suffix : {".png", ".gif"}) {
    CAPTURE(suffix);
    auto c = main_color(encode(img, suffix));
    REQUIRE_MESSAGE(c, c.error.message);
    CHECK(*c == rgb{255, 0, 0});
  }
  auto lossless_webp = main_color(encode(img, ".webp", VImage::option()->set("lossless", true)));
  REQUIRE(lossless_webp);
  CHECK(*lossless_webp == rgb{255, 0, 0});
  for (auto* suffix : {".jpg", ".webp"}) { // lossy: within a few levels
    CAPTURE(suffix);
    auto c = main_color(encode(img, suffix));
    REQUIRE_MESSAGE(c, c.error.message);
    CHECK_MESSAGE(near(*c, 255, 0, 0, 8), int(c->r), ",", int(c->g), ",", int(c->b));
  }
  // The minority colour wins when it becomes the majority.
  auto blue = painted(solid(200, 100, {255, 0, 0}), {0, 0, 255}, 60, 0, 140, 100);
  CHECK(*main_color(encode(blue, ".png")) == rgb{0, 0, 255});
  // Grey stays grey (one band expanded to sRGB).
  auto grey = main_color(encode(solid(50, 50, {128, 128, 128}), ".png"));
  REQUIRE(grey);
  CHECK(*grey == rgb{128, 128, 128});
}

TEST_CASE("main colour flattens transparency onto white") {
  // 60% transparent, 40% opaque green.
  auto img = painted(solid(100, 100, {0, 0, 0, 0}), {0, 255, 0, 255}, 0, 0, 40, 100);
  auto c = main_color(encode(img, ".png"));
  REQUIRE_MESSAGE(c, c.error.message);
  CHECK(*c == rgb{255, 255, 255});
}

TEST_CASE("preview is a tiny JPEG with the aspect kept") {
  auto img = painted(solid(1200, 900, {200, 50, 50}), {20, 20, 220}, 0, 0, 600, 900);
  for (auto* suffix : formats) {
    CAPTURE(suffix);
    auto p = preview(encode(img, suffix));
    REQUIRE_MESSAGE(p, p.error.message);
    CHECK(p->size() < 1000);
    auto back = decode(*p);
    CHECK(back.width() == 16);
    CHECK(back.height() == 12);
    CHECK(std::string{vips_foreign_find_load_buffer(p->data(), p->size())}.find("Jpeg")
          != std::string::npos);
  }
  CHECK(preview(encode(img, ".png"), {}, 0).error.kind == image_error::bad_argument);
}

TEST_CASE("rotate turns clockwise, exactly by multiples of 90, in the source's format") {
  // Left half red, right half blue: after a quarter turn clockwise the top is red.
  auto img = painted(solid(64, 32, {255, 0, 0}), {0, 0, 255}, 32, 0, 32, 32);
  auto r = rotate(encode(img, ".png"), 90);
  REQUIRE_MESSAGE(r, r.error.message);
  CHECK(r->format == "png");
  CHECK(r->width == 32);
  CHECK(r->height == 64);
  auto back = decode(r->bytes);
  CHECK(at(back, 16, 4) == std::vector<double>{255, 0, 0});
  CHECK(at(back, 16, 60) == std::vector<double>{0, 0, 255});
  // -90 is 270: the right half on top.
  auto ccw = rotate(encode(img, ".png"), -90); // decode() reads the bytes where they are
  CHECK(at(decode(ccw->bytes), 16, 4) == std::vector<double>{0, 0, 255});
  auto half = rotate(encode(img, ".png"), 180);
  CHECK(half->width == 64);
  CHECK(at(decode(half->bytes), 4, 16) == std::vector<double>{0, 0, 255});
  // Other angles: a larger canvas, white corners.
  auto tilted = rotate(encode(img, ".png"), 30);
  REQUIRE(tilted);
  CHECK(tilted->width > 64);
  CHECK(tilted->height > 32);
  CHECK(at(decode(tilted->bytes), 0, 0) == std::vector<double>{255, 255, 255});
  // JPEG stays JPEG, GIF becomes PNG.
  CHECK(rotate(encode(img, ".jpg"), 90)->format == "jpeg");
  CHECK(rotate(encode(img, ".webp"), 90)->format == "webp");
  CHECK(rotate(encode(img, ".gif"), 90)->format == "png");
  CHECK(rotate(encode(img, ".png"), 400).error.kind == image_error::bad_argument);
}

TEST_CASE("probe reads the EXIF orientation; rotate by 0 makes such a photo upright") {
  // Stored 64x32, left red and right blue, tagged 6: shown turned a quarter clockwise.
  auto img = painted(solid(64, 32, {255, 0, 0}), {0, 0, 255}, 32, 0, 32, 32);
  auto tagged = img.copy();
  tagged.set("orientation", 6);
  auto h = probe(encode(tagged, ".jpg"));
  REQUIRE_MESSAGE(h, h.error.message);
  CHECK(h->orientation == 6);
  CHECK(h->width == 64); // as stored
  CHECK(probe(encode(img, ".jpg"))->orientation == 1);
  CHECK(probe(encode(img, ".png"))->orientation == 1);
  auto up = rotate(encode(tagged, ".jpg"), 0);
  REQUIRE_MESSAGE(up, up.error.message);
  CHECK(up->width == 32);
  CHECK(up->height == 64);
  auto again = probe(up->bytes);
  CHECK(again->orientation == 1); // the upright copy carries no turn
  auto back = decode(up->bytes);
  CHECK(at(back, 16, 8)[0] > 200); // red on top
  CHECK(at(back, 16, 56)[2] > 200);
}

TEST_CASE("bad images: text, truncated, another format, too many pixels") {
  std::string text = "this is a text file named photo.jpg\n";
  for (auto kind : {probe(text).error.kind, main_color(text).error.kind, preview(text).error.kind,
                    rotate(text, 90).error.kind})
    CHECK(kind == image_error::not_an_image);
  CHECK(probe("").error.kind == image_error::not_an_image);

  // A JPEG cut in half: its header still reads, its pixels do not.
  auto photo =
    encode(painted(solid(400, 300, {90, 120, 30}), {250, 250, 0}, 0, 0, 100, 300), ".jpg");
  auto cut = photo.substr(0, photo.size() / 2);
  CHECK(probe(cut));
  auto broken = main_color(cut);
  REQUIRE_FALSE(broken);
  CHECK(broken.error.kind == image_error::corrupt);
  CHECK(preview(cut).error.kind == image_error::corrupt);
  CHECK(rotate(cut, 90).error.kind == image_error::corrupt);

  // SVG is an image libvips reads, but not one accepted here.
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\">"
                    "<rect width=\"10\" height=\"10\" fill=\"red\"/></svg>";
  auto refused = probe(svg);
  REQUIRE_FALSE(refused);
  CHECK(refused.error.kind == image_error::unsupported_format);
  CHECK(refused.error.message.find("accepted: JPEG, PNG, WebP, GIF") != std::string::npos);

  // 60 megapixels, refused from the header before a pixel is decoded.
  auto huge = encode(VImage::black(8000, 7500), ".png", VImage::option()->set("compression", 1));
  auto big = main_color(huge);
  REQUIRE_FALSE(big);
  CHECK(big.error.kind == image_error::too_many_pixels);
  CHECK(big.error.message.find("8000x7500 = 60000000 pixels") != std::string::npos);
  CHECK(preview(huge).error.kind == image_error::too_many_pixels);
  // The limit is the caller's.
  CHECK(probe(photo, image_limits{400 * 300 - 1}).error.kind == image_error::too_many_pixels);
  CHECK(probe(photo, image_limits{400 * 300}));
}
