#include "gost/feeds/gazetteer.hpp"

#include "gost/feeds/text.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

namespace gost::feeds {

namespace data {
std::string_view gazetteer_tsv();
} // namespace data

namespace {

std::vector<std::string> words(std::string_view folded) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < folded.size()) {
    size_t sp = folded.find(' ', start);
    if (sp == std::string_view::npos)
      sp = folded.size();
    if (sp > start)
      out.emplace_back(folded.substr(start, sp - start));
    start = sp + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& w, size_t from, size_t to) {
  std::string s;
  for (size_t i = from; i < to; ++i) {
    if (i > from)
      s += ' ';
    s += w[i];
  }
  return s;
}

// Words that only say what kind of place follows (or precedes): dropped from addresses and from
// the data's names alike, so "Московская обл." meets "Московская область".
const std::unordered_set<std::string>& type_words() {
  static const std::unordered_set<std::string> s{
    "г",          "гор",     "город",        "пгт",      "п",          "пос", "поселок",
    "рп",         "с",       "село",         "дер",      "деревня",    "ст",  "станица",
    "обл",        "область", "край",         "респ",     "республика", "ао",  "автономный",
    "автономная", "округ",   "федерального", "значения", "россия",     "рф",  "российская",
    "федерация",  "city",    "oblast",       "region",   "russia"};
  return s;
}

// Street markers, possibly of two words ("пр т" is "пр-т" folded). What follows a marker, or the
// word just before a trailing one ("Невский пр-т"), is a street, never a place.
const std::vector<std::vector<std::string>>& street_markers() {
  static const std::vector<std::vector<std::string>> m = [] {
    std::vector<std::vector<std::string>> out;
    for (const char* s :
         {"пр т",   "пр кт",    "пр д",  "б р", "кв л",       "ул",         "улица",
          "просп",  "проспект", "пр",    "пер", "переулок",   "ш",          "шоссе",
          "бульв",  "бульвар",  "бул",   "наб", "набережная", "пл",         "площадь",
          "проезд", "туп",      "тупик", "мкр", "мкрн",       "микрорайон", "квартал",
          "аллея",  "линия",    "тракт", "снт", "тер",        "территория", "st",
          "street", "ave",      "avenue"})
      out.push_back(words(s));
    return out;
  }();
  return m;
}

const std::unordered_set<std::string>& house_words() {
  static const std::unordered_set<std::string> s{
    "д",   "дом",      "кв", "квартира", "корп",     "корпус", "к",
    "стр", "строение", "оф", "офис",     "лит",      "литера", "подъезд",
    "эт",  "этаж",     "вл", "влд",      "владение", "помещ",  "пом"};
  return s;
}

bool district_at(const std::vector<std::string>& t, size_t i) {
  if (t[i] == "район" || t[i] == "р" || t[i] == "мр") {
    if (t[i] == "район")
      return true;
    return i + 1 < t.size() && (t[i + 1] == "н" || t[i + 1] == "он");
  }
  return false;
}

size_t street_marker_at(const std::vector<std::string>& t, size_t i) {
  for (const auto& m : street_markers()) {
    if (i + m.size() > t.size())
      continue;
    bool eq = true;
    for (size_t k = 0; k < m.size() && eq; ++k)
      eq = t[i + k] == m[k];
    if (eq)
      return m.size(); // two-word markers come first in the list
  }
  return 0;
}

bool has_digit(const std::string& w) {
  return std::any_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The matching key of a name: folded, type words dropped.
std::string key_of(std::string_view name) {
  auto w = words(fold(name));
  std::vector<std::string> kept;
  for (auto& x : w)
    if (!type_words().count(x))
      kept.push_back(std::move(x));
  return kept.empty() ? fold(name) : join(kept, 0, kept.size());
}

size_t letters(const std::u32string& s) {
  return static_cast<size_t>(
    std::count_if(s.begin(), s.end(), [](char32_t c) { return c != U' '; }));
}

// Typos tolerated for a name of this many letters: none for short names, where one edit
// turns one real town into another.
size_t typo_allowance(size_t n) {
  return n >= 9 ? 2 : n >= 5 ? 1 : 0;
}

double haversine_km(double lat1, double lon1, double lat2, double lon2) {
  constexpr double r = 6371.0088, rad = 3.14159265358979323846 / 180;
  double dlat = (lat2 - lat1) * rad, dlon = (lon2 - lon1) * rad;
  double a =
    std::sin(dlat / 2) * std::sin(dlat / 2)
    + std::cos(lat1 * rad) * std::cos(lat2 * rad) * std::sin(dlon / 2) * std::sin(dlon / 2);
  return 2 * r * std::asin(std::min(1.0, std::sqrt(a)));
}

template <class T>
bool parse_int(std::string_view s, T& v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

bool parse_double(std::string_view s, double& v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size() && std::isfinite(v);
}

std::string quoted(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

} // namespace

struct gazetteer::impl {
  struct typo_key {
    std::u32string key;
    size_t words;
    size_t allowance;
    const place* p;
  };
  std::vector<std::unique_ptr<place>> owned;
  std::vector<const place*> all;
  std::vector<const place*> cities;
  std::unordered_map<int64_t, const place*> by_id;
  std::unordered_map<std::string, std::vector<const place*>> by_key;
  std::vector<typo_key> typo_keys;
};

gazetteer::gazetteer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
gazetteer::gazetteer(gazetteer&&) noexcept = default;
gazetteer& gazetteer::operator=(gazetteer&&) noexcept = default;
gazetteer::~gazetteer() = default;

gazetteer_result gazetteer::parse(std::string_view text) {
  auto p = std::make_unique<impl>();
  auto fail = [](size_t line, const std::string& what) {
    gazetteer_result r;
    r.error = "gazetteer.tsv:" + std::to_string(line) + ": " + what;
    return r;
  };
  std::vector<tsv_line> lines;
  if (auto e = tsv_lines(text, lines, "gazetteer.tsv"); !e.empty()) {
    gazetteer_result r;
    r.error = std::move(e);
    return r;
  }
  for (auto& l : lines) {
    auto number = l.number;
    const auto& c = l.cells;
    if (c.size() != 8)
      return fail(number, "expected 8 tab-separated cells (kind, geo_id, region_geo_id, name, "
                          "synonyms, lat, lon, population), got "
                            + std::to_string(c.size()));
    auto pl = std::make_unique<place>();
    if (c[0] == "region")
      pl->region = true;
    else if (c[0] != "city")
      return fail(number, "unknown kind " + quoted(c[0]) + " (region or city)");
    if (!parse_int(c[1], pl->geo_id) || pl->geo_id <= 0)
      return fail(number, "bad geo_id " + quoted(c[1]));
    if (p->by_id.count(pl->geo_id))
      return fail(number, "duplicate geo_id " + std::string(c[1]));
    if (!parse_int(c[2], pl->region_geo_id))
      return fail(number, "bad region_geo_id " + quoted(c[2]));
    if (pl->region && pl->region_geo_id != pl->geo_id)
      return fail(number, "a region's region_geo_id must be its own geo_id");
    const place* reg = nullptr;
    if (!pl->region) {
      auto it = p->by_id.find(pl->region_geo_id);
      if (it == p->by_id.end() || !it->second->region)
        return fail(number,
                    "unknown region " + std::string(c[2]) + " (a region comes before its cities)");
      reg = it->second;
    }
    (void)reg;
    pl->name = std::string(c[3]);
    if (fold(pl->name).empty())
      return fail(number, "empty name");
    for (size_t start = 0; !c[4].empty();) {
      size_t bar = c[4].find('|', start);
      auto s = trim(c[4].substr(start, bar == std::string_view::npos ? bar : bar - start));
      if (fold(s).empty())
        return fail(number, "empty synonym in " + quoted(c[4]));
      pl->synonyms.emplace_back(s);
      if (bar == std::string_view::npos)
        break;
      start = bar + 1;
    }
    if (!parse_double(c[5], pl->lat) || pl->lat < -90 || pl->lat > 90)
      return fail(number, "bad latitude " + quoted(c[5]));
    if (!parse_double(c[6], pl->lon) || pl->lon < -180 || pl->lon > 180)
      return fail(number, "bad longitude " + quoted(c[6]));
    if (!parse_int(c[7], pl->population) || pl->population < 0)
      return fail(number, "bad population " + quoted(c[7]));
    pl->order = p->all.size();

    std::vector<std::string> keys;
    std::vector<std::string> names{pl->name};
    names.insert(names.end(), pl->synonyms.begin(), pl->synonyms.end());
    for (const auto& n : names) {
      for (std::string k : {key_of(n), fold(n)}) {
        if (k.empty() || std::find(keys.begin(), keys.end(), k) != keys.end())
          continue;
        keys.push_back(k);
      }
    }
    for (const auto& k : keys) {
      p->by_key[k].push_back(pl.get());
      auto u = to_u32(k);
      size_t allowance = typo_allowance(letters(u));
      if (allowance)
        p->typo_keys.push_back(
          {u, static_cast<size_t>(std::count(k.begin(), k.end(), ' ')) + 1, allowance, pl.get()});
    }
    p->by_id[pl->geo_id] = pl.get();
    p->all.push_back(pl.get());
    if (!pl->region)
      p->cities.push_back(pl.get());
    p->owned.push_back(std::move(pl));
  }
  gazetteer_result r;
  r.value.emplace(gazetteer(std::move(p)));
  return r;
}

const gazetteer& gazetteer::builtin() {
  static const gazetteer g = [] {
    auto r = parse(data::gazetteer_tsv());
    if (!r) {
      std::fprintf(stderr, "gost feeds: the built-in gazetteer is broken: %s\n", r.error.c_str());
      std::abort();
    }
    return std::move(*r.value);
  }();
  return g;
}

const place* gazetteer::by_id(int64_t geo_id) const {
  auto it = impl_->by_id.find(geo_id);
  return it == impl_->by_id.end() ? nullptr : it->second;
}

const std::vector<const place*>& gazetteer::places() const {
  return impl_->all;
}

namespace {

geo_result result_for(const place& p, const gazetteer& g) {
  geo_result r;
  const place* reg = p.region ? &p : g.by_id(p.region_geo_id);
  r.geo_id = p.geo_id;
  r.region_geo_id = p.region_geo_id;
  r.region = reg ? reg->name : std::string();
  r.city = p.region ? std::string() : p.name;
  r.lat = p.lat;
  r.lon = p.lon;
  r.precision = p.region ? geo_precision::region : geo_precision::city;
  return r;
}

} // namespace

geo_result gazetteer::locate(std::string_view address) const {
  struct hit {
    size_t seq; // order of mention in the address
    const place* p;
    unsigned distance;
  };
  std::vector<hit> hits;
  std::vector<std::vector<std::string>> loose; // unmatched word runs, for the typo fallback
  size_t seq = 0;

  // Parts are what sellers separate with commas (and the like); a street in one part never
  // hides the city in another.
  size_t start = 0;
  while (start <= address.size()) {
    size_t end = address.find_first_of(",;\n()", start);
    if (end == std::string_view::npos)
      end = address.size();
    std::vector<std::string> t;
    for (auto& w : words(fold(address.substr(start, end - start))))
      if (!type_words().count(w))
        t.push_back(std::move(w));
    start = end + 1;

    std::vector<hit> part_hits;
    std::vector<std::vector<std::string>> part_loose(1);
    size_t last_hit_end = 0;
    bool drop_part = false;
    for (size_t i = 0; i < t.size();) {
      bool matched = false;
      for (size_t n = std::min<size_t>(4, t.size() - i); n >= 1 && !matched; --n) {
        auto it = impl_->by_key.find(join(t, i, i + n));
        if (it == impl_->by_key.end())
          continue;
        for (const place* p : it->second)
          part_hits.push_back({seq, p, 0});
        ++seq;
        i += n;
        last_hit_end = i;
        matched = true;
        part_loose.emplace_back();
      }
      if (matched)
        continue;
      if (district_at(t, i)) {
        drop_part = true;
        break;
      }
      if (size_t m = street_marker_at(t, i)) {
        bool prefix = i + m < t.size() && !has_digit(t[i + m]) && !house_words().count(t[i + m]);
        if (!prefix && i > 0) {
          // "Тверская ул.": the word before a trailing marker names the street.
          if (last_hit_end == i) {
            size_t s = part_hits.empty() ? 0 : part_hits.back().seq;
            while (!part_hits.empty() && part_hits.back().seq == s)
              part_hits.pop_back();
          } else if (!part_loose.back().empty()) {
            part_loose.back().pop_back();
          }
        }
        break;
      }
      if (has_digit(t[i]) || house_words().count(t[i]))
        break;
      part_loose.back().push_back(t[i]);
      ++i;
    }
    if (drop_part)
      continue;
    hits.insert(hits.end(), part_hits.begin(), part_hits.end());
    for (auto& l : part_loose)
      if (!l.empty())
        loose.push_back(std::move(l));
  }

  bool any_city = std::any_of(hits.begin(), hits.end(), [](const hit& h) { return !h.p->region; });
  bool typo = false;
  if (!any_city) {
    // Typo fallback: loose word runs against every name of 5+ letters with as many words.
    // A few hundred names, run only for addresses without an exact city.
    std::vector<hit> best;
    size_t best_d = 3;
    for (const auto& run : loose)
      for (size_t i = 0; i < run.size(); ++i)
        for (size_t n = 1; n <= 3 && i + n <= run.size(); ++n) {
          auto u = to_u32(join(run, i, i + n));
          for (const auto& k : impl_->typo_keys) {
            if (k.words != n)
              continue;
            size_t lk = k.key.size(), lu = u.size();
            if ((lk > lu ? lk - lu : lu - lk) > k.allowance)
              continue;
            size_t d = edit_distance(u, k.key, k.allowance);
            if (d == 0 || d > k.allowance)
              continue;
            if (d < best_d)
              best_d = d, best.clear();
            if (d == best_d)
              best.push_back({seq, k.p, static_cast<unsigned>(d)});
          }
        }
    // With a region named exactly, a typo-matched city elsewhere is a coincidence, not a guess.
    bool region_named =
      std::any_of(hits.begin(), hits.end(), [](const hit& h) { return h.p->region; });
    if (region_named)
      best.erase(
        std::remove_if(best.begin(), best.end(),
                       [&](const hit& h) {
                         return h.p->region
                                || std::none_of(hits.begin(), hits.end(), [&](const hit& e) {
                                     return e.p->region && e.p->geo_id == h.p->region_geo_id;
                                   });
                       }),
        best.end());
    if (!best.empty()) {
      typo = true;
      hits.insert(hits.end(), best.begin(), best.end());
    }
  }

  std::vector<int64_t> regions;
  for (const auto& h : hits)
    if (h.p->region && std::find(regions.begin(), regions.end(), h.p->geo_id) == regions.end())
      regions.push_back(h.p->geo_id);
  const place* city = nullptr;
  size_t city_seq = 0;
  bool city_in_region = false;
  for (const auto& h : hits) {
    if (h.p->region)
      continue;
    bool in_region = std::find(regions.begin(), regions.end(), h.p->region_geo_id) != regions.end();
    bool better =
      !city || (in_region && !city_in_region)
      || (in_region == city_in_region
          && (h.seq > city_seq || (h.seq == city_seq && h.p->population > city->population)));
    if (better)
      city = h.p, city_seq = h.seq, city_in_region = in_region;
  }
  geo_result r;
  if (city) {
    r = result_for(*city, *this);
  } else if (!regions.empty()) {
    r = result_for(*by_id(regions.front()), *this);
  } else {
    // Echo the address safely: bad bytes replaced, long text cut.
    auto shown = to_u32(trim(address));
    bool cut = shown.size() > 120;
    if (cut)
      shown.resize(120);
    r.error = "no city or region recognised in " + quoted(to_utf8(shown) + (cut ? "…" : ""));
    return r;
  }
  r.typo = typo;
  return r;
}

geo_result gazetteer::nearest(double lat, double lon, double radius_km) const {
  geo_result r;
  if (!std::isfinite(lat) || !std::isfinite(lon) || lat < -90 || lat > 90 || lon < -180
      || lon > 180) {
    r.error = "coordinates out of range";
    return r;
  }
  const place* best = nullptr;
  double best_d = 0;
  for (const place* c : impl_->cities) {
    double d = haversine_km(lat, lon, c->lat, c->lon);
    if (!best || d < best_d)
      best = c, best_d = d;
  }
  if (!best || best_d > radius_km) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "no city within %.0f km of %.5f, %.5f", radius_km, lat, lon);
    r.error = buf;
    return r;
  }
  r = result_for(*best, *this);
  r.distance_km = best_d;
  return r;
}

} // namespace gost::feeds
