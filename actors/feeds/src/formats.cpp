// The three formats (docs/feed-format.md "Formats"): gost's native <feed>, Avito Autoload
// <Ads>, Yandex YML <yml_catalog>. Each maps an offer's subtree onto feed_ad; per-offer value
// problems become offer_problems, limits inside a subtree end the pass.
#include "formats.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <vector>

namespace gost::feeds {

namespace {

std::string_view name_of(const xmlNode* n) {
  return n && n->name ? reinterpret_cast<const char*>(n->name) : "";
}

void append_text(const xmlNode* n, std::string& out) {
  for (auto* c = n->children; c; c = c->next) {
    if ((c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) && c->content)
      out += reinterpret_cast<const char*>(c->content);
    else if (c->type == XML_ELEMENT_NODE)
      append_text(c, out);
  }
}

std::string trim(std::string s) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  size_t b = 0, e = s.size();
  while (b < e && blank(s[b]))
    ++b;
  while (e > b && blank(s[e - 1]))
    --e;
  return s.substr(b, e - b);
}

/// The element's text, all descendants' text joined, trimmed.
std::string text(const xmlNode* n) {
  std::string out;
  append_text(n, out);
  return trim(std::move(out));
}

/// An attribute's value, trimmed; empty when absent.
std::string prop(const xmlNode* n, const char* name) {
  for (auto* a = n->properties; a; a = a->next) {
    if (a->name && std::strcmp(reinterpret_cast<const char*>(a->name), name) == 0) {
      std::string v;
      for (auto* c = a->children; c; c = c->next)
        if (c->content)
          v += reinterpret_cast<const char*>(c->content);
      return trim(std::move(v));
    }
  }
  return {};
}

size_t chars(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s)
    n += (c & 0xC0) != 0x80;
  return n;
}

/// The limits inside an expanded subtree (the check pass reads them node by node instead).
bool audit(const xmlNode* n, int depth, const reader_limits& lim, std::string& why) {
  if (depth > lim.max_depth) {
    why = "elements nested " + std::to_string(depth) + " deep; the limit is "
          + std::to_string(lim.max_depth) + " (feed.max_depth)";
    return false;
  }
  auto too_long = [&](const char* s, const char* what) {
    if (!s)
      return false;
    auto len = std::strlen(s);
    if (len <= lim.max_field_chars || chars({s, len}) <= lim.max_field_chars)
      return false;
    why = std::string("a ") + what + " of " + std::to_string(chars({s, len}))
          + " characters; the limit is " + std::to_string(lim.max_field_chars)
          + " (feed.max_field_chars)";
    return true;
  };
  for (auto* a = n->properties; a; a = a->next)
    for (auto* c = a->children; c; c = c->next)
      if (too_long(reinterpret_cast<const char*>(c->content), "attribute value"))
        return false;
  for (auto* c = n->children; c; c = c->next) {
    if (c->type == XML_ELEMENT_NODE) {
      if (!audit(c, depth + 1, lim, why))
        return false;
    } else if (too_long(reinterpret_cast<const char*>(c->content), "text")) {
      return false;
    }
  }
  return true;
}

void problem(feed_ad& ad, std::string field, std::string message,
             problem_type type = problem_type::validation) {
  ad.problems.push_back({type, problem_level::error, std::move(field), std::move(message)});
}

void set_price(feed_ad& ad, const std::string& field, const std::string& value) {
  std::string why;
  if (auto p = parse_price(value, &why))
    ad.price_minor = *p;
  else
    problem(ad, field, why);
}

/// ISO 4217 as feeds write it; RUR (YML's old code) is RUB.
void set_currency(feed_ad& ad, const std::string& field, std::string code) {
  if (code == "RUR")
    code = "RUB";
  bool ok = code.size() == 3;
  for (char c : code)
    ok = ok && c >= 'A' && c <= 'Z';
  if (ok)
    ad.currency = std::move(code);
  else
    problem(ad, field, "the currency \"" + code + "\" is not an ISO 4217 code such as RUB");
}

void add_photo(feed_ad& ad, const std::string& field, std::string url) {
  if (url.empty())
    return;
  if (is_absolute_http_url(url))
    ad.photos.push_back(std::move(url));
  else
    problem(ad, field, "the photo URL \"" + url + "\" is not an absolute http:// or https:// URL");
}

void set_video(feed_ad& ad, const std::string& field, std::string url) {
  if (url.empty())
    return;
  if (is_absolute_http_url(url))
    ad.video = std::move(url);
  else
    problem(ad, field, "the video URL \"" + url + "\" is not an absolute http:// or https:// URL");
}

std::optional<double> parse_coordinate(const std::string& s, double bound) {
  if (s.empty())
    return std::nullopt;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v) || std::fabs(v) > bound)
    return std::nullopt;
  return v;
}

void set_coordinates(feed_ad& ad, const std::string& lat_field, const std::string& lat,
                     const std::string& lon_field, const std::string& lon) {
  if (lat.empty() && lon.empty())
    return;
  auto la = parse_coordinate(lat, 90), lo = parse_coordinate(lon, 180);
  if (!la)
    problem(ad, lat_field,
            "the latitude \"" + lat + "\" is not a number of degrees between -90 and 90");
  if (!lo)
    problem(ad, lon_field,
            "the longitude \"" + lon + "\" is not a number of degrees between -180 and 180");
  if (la && lo) {
    ad.lat = la;
    ad.lon = lo;
  }
}

void require_id(feed_ad& ad, const char* field) {
  if (ad.external_id.empty())
    problem(ad, field,
            std::string("the offer has no ") + field
              + "; every offer needs the seller's own id, unique in the feed");
}

// --- native ----------------------------------------------------------------------------------

class native_reader final : public format_reader {
public:
  explicit native_reader(const reader_limits& lim) : lim_(lim) {}

  element_role classify(int depth, std::string_view name) override {
    if (depth == 2)
      return name == "offer" ? element_role::item : element_role::skip;
    return element_role::skip;
  }

  bool item(const xmlNode* node, int depth, feed_ad& ad, std::string& why) override {
    if (!audit(node, depth, lim_, why))
      return false;
    for (auto* c = node->children; c; c = c->next) {
      if (c->type != XML_ELEMENT_NODE)
        continue;
      auto n = name_of(c);
      if (n == "id") {
        ad.external_id = text(c);
      } else if (n == "category") {
        // Levels separated by "/", most general first.
        auto all = text(c);
        size_t b = 0;
        while (b <= all.size()) {
          auto e = all.find('/', b);
          auto level = trim(all.substr(b, e == std::string::npos ? std::string::npos : e - b));
          if (!level.empty())
            ad.category.push_back(std::move(level));
          if (e == std::string::npos)
            break;
          b = e + 1;
        }
      } else if (n == "title") {
        ad.title = text(c);
      } else if (n == "description") {
        ad.description = text(c);
      } else if (n == "price") {
        set_price(ad, "price", text(c));
        auto cur = prop(c, "currency");
        set_currency(ad, "price/@currency", cur.empty() ? "RUB" : cur);
      } else if (n == "address") {
        ad.address = text(c);
      } else if (n == "location") {
        set_coordinates(ad, "location/@lat", prop(c, "lat"), "location/@lon", prop(c, "lon"));
      } else if (n == "photos") {
        for (auto* ph = c->children; ph; ph = ph->next)
          if (ph->type == XML_ELEMENT_NODE && name_of(ph) == "photo")
            add_photo(ad, "photos/photo", prop(ph, "url"));
      } else if (n == "video") {
        set_video(ad, "video", text(c));
      } else if (n == "attributes") {
        for (auto* a = c->children; a; a = a->next)
          if (a->type == XML_ELEMENT_NODE && name_of(a) == "attribute")
            ad.attributes.emplace_back(prop(a, "name"), text(a));
      }
    }
    require_id(ad, "id");
    if (ad.category.empty())
      problem(ad, "category", "the offer has no category", problem_type::category);
    return true;
  }

private:
  const reader_limits& lim_;
};

// --- Avito Autoload --------------------------------------------------------------------------

/// Elements of an <Ad> that name its category, most general first.
constexpr const char* avito_levels[] = {"Category", "GoodsType", "GoodsSubType", "ApparelType",
                                        "ProductType"};
/// Elements that carry nothing of the offer's content (contacts, placement, Avito's own
/// service fields): read over.
constexpr const char* avito_ignored[] = {
  "AdStatus",      "AdType",       "AllowEmail", "AvitoId",  "CallsDevices", "CompanyName",
  "ContactMethod", "ContactPhone", "DateBegin",  "DateEnd",  "EMail",        "InternetCalls",
  "ListingFee",    "ManagerName",  "Stores",     "Delivery", "Promo"};
/// Old Avito address parts (formatVersion 2), joined into the address when <Address> is absent.
constexpr const char* avito_address_parts[] = {"Region", "City", "District", "Subway", "Street"};

template <size_t N>
int index_of(const char* const (&names)[N], std::string_view n) {
  for (size_t i = 0; i < N; ++i)
    if (n == names[i])
      return static_cast<int>(i);
  return -1;
}

class avito_reader final : public format_reader {
public:
  explicit avito_reader(const reader_limits& lim) : lim_(lim) {}

  element_role classify(int depth, std::string_view name) override {
    if (depth == 2)
      return name == "Ad" ? element_role::item : element_role::skip;
    return element_role::skip;
  }

  bool item(const xmlNode* node, int depth, feed_ad& ad, std::string& why) override {
    if (!audit(node, depth, lim_, why))
      return false;
    std::string levels[std::size(avito_levels)];
    std::string parts[std::size(avito_address_parts)];
    std::string lat, lon;
    for (auto* c = node->children; c; c = c->next) {
      if (c->type != XML_ELEMENT_NODE)
        continue;
      auto n = name_of(c);
      if (n == "Id") {
        ad.external_id = text(c);
      } else if (auto l = index_of(avito_levels, n); l >= 0) {
        levels[l] = text(c);
      } else if (n == "Title") {
        ad.title = text(c);
      } else if (n == "Description") {
        ad.description = text(c);
      } else if (n == "Price") {
        set_price(ad, "Price", text(c));
        ad.currency = "RUB";
      } else if (n == "Address") {
        ad.address = text(c);
      } else if (auto a = index_of(avito_address_parts, n); a >= 0) {
        parts[a] = text(c);
      } else if (n == "Latitude") {
        lat = text(c);
      } else if (n == "Longitude") {
        lon = text(c);
      } else if (n == "Images") {
        for (auto* im = c->children; im; im = im->next)
          if (im->type == XML_ELEMENT_NODE && name_of(im) == "Image")
            add_photo(ad, "Images/Image",
                      prop(im, "url").empty() ? prop(im, "name") : prop(im, "url"));
      } else if (n == "VideoURL") {
        set_video(ad, "VideoURL", text(c));
      } else if (index_of(avito_ignored, n) >= 0) {
        continue;
      } else {
        add_attribute(ad, c);
      }
    }
    for (auto& l : levels)
      if (!l.empty())
        ad.category.push_back(l);
    if (ad.address.empty())
      for (auto& p : parts)
        if (!p.empty())
          ad.address += (ad.address.empty() ? "" : ", ") + p;
    set_coordinates(ad, "Latitude", lat, "Longitude", lon);
    require_id(ad, "Id");
    if (ad.category.empty())
      problem(ad, "Category", "the ad has no Category", problem_type::category);
    if (ad.title.empty())
      compose_title(ad);
    return true;
  }

private:
  /// A category field: its text, or one entry per <Option> of an option list.
  static void add_attribute(feed_ad& ad, const xmlNode* c) {
    std::string name(name_of(c));
    bool options = false;
    for (auto* o = c->children; o; o = o->next) {
      if (o->type == XML_ELEMENT_NODE) {
        options = true;
        if (auto v = text(o); !v.empty())
          ad.attributes.emplace_back(name, std::move(v));
      }
    }
    if (!options)
      if (auto v = text(c); !v.empty())
        ad.attributes.emplace_back(std::move(name), std::move(v));
  }

  static std::string attribute(const feed_ad& ad, std::string_view name) {
    for (auto& [n, v] : ad.attributes)
      if (n == name)
        return v;
    return {};
  }

  /// Avito leaves the title out for cars and flats: it is made from the fields, as Avito
  /// shows it ("Lada Granta, 2019"; "2-к. квартира, 54 м², 3/9 эт.").
  static void compose_title(feed_ad& ad) {
    auto category = ad.category.empty() ? std::string() : ad.category.front();
    if (category == "Автомобили") {
      std::string t = attribute(ad, "Make");
      if (auto m = attribute(ad, "Model"); !m.empty())
        t += (t.empty() ? "" : " ") + m;
      if (auto y = attribute(ad, "Year"); !y.empty() && !t.empty())
        t += ", " + y;
      ad.title = t;
    } else if (category == "Квартиры") {
      auto rooms = attribute(ad, "Rooms");
      std::string t;
      if (rooms == "Студия")
        t = "Квартира-студия";
      else if (rooms == "Своб. планировка" || rooms == "Свободная планировка")
        t = "Квартира свободной планировки";
      else if (!rooms.empty() && rooms.find_first_not_of("0123456789") == std::string::npos)
        t = rooms + "-к. квартира";
      else if (!rooms.empty())
        t = "Многокомнатная квартира";
      if (!t.empty()) {
        if (auto sq = attribute(ad, "Square"); !sq.empty())
          t += ", " + sq + " м²";
        auto floor = attribute(ad, "Floor"), floors = attribute(ad, "Floors");
        if (!floor.empty() && !floors.empty())
          t += ", " + floor + "/" + floors + " эт.";
      }
      ad.title = t;
    }
    if (ad.title.empty())
      problem(ad, "Title",
              "the ad has no Title; it may be left out only for cars (made from Make, Model "
              "and Year) and flats (from Rooms, Square, Floor and Floors)");
  }

  const reader_limits& lim_;
};

// --- Yandex YML ------------------------------------------------------------------------------

class yml_reader final : public format_reader {
public:
  explicit yml_reader(const reader_limits& lim) : lim_(lim) {}

  element_role classify(int depth, std::string_view name) override {
    if (depth == 2)
      return name == "shop" ? element_role::descend : element_role::skip;
    if (depth == 3) {
      section_ = name;
      return name == "categories" || name == "offers" ? element_role::descend : element_role::skip;
    }
    if (depth == 4) {
      if (section_ == "categories" && name == "category")
        return element_role::side;
      if (section_ == "offers" && name == "offer")
        return element_role::item;
    }
    return element_role::skip;
  }

  bool side(const xmlNode* node, std::string& why) override {
    if (!audit(node, 4, lim_, why))
      return false;
    if (categories_.size() >= lim_.max_offers) {
      why = "over " + std::to_string(lim_.max_offers) + " categories in one feed (feed.max_offers)";
      return false;
    }
    auto id = prop(node, "id");
    if (!id.empty())
      categories_[id] = {text(node), prop(node, "parentId")};
    return true;
  }

  bool item(const xmlNode* node, int depth, feed_ad& ad, std::string& why) override {
    if (!audit(node, depth, lim_, why))
      return false;
    ad.external_id = prop(node, "id");
    if (prop(node, "available") == "false")
      ad.active = false;
    std::string name, type_prefix, vendor, model, category_id;
    for (auto* c = node->children; c; c = c->next) {
      if (c->type != XML_ELEMENT_NODE)
        continue;
      auto n = name_of(c);
      if (n == "name") {
        name = text(c);
      } else if (n == "typePrefix") {
        type_prefix = text(c);
      } else if (n == "vendor") {
        vendor = text(c);
      } else if (n == "model") {
        model = text(c);
      } else if (n == "description") {
        ad.description = text(c);
      } else if (n == "price") {
        set_price(ad, "price", text(c));
      } else if (n == "currencyId") {
        set_currency(ad, "currencyId", text(c));
      } else if (n == "categoryId") {
        category_id = text(c);
      } else if (n == "picture") {
        add_photo(ad, "picture", text(c));
      } else if (n == "video") {
        set_video(ad, "video", text(c));
      } else if (n == "param") {
        auto value = text(c);
        if (auto unit = prop(c, "unit"); !unit.empty() && !value.empty())
          value += " " + unit;
        if (!value.empty())
          ad.attributes.emplace_back(prop(c, "name"), std::move(value));
      }
    }
    if (!vendor.empty())
      ad.attributes.emplace_back("vendor", vendor);
    if (!name.empty()) {
      ad.title = std::move(name);
    } else {
      // vendor.model offers: "typePrefix vendor model".
      for (auto* part : {&type_prefix, &vendor, &model})
        if (!part->empty())
          ad.title += (ad.title.empty() ? "" : " ") + *part;
      if (model.empty())
        problem(ad, "name", "the offer has neither <name> nor <model>");
    }
    if (ad.currency.empty())
      ad.currency = "RUB";
    require_id(ad, "@id");
    set_category(ad, category_id);
    return true;
  }

private:
  void set_category(feed_ad& ad, const std::string& id) {
    if (id.empty()) {
      problem(ad, "categoryId", "the offer has no categoryId", problem_type::category);
      return;
    }
    std::vector<std::string> path;
    auto at = id;
    for (int guard = 0; !at.empty() && guard < 16; ++guard) {
      auto it = categories_.find(at);
      if (it == categories_.end())
        break;
      path.push_back(it->second.name);
      at = it->second.parent;
    }
    if (path.empty()) {
      problem(ad, "categoryId", "the categoryId " + id + " is not among the feed's <categories>",
              problem_type::category);
      return;
    }
    ad.category.assign(path.rbegin(), path.rend());
  }

  struct category {
    std::string name, parent;
  };
  const reader_limits& lim_;
  std::string section_;
  std::unordered_map<std::string, category> categories_;
};

} // namespace

std::optional<feed_format> format_of_root(std::string_view root) {
  if (root == "feed")
    return feed_format::native;
  if (root == "Ads")
    return feed_format::avito;
  if (root == "yml_catalog")
    return feed_format::yml;
  return std::nullopt;
}

std::unique_ptr<format_reader> make_format_reader(feed_format f, const reader_limits& limits) {
  switch (f) {
    case feed_format::native: return std::make_unique<native_reader>(limits);
    case feed_format::avito: return std::make_unique<avito_reader>(limits);
    case feed_format::yml: return std::make_unique<yml_reader>(limits);
    case feed_format::parsed: return nullptr; // not XML: json_lines.cpp
  }
  return nullptr;
}

} // namespace gost::feeds
