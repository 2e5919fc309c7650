#include "jpeg_preview.hpp"

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdint>
#include <cstdio> // jpeglib.h needs FILE
#include <cstdlib>
#include <vector>

#include <jpeglib.h>

namespace gost::images::detail {

namespace {

/// libjpeg reports an error by calling `error_exit`, which must not return: it jumps back to
/// the setjmp of the step under way. A warning (a truncated file, damaged data) jumps back
/// too: such files are libvips' to answer.
struct jpeg_errors {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
};

[[noreturn]] void on_error(j_common_ptr c) {
  std::longjmp(reinterpret_cast<jpeg_errors*>(c->err)->jump, 1);
}

void on_message(j_common_ptr c, int level) {
  if (level < 0) // a warning; trace messages (level >= 0) are ignored
    std::longjmp(reinterpret_cast<jpeg_errors*>(c->err)->jump, 1);
}

/// libvips' choice of shrink-on-load (vips_thumbnail_find_jpegshrink) for a fit that needs
/// `shrink` (the larger side over the preview's): the largest of 1, 2, 4, 8 that leaves at
/// least a factor of two for the final reduction.
int load_shrink(double shrink) {
  if (shrink >= 16)
    return 8;
  if (shrink >= 8)
    return 4;
  if (shrink >= 4)
    return 2;
  return 1;
}

/// Box boundaries: pixel i of `from` belongs to box `owner[i]` of `to` (to <= from); `size`
/// counts the pixels per box.
void boxes(int from, int to, std::vector<int>& owner, std::vector<uint32_t>& size) {
  owner.assign(static_cast<size_t>(from), 0);
  size.assign(static_cast<size_t>(to), 0);
  for (int o = 0; o < to; ++o) {
    int begin = static_cast<int>(static_cast<int64_t>(o) * from / to);
    int end = static_cast<int>(static_cast<int64_t>(o + 1) * from / to);
    for (int i = begin; i < end; ++i)
      owner[static_cast<size_t>(i)] = o;
    size[static_cast<size_t>(o)] = static_cast<uint32_t>(end - begin);
  }
}

/// The RGB pixels `in` (w × h) as displayed under EXIF `orientation`; `w` and `h` become the
/// displayed size.
std::vector<uint8_t> oriented(const std::vector<uint8_t>& in, int& w, int& h, int orientation) {
  if (orientation < 2 || orientation > 8)
    return in;
  bool swap = orientation >= 5;
  int ow = swap ? h : w, oh = swap ? w : h;
  std::vector<uint8_t> out(in.size());
  for (int y = 0; y < oh; ++y)
    for (int x = 0; x < ow; ++x) {
      int sx = x, sy = y; // the stored pixel shown at (x, y)
      switch (orientation) {
        case 2: sx = w - 1 - x; break;                 // mirrored
        case 3: sx = w - 1 - x, sy = h - 1 - y; break; // turned 180°
        case 4: sy = h - 1 - y; break;                 // flipped
        case 5: sx = y, sy = x; break;                 // transposed
        case 6: sx = y, sy = h - 1 - x; break;         // turned 90° clockwise
        case 7: sx = w - 1 - y, sy = h - 1 - x; break; // transversed
        case 8: sx = w - 1 - y, sy = x; break;         // turned 90° anticlockwise
      }
      auto* d = &out[(static_cast<size_t>(y) * ow + x) * 3];
      auto* s = &in[(static_cast<size_t>(sy) * w + sx) * 3];
      d[0] = s[0], d[1] = s[1], d[2] = s[2];
    }
  w = ow;
  h = oh;
  return out;
}

/// A decode's state, owned by the frame that calls `decode` (the one holding the setjmp keeps
/// no object a longjmp could skip or leave indeterminate).
struct decoder {
  jpeg_decompress_struct d{};
  jpeg_errors err{};
  std::vector<uint8_t> row;
  std::vector<uint32_t> sums, box_w, box_h;
  std::vector<int> col_of, row_of;
  decoder() {
    d.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = on_error;
    err.pub.emit_message = on_message;
  }
  ~decoder() { jpeg_destroy_decompress(&d); } // harmless on a struct never created
};

/// Decodes `bytes` shrunk to fit `side` x `side` into `px` (RGB, `w` x `h`). False: not this
/// path's case.
bool decode(decoder& st, std::string_view bytes, int side, std::vector<uint8_t>& px, int& w,
            int& h) {
  if (setjmp(st.err.jump) != 0)
    return false;
  auto& d = st.d;
  jpeg_create_decompress(&d);
  jpeg_mem_src(&d, reinterpret_cast<const unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&d, TRUE);
  bool colours_kept = d.jpeg_color_space == JCS_YCbCr || d.jpeg_color_space == JCS_RGB
                      || d.jpeg_color_space == JCS_GRAYSCALE;
  if (!colours_kept || d.image_width == 0 || d.image_height == 0)
    return false; // CMYK, YCCK: libvips
  d.scale_num = 1;
  d.scale_denom = static_cast<unsigned>(load_shrink(std::max(
    static_cast<double>(d.image_width) / side, static_cast<double>(d.image_height) / side)));
  d.out_color_space = JCS_RGB; // grey expanded, as libvips' colourspace(sRGB) does
  jpeg_calc_output_dimensions(&d);
  int dw = static_cast<int>(d.output_width), dh = static_cast<int>(d.output_height);
  // The final size as libvips' thumbnail computes it from the shrunk image.
  double shrink = std::max(static_cast<double>(dw) / side, static_cast<double>(dh) / side);
  w = std::max(1, static_cast<int>(std::lround(dw / shrink)));
  h = std::max(1, static_cast<int>(std::lround(dh / shrink)));
  if (w > dw || h > dh)
    return false; // an enlargement, not a reduction: libvips
  boxes(dw, w, st.col_of, st.box_w);
  boxes(dh, h, st.row_of, st.box_h);
  st.row.resize(static_cast<size_t>(dw) * 3);
  st.sums.assign(static_cast<size_t>(w) * 3, 0);
  px.assign(static_cast<size_t>(w) * h * 3, 0);
  jpeg_start_decompress(&d);
  while (d.output_scanline < d.output_height) {
    int y = static_cast<int>(d.output_scanline);
    JSAMPROW line = st.row.data();
    jpeg_read_scanlines(&d, &line, 1);
    for (int x = 0; x < dw; ++x) {
      auto* s = &st.row[static_cast<size_t>(x) * 3];
      auto* t = &st.sums[static_cast<size_t>(st.col_of[static_cast<size_t>(x)]) * 3];
      t[0] += s[0], t[1] += s[1], t[2] += s[2];
    }
    int oy = st.row_of[static_cast<size_t>(y)];
    if (y + 1 == dh || st.row_of[static_cast<size_t>(y) + 1] != oy) { // a row of boxes is full
      for (int ox = 0; ox < w; ++ox) {
        uint32_t n = st.box_w[static_cast<size_t>(ox)] * st.box_h[static_cast<size_t>(oy)];
        for (int c = 0; c < 3; ++c) {
          auto& sum = st.sums[static_cast<size_t>(ox) * 3 + c];
          px[(static_cast<size_t>(oy) * w + ox) * 3 + c] = static_cast<uint8_t>((sum + n / 2) / n);
          sum = 0;
        }
      }
    }
  }
  // Every pixel is read; the file's tail after the last scan is not looked at (libvips does
  // not either): the decoder is destroyed without jpeg_finish_decompress.
  return true;
}

/// An encode's state, as `decoder`'s.
struct encoder {
  jpeg_compress_struct c{};
  jpeg_errors err{};
  unsigned char* mem = nullptr; ///< jpeg_mem_dest's buffer (malloc)
  unsigned long size = 0;
  encoder() {
    c.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = on_error;
    err.pub.emit_message = on_message;
  }
  ~encoder() {
    jpeg_destroy_compress(&c);
    std::free(mem);
  }
};

/// `px` (RGB, w x h) as a JPEG of quality 40 with optimized Huffman tables and no metadata but
/// the JFIF header; false if libjpeg failed.
bool encode(encoder& st, const std::vector<uint8_t>& px, int w, int h) {
  if (setjmp(st.err.jump) != 0)
    return false;
  auto& c = st.c;
  jpeg_create_compress(&c);
  jpeg_mem_dest(&c, &st.mem, &st.size);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 40, TRUE);
  c.optimize_coding = TRUE;
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    auto* line = const_cast<JSAMPROW>(&px[static_cast<size_t>(c.next_scanline) * w * 3]);
    jpeg_write_scanlines(&c, &line, 1);
  }
  jpeg_finish_compress(&c);
  return true;
}

} // namespace

std::optional<encoded> jpeg_preview(std::string_view bytes, int side, int orientation) {
  std::vector<uint8_t> px;
  int w = 0, h = 0;
  {
    decoder st;
    if (!decode(st, bytes, side, px, w, h))
      return std::nullopt;
  }
  px = oriented(px, w, h, orientation);
  encoder st;
  if (!encode(st, px, w, h))
    return std::nullopt;
  encoded out;
  out.bytes.assign(reinterpret_cast<const char*>(st.mem), st.size);
  out.format = "jpeg";
  out.width = w;
  out.height = h;
  return out;
}

} // namespace gost::images::detail
