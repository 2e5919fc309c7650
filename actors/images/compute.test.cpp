// The image functions' computing on real JPEG, PNG, WebP and GIF files made here with libvips,
// with exact answers where the format is lossless and a small tolerance where it is not.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include <vips/vips8>

#include "gost/images/compute.hpp"
#include "jpeg_preview.hpp"

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

/// Each channel of `px` within `tolerance` of `want`.
bool close_to(const std::vector<double>& px, const std::vector<double>& want, double tolerance) {
  if (px.size() < want.size())
    return false;
  for (size_t c = 0; c < want.size(); ++c)
    if (std::abs(px[c] - want[c]) > tolerance)
      return false;
  return true;
}

/// 800 x 400, four quadrants: red, green / blue, yellow; their colours as `quadrant_colours`.
const std::vector<std::vector<double>> quadrant_colours{
  {220, 30, 30}, {30, 200, 30}, {30, 30, 220}, {230, 230, 40}};
VImage quadrants() {
  auto img = solid(800, 400, quadrant_colours[0]);
  img = painted(img, quadrant_colours[1], 400, 0, 400, 200);
  img = painted(img, quadrant_colours[2], 0, 200, 400, 200);
  return painted(img, quadrant_colours[3], 400, 200, 400, 200);
}

/// The colours at the centres of the four quadrants of `img` (top left, top right, bottom
/// left, bottom right).
std::vector<std::vector<double>> quadrant_centres(const VImage& img) {
  int w = img.width(), h = img.height();
  return {at(img, w / 4, h / 4), at(img, 3 * w / 4, h / 4), at(img, w / 4, 3 * h / 4),
          at(img, 3 * w / 4, 3 * h / 4)};
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
    CHECK(p->bytes.size() < 1000);
    CHECK(p->format == "jpeg");
    auto back = decode(p->bytes);
    CHECK(back.width() == 16);
    CHECK(back.height() == 12);
    CHECK(p->width == 16);
    CHECK(p->height == 12);
    CHECK(std::string{vips_foreign_find_load_buffer(p->bytes.data(), p->bytes.size())}.find("Jpeg")
          != std::string::npos);
    // Left blue, right red, as in the source.
    CHECK_MESSAGE(close_to(at(back, 3, 6), {20, 20, 220}, 40), suffix);
    CHECK_MESSAGE(close_to(at(back, 12, 6), {200, 50, 50}, 40), suffix);
  }
  CHECK(preview(encode(img, ".png"), {}, 0).error.kind == image_error::bad_argument);
}

TEST_CASE("a JPEG's preview keeps its colours and their places, however it was encoded") {
  auto img = quadrants();
  struct variant {
    const char* name;
    vips::VOption* opts;
  };
  for (auto v : {variant{"baseline 4:2:0", VImage::option()->set("Q", 85)},
                 variant{"progressive", VImage::option()->set("Q", 85)->set("interlace", true)},
                 variant{"4:4:4", VImage::option()->set("Q", 95)->set("subsample_mode",
                                                                      VIPS_FOREIGN_SUBSAMPLE_OFF)},
                 variant{"optimized tables", VImage::option()->set("optimize_coding", true)}}) {
    CAPTURE(v.name);
    auto jpeg = encode(img, ".jpg", v.opts);
    // The common case is libjpeg's, not libvips' fallback.
    auto fast = gost::images::detail::jpeg_preview(jpeg, 16, 1);
    REQUIRE(fast);
    auto p = preview(jpeg);
    REQUIRE_MESSAGE(p, p.error.message);
    CHECK(p->bytes == fast->bytes);
    CHECK(p->width == 16);
    CHECK(p->height == 8);
    CHECK(p->bytes.size() < 1000);
    auto back = decode(p->bytes);
    CHECK(back.width() == 16);
    CHECK(back.height() == 8);
    CHECK(back.bands() == 3);
    CHECK(probe(p->bytes)->orientation == 1); // no metadata
    auto got = quadrant_centres(back);
    for (size_t q = 0; q < 4; ++q)
      CHECK_MESSAGE(close_to(got[q], quadrant_colours[q], 40), "quadrant ", q, ": ", got[q][0], ",",
                    got[q][1], ",", got[q][2]);
  }
}

TEST_CASE("a JPEG's preview is shown as its EXIF orientation says, as libvips' thumbnail does") {
  for (int orientation = 1; orientation <= 8; ++orientation) {
    CAPTURE(orientation);
    auto tagged = quadrants().copy();
    tagged.set("orientation", orientation);
    auto jpeg = encode(tagged, ".jpg");
    REQUIRE(probe(jpeg)->orientation == orientation);
    REQUIRE(gost::images::detail::jpeg_preview(jpeg, 16, orientation));
    auto p = preview(jpeg);
    REQUIRE_MESSAGE(p, p.error.message);
    // libvips' thumbnail applies the orientation too: the same size, the same quadrants.
    auto* blob = vips_blob_copy(jpeg.data(), jpeg.size());
    auto want =
      VImage::thumbnail_buffer(blob, 16, VImage::option()->set("height", 16)).copy_memory();
    vips_area_unref(VIPS_AREA(blob));
    auto back = decode(p->bytes);
    CHECK(back.width() == want.width());
    CHECK(back.height() == want.height());
    CHECK(p->width == (orientation >= 5 ? 8 : 16));
    CHECK(p->height == (orientation >= 5 ? 16 : 8));
    auto got = quadrant_centres(back), expected = quadrant_centres(want);
    for (size_t q = 0; q < 4; ++q)
      CHECK_MESSAGE(close_to(got[q], expected[q], 40), "quadrant ", q, ": ", got[q][0], ",",
                    got[q][1], ",", got[q][2], " against ", expected[q][0], ",", expected[q][1],
                    ",", expected[q][2]);
  }
  // Turned a quarter clockwise to display (6): the stored bottom left (blue) shows top left,
  // the stored top left (red) top right.
  auto tagged = quadrants().copy();
  tagged.set("orientation", 6);
  auto turned = preview(encode(tagged, ".jpg"));
  REQUIRE(turned);
  auto back = decode(turned->bytes); // reads the bytes where they are
  CHECK(close_to(at(back, 2, 4), quadrant_colours[2], 40));
  CHECK(close_to(at(back, 6, 4), quadrant_colours[0], 40));
}

TEST_CASE("preview of grey, CMYK and tiny JPEGs") {
  // Grey: expanded to three equal channels.
  auto grey = encode(solid(300, 200, {128}), ".jpg");
  REQUIRE(gost::images::detail::jpeg_preview(grey, 16, 1));
  auto g = preview(grey);
  REQUIRE_MESSAGE(g, g.error.message);
  auto gback = decode(g->bytes);
  CHECK(gback.width() == 16);
  CHECK(gback.height() == 11); // 300 x 200 at 16 px: 16 x 10.7
  CHECK(close_to(at(gback, 8, 5), {128, 128, 128}, 6));
  // CMYK: not libjpeg's here (it would need the profile): libvips converts it to sRGB.
  auto cmyk = encode(solid(300, 200, {200, 40, 40}).colourspace(VIPS_INTERPRETATION_CMYK), ".jpg");
  CHECK_FALSE(gost::images::detail::jpeg_preview(cmyk, 16, 1));
  auto c = preview(cmyk);
  REQUIRE_MESSAGE(c, c.error.message);
  auto cback = decode(c->bytes);
  CHECK(cback.width() == 16);
  CHECK(cback.bands() == 3);
  auto red = at(cback, 8, 5);
  CHECK_MESSAGE((red[0] > 150 && red[1] < 110 && red[2] < 110), red[0], ",", red[1], ",", red[2]);
  // Smaller than the preview: enlarged, as before (libvips).
  auto tiny = encode(solid(10, 6, {30, 30, 220}), ".jpg");
  CHECK_FALSE(gost::images::detail::jpeg_preview(tiny, 16, 1));
  auto t = preview(tiny);
  REQUIRE_MESSAGE(t, t.error.message);
  CHECK(t->width == 16);
  CHECK(t->height == 10);
  CHECK(close_to(at(decode(t->bytes), 8, 5), {30, 30, 220}, 40));
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
  CHECK_FALSE(gost::images::detail::jpeg_preview(cut, 16, 1)); // libjpeg's warning: libvips'
  CHECK_FALSE(gost::images::detail::jpeg_preview(text, 16, 1));
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
