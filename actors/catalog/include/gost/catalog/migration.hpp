#pragma once
// The catalog's migration rules, as data (issue 25 item 1, docs/catalog-evolution.md): how
// the categories and attributes of catalog version N become those of version N+1 — renames,
// merges (several old categories into one), splits (one old category into several, chosen by
// an attribute's value), attribute renames and value mappings — and what that means for one
// offer: moved, unchanged, or ambiguous (with the reason, never a guess). Plain: no CAF, no
// database; the `catalog.evolve` stage (evolve_stage.hpp) only applies it.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "gost/v1/offer.pb.h"

namespace gost::catalog {

/// What a migration does to one offer.
enum class outcome { unchanged, moved, ambiguous };

struct apply_result {
  outcome what = outcome::unchanged;
  std::string reason; ///< ambiguous: why, one line
};

/// One target of a split: the offers whose `attribute` has one of `values` go to `category`.
struct split_target {
  std::string category;
  std::string attribute;
  std::vector<std::string> values;
};

struct parse_result;

/// The migration from catalog version `from()` to `to()` (= from + 1). Immutable after parse,
/// so one is shared by every thread.
class migration {
public:
  /// Parses a migration file (format: docs/catalog-evolution.md); `file` names it in errors.
  static parse_result parse(std::string_view text, std::string_view file);

  int from() const noexcept { return from_; }
  int to() const noexcept { return to_; }

  /// Moves `offer`'s category and attributes to version `to()`. Ambiguous: `offer` is left as
  /// it was. Category rules come first (a split decides by the attributes as the offer has
  /// them), then attribute renames, then value mappings (both named by the new category and
  /// the new attribute names; `*`: every category).
  apply_result apply(v1::Offer& offer) const;

private:
  int from_ = 0;
  int to_ = 0;
  std::map<std::string, std::string> renames_; ///< old category -> new (renames and merges)
  std::map<std::string, std::vector<split_target>> splits_; ///< old category -> targets
  /// (category or "*", old attribute) -> new attribute
  std::map<std::pair<std::string, std::string>, std::string> attr_renames_;
  /// (category or "*", attribute, old value) -> new value
  std::map<std::tuple<std::string, std::string, std::string>, std::string> values_;
};

/// parse()'s answer: the migration, or the first problem ("file:line: what is wrong").
struct parse_result {
  std::optional<migration> value;
  std::string error;
  explicit operator bool() const noexcept { return value.has_value(); }
};

/// The chain of migrations of the stored catalog versions, in order: version `base()` (the
/// catalog an offer without a recorded version is at) up to `current()`.
class evolution {
public:
  /// Checks that the migrations follow each other (each from the previous one's `to`);
  /// the problem, or "" when they do.
  static std::string check(const std::vector<migration>& steps);

  /// `steps` must pass check(); empty: no versions, nothing ever moves.
  explicit evolution(std::vector<migration> steps);

  int base() const noexcept { return steps_.empty() ? 1 : steps_.front().from(); }
  int current() const noexcept { return steps_.empty() ? 1 : steps_.back().to(); }

  struct result {
    outcome what = outcome::unchanged; ///< moved: some step changed the offer
    int version = 0;                   ///< the version reached (the stuck step's `from`)
    int stuck_at = 0;                  ///< ambiguous: the version whose migration could not decide
    std::string reason;
  };

  /// Applies the migrations after `from` (base(), or the offer's recorded version) in order,
  /// stopping at an ambiguous one (the offer keeps what the earlier steps did).
  result apply(v1::Offer& offer, int from) const;

private:
  std::vector<migration> steps_;
};

} // namespace gost::catalog
