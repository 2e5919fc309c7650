#pragma once
// Unification (seed 004 "Унификация объявлений"): a feed_ad as the seller wrote it becomes a
// gost offer in the catalog's terms — the category recognised from its names and synonyms, the
// attributes mapped onto the catalog's ids and allowed values, the address geocoded to a
// place of the gazetteer. What cannot be recognised is an offer_problem of the seed's types:
// an unknown category and a bad attribute value are errors (the offer is not sent; the store
// hears of it as rejected), an attribute the category does not know is a warning (dropped), an
// address that cannot be placed is a `geocoding` error. Plain code, no I/O: the catalog and
// the gazetteer are in memory (docs/feed-format.md "Unification").

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gost/feeds/feed_reader.hpp"
#include "gost/v1/offer.pb.h"

namespace gost::feeds {

class catalog;
class gazetteer;

/// Where addresses the gazetteer cannot place are asked next (`feed.geocoder_url`): another
/// service, which may fail for a while.
class geocoder {
public:
  struct answer {
    enum kind_t { found, not_found, unavailable } kind = not_found;
    int64_t geo_id = 0;
    int64_t region_geo_id = 0;
    std::string region;
    std::string city;
    std::string message; ///< not_found / unavailable: why
  };
  virtual ~geocoder() = default;
  /// Thread-safe; may block (it runs on a processor worker).
  virtual answer locate(const std::string& address) const = 0;
};

/// The HTTP geocoder of `feed.geocoder_url` (gost.v1.GeocoderAnswer, proto/gost/v1/geocoder.proto)
/// through the one outbound client.
std::shared_ptr<const geocoder>
make_http_geocoder(std::string url, std::chrono::milliseconds timeout, bool allow_private);

/// A feed's own settings that unification uses.
struct unify_options {
  /// Used when an offer names no address and no coordinates (YML offers carry none): the
  /// seller's address from the feed's settings.
  std::string default_address;
  /// The offers' source: FEED, or PARSED for feeds parsed from elsewhere.
  v1::OfferSource source = v1::OFFER_SOURCE_FEED;
};

struct unified {
  v1::Offer offer;
  std::vector<offer_problem> problems; ///< the reader's and unification's, in that order
  /// Unification failed for now (the external geocoder is away): the offer is not sent to be
  /// applied but carried (as rejected, with a reason saying so), so the store keeps its stored
  /// version and does not delete it (seed: "если унификация упала из-за transient ошибки").
  bool transient = false;
  /// Whether an `error` problem (or a transient failure) keeps the offer from the store.
  bool rejected() const;
  /// "field: message" of the first error, for the store's REJECTED answer.
  std::string reason() const;
};

class unifier {
public:
  /// Both outlive the unifier (the builtin data, or data loaded and swapped by a reload).
  unifier(std::shared_ptr<const catalog> cat, std::shared_ptr<const gazetteer> geo,
          std::shared_ptr<const geocoder> fallback = nullptr);

  /// One offer. Thread-safe: the unifier is read-only.
  unified unify(feed_ad&& ad, const unify_options& opts) const;

  const catalog& categories() const noexcept { return *catalog_; }

private:
  std::shared_ptr<const catalog> catalog_;
  std::shared_ptr<const gazetteer> gazetteer_;
  std::shared_ptr<const geocoder> fallback_;
};

/// The catalog and gazetteer in use: the built-in ones, or those of a directory
/// (`feed.catalog_dir`: categories.tsv, attributes.tsv, gazetteer.tsv), loaded at start and
/// loaded again when a file changes. A broken file is refused with its file, line and reason,
/// and the data in use stays. Thread-safe: a load takes `current()` once and keeps it.
class unification_data {
public:
  /// The data compiled into gost.
  explicit unification_data(std::shared_ptr<const geocoder> fallback = nullptr);
  /// The data of `dir`; `error` (file:line: reason) and null when it cannot be loaded.
  static std::shared_ptr<unification_data>
  from_dir(const std::string& dir, std::shared_ptr<const geocoder> fallback, std::string& error);
  std::shared_ptr<const unifier> current() const;
  /// Reloads when a file of the directory changed since the last load (no directory: nothing
  /// to do). True when new data is in use; false with `error` when the files are broken.
  bool reload_if_changed(std::string& error);

private:
  bool load(std::string& error);
  mutable std::mutex mtx_;
  std::shared_ptr<const unifier> current_;
  std::shared_ptr<const geocoder> fallback_;
  std::string dir_;
  std::vector<std::filesystem::file_time_type> stamps_;
};

} // namespace gost::feeds
