#pragma once
// The three feed formats' shapes (docs/feed-format.md), behind one small interface the
// reader's pass drives: which elements are offers, which are side tables to keep (YML's
// categories), and how an offer's subtree becomes a feed_ad. Internal to the reader.

#include <libxml/tree.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gost/feeds/feed_reader.hpp"

namespace gost::feeds {

enum class element_role {
  descend, ///< a container: read into it
  skip,    ///< not ours (shop name, currencies, contact fields): read over it
  side,    ///< a side table entry: expanded and handed to `side`
  item,    ///< an offer: expanded and handed to `item` (or read through when only checking)
};

/// The format whose root element this is, if any.
std::optional<feed_format> format_of_root(std::string_view root);

class format_reader {
public:
  virtual ~format_reader() = default;
  /// Called for every element outside an expanded subtree, in document order; `depth` counts
  /// the root as 1.
  virtual element_role classify(int depth, std::string_view name) = 0;
  /// A side-table element; false (with `why`) when a limit is passed.
  virtual bool side(const xmlNode* node, std::string& why) { return true; }
  /// An offer's subtree; false (with `why`) when a limit is passed inside it. Problems of the
  /// offer's values go into `out.problems`.
  virtual bool item(const xmlNode* node, int depth, feed_ad& out, std::string& why) = 0;
};

std::unique_ptr<format_reader> make_format_reader(feed_format f, const reader_limits& limits);

/// Parsed feeds (JSON Lines, json_lines.cpp): reads `read` to its end, handing each offer to
/// `on_ad` (when set) and counting them in `out`; a fatal problem goes to `fail`.
void read_json_lines(const std::function<long(char*, size_t)>& read, const reader_limits& limits,
                     const ad_callback& on_ad, read_summary& out,
                     const std::function<void(feed_fatal)>& fail);

} // namespace gost::feeds
