#pragma once
// Unification (seed 004 "Унификация объявлений"): a feed_ad as the seller wrote it becomes a
// gost offer in the catalog's terms — the category recognised from its names and synonyms, the
// attributes mapped onto the catalog's ids and allowed values, the address geocoded to a
// place of the gazetteer. What cannot be recognised is an offer_problem of the seed's types:
// an unknown category and a bad attribute value are errors (the offer is not sent; the store
// hears of it as rejected), an attribute the category does not know is a warning (dropped), an
// address that cannot be placed is a `geocoding` error. Plain code, no I/O: the catalog and
// the gazetteer are in memory (docs/feed-format.md "Unification").

#include <memory>
#include <string>
#include <vector>

#include "gost/feeds/feed_reader.hpp"
#include "gost/v1/offer.pb.h"

namespace gost::feeds {

class catalog;
class gazetteer;

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
  /// Whether an `error` problem keeps the offer from the store.
  bool rejected() const;
  /// "field: message" of the first error, for the store's REJECTED answer.
  std::string reason() const;
};

class unifier {
public:
  /// Both outlive the unifier (the builtin data, or data loaded and swapped by a reload).
  unifier(std::shared_ptr<const catalog> cat, std::shared_ptr<const gazetteer> geo);

  /// One offer. Thread-safe: the unifier is read-only.
  unified unify(feed_ad&& ad, const unify_options& opts) const;

  const catalog& categories() const noexcept { return *catalog_; }

private:
  std::shared_ptr<const catalog> catalog_;
  std::shared_ptr<const gazetteer> gazetteer_;
};

} // namespace gost::feeds
