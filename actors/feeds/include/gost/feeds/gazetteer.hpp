// The gazetteer (seed 004, "unification"): Russian federal subjects and cities with stable geo
// ids, for geocoding the addresses sellers write and for snapping coordinates to a city. Built
// from gazetteer.tsv (actors/feeds/data/README.md); `builtin()` is the one compiled into the
// binary. Immutable after parse: shared by every thread without locks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gost::feeds {

struct place {
  int64_t geo_id = 0;        // region: its code (77); city: region code * 1000 + n (77001)
  int64_t region_geo_id = 0; // a region's own id for a region
  bool region = false;       // a federal subject rather than a city
  std::string name;          // "Санкт-Петербург"
  std::vector<std::string> synonyms;
  double lat = 0, lon = 0; // a city's centre; a region's administrative centre
  int64_t population = 0;
  size_t order = 0; // position in the file
};

enum class geo_precision { city, region };

struct geo_result {
  std::string error;  // empty on success: what was not recognised
  int64_t geo_id = 0; // the city's id, or the region's for a region-level match
  int64_t region_geo_id = 0;
  std::string region;      // region name
  std::string city;        // city name, empty for a region-level match
  double lat = 0, lon = 0; // the place's coordinates (a caller's own coordinates stay its own)
  geo_precision precision = geo_precision::city;
  bool typo = false;      // matched only through typo tolerance
  double distance_km = 0; // nearest(): distance from the point given

  explicit operator bool() const { return error.empty(); }
};

struct gazetteer_result;

class gazetteer {
public:
  // Parses gazetteer.tsv; on the first problem returns an error naming the file, the line and
  // what is wrong.
  static gazetteer_result parse(std::string_view tsv);

  // The gazetteer compiled into the binary (data/gazetteer.tsv, embedded by data/embed.cmake);
  // parsed on first use, aborts with the message if the embedded file is broken.
  static const gazetteer& builtin();

  // Geocodes an address as sellers write it ("Московская обл., г. Химки, ул. Ленина 5"): the
  // parts between commas are folded; type words (г., обл., респ., край, АО, …) dropped; street
  // and house parts (ул., пр-т, ш., д. 5, …) and districts (р-н) ignored; one- to four-word names
  // and synonyms matched, the longest first. A named region picks among same-named cities; the
  // most specific (latest) city mention wins, then the larger population. Without an exact city,
  // names of 5+ letters may be off by one edit, 9+ letters by two (typo = true). A region alone
  // gives a region-level result.
  geo_result locate(std::string_view address) const;

  // The city nearest to a point by great-circle distance, if within radius_km; else an error.
  geo_result nearest(double lat, double lon, double radius_km = 50) const;

  const place* by_id(int64_t geo_id) const;

  // All places (regions and cities) in file order.
  const std::vector<const place*>& places() const;

  gazetteer(gazetteer&&) noexcept;
  gazetteer& operator=(gazetteer&&) noexcept;
  ~gazetteer();

  struct impl;

private:
  explicit gazetteer(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

struct gazetteer_result {
  std::optional<gazetteer> value;
  std::string error; // "gazetteer.tsv:14: unknown region 99"

  explicit operator bool() const { return value.has_value(); }
};

} // namespace gost::feeds
