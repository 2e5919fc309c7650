// Parsed feeds (docs/feed-format.md "Parsed feeds"): JSON Lines, one gost.v1.ParsedOffer per
// line, read line by line (memory follows the longest line), each line parsed with protobuf's
// JSON mapping. A line that is not a ParsedOffer is `malformed` (the file's syntax, like an
// XML error); a value's problem is the offer's.
#include <google/protobuf/util/json_util.h>

#include <cmath>

#include "formats.hpp"
#include "gost/v1/parsed_feed.pb.h"

namespace gost::feeds {

namespace {

size_t chars(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s)
    n += (c & 0xC0) != 0x80;
  return n;
}

/// The longest value of an offer, for the field limit.
size_t longest(const v1::ParsedOffer& o) {
  size_t m = std::max({chars(o.id()), chars(o.title()), chars(o.description()), chars(o.address()),
                       chars(o.price()), chars(o.video())});
  for (auto& c : o.category())
    m = std::max(m, chars(c));
  for (auto& p : o.photos())
    m = std::max(m, chars(p));
  for (auto& [k, v] : o.attributes())
    m = std::max({m, chars(k), chars(v)});
  return m;
}

feed_ad ad_of(v1::ParsedOffer&& o, int64_t line) {
  feed_ad ad;
  ad.line = line;
  ad.external_id = o.id();
  for (auto& c : o.category())
    if (!c.empty())
      ad.category.push_back(c);
  ad.title = o.title();
  ad.description = o.description();
  auto problem = [&](std::string field, std::string msg,
                     problem_type t = problem_type::validation) {
    ad.problems.push_back({t, problem_level::error, std::move(field), std::move(msg)});
  };
  if (!o.price().empty()) {
    std::string why;
    if (auto p = parse_price(o.price(), &why))
      ad.price_minor = *p;
    else
      problem("price", why);
  }
  auto cur = o.currency().empty() ? std::string("RUB") : o.currency();
  if (cur == "RUR")
    cur = "RUB";
  if (cur.size() == 3
      && std::all_of(cur.begin(), cur.end(), [](char c) { return c >= 'A' && c <= 'Z'; }))
    ad.currency = cur;
  else
    problem("currency", "the currency \"" + cur + "\" is not an ISO 4217 code such as RUB");
  ad.address = o.address();
  if (o.has_lat() || o.has_lon()) {
    if (o.has_lat() && o.has_lon() && std::fabs(o.lat()) <= 90 && std::fabs(o.lon()) <= 180) {
      ad.lat = o.lat();
      ad.lon = o.lon();
    } else {
      problem("lat", "coordinates need both lat (-90..90) and lon (-180..180)");
    }
  }
  for (auto& p : o.photos()) {
    if (is_absolute_http_url(p))
      ad.photos.push_back(p);
    else
      problem("photos", "the photo URL \"" + p + "\" is not an absolute http:// or https:// URL");
  }
  if (!o.video().empty()) {
    if (is_absolute_http_url(o.video()))
      ad.video = o.video();
    else
      problem("video",
              "the video URL \"" + o.video() + "\" is not an absolute http:// or https:// URL");
  }
  // The map's order is not the file's: by name, for a stable result.
  std::map<std::string, std::string> attrs(o.attributes().begin(), o.attributes().end());
  for (auto& [k, v] : attrs)
    ad.attributes.emplace_back(k, v);
  if (o.has_active())
    ad.active = o.active();
  if (ad.external_id.empty())
    problem("id",
            "the offer has no id; every offer needs its id in the source, unique in the feed");
  if (ad.category.empty())
    problem("category", "the offer has no category", problem_type::category);
  return ad;
}

} // namespace

void read_json_lines(const std::function<long(char*, size_t)>& read, const reader_limits& limits,
                     const ad_callback& on_ad, read_summary& out,
                     const std::function<void(feed_fatal)>& fail) {
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = true;
  // A line may hold every field at its limit; beyond that it is refused unread.
  const size_t max_line = limits.max_field_chars * 4 * 16 + 4096;
  std::string buf, line;
  std::vector<char> chunk(64 << 10);
  int64_t line_no = 0;
  bool eof = false;
  size_t pos = 0;
  for (;;) {
    auto nl = buf.find('\n', pos);
    if (nl == std::string::npos && !eof) {
      buf.erase(0, pos);
      pos = 0;
      if (buf.size() > max_line) {
        fail({"limit",
              "a line longer than " + std::to_string(max_line) + " bytes (feed.max_field_chars)",
              line_no + 1});
        return;
      }
      auto got = read(chunk.data(), chunk.size());
      if (got < 0)
        return; // the caller knows why (size limit, I/O)
      if (got == 0)
        eof = true;
      buf.append(chunk.data(), static_cast<size_t>(got));
      continue;
    }
    if (nl == std::string::npos && pos >= buf.size())
      return; // done
    auto end = nl == std::string::npos ? buf.size() : nl;
    line.assign(buf, pos, end - pos);
    pos = nl == std::string::npos ? buf.size() : nl + 1;
    ++line_no;
    if (line_no == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0)
      line.erase(0, 3);
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    v1::ParsedOffer o;
    auto st = google::protobuf::util::JsonStringToMessage(line, &o, opts);
    if (!st.ok()) {
      fail({"malformed",
            "not a parsed offer (JSON Lines, docs/feed-format.md): " + std::string(st.message()),
            line_no});
      return;
    }
    if (++out.offers > limits.max_offers) {
      fail({"limit",
            "over " + std::to_string(limits.max_offers) + " offers in one feed (feed.max_offers)",
            line_no});
      return;
    }
    if (auto m = longest(o); m > limits.max_field_chars) {
      fail({"limit",
            "a value of " + std::to_string(m) + " characters; the limit is "
              + std::to_string(limits.max_field_chars) + " (feed.max_field_chars)",
            line_no});
      return;
    }
    if (on_ad && !on_ad(ad_of(std::move(o), line_no))) {
      out.stopped = true;
      return;
    }
  }
}

} // namespace gost::feeds
