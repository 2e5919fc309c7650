#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <caf/expected.hpp>

#include "gost/offers/content_rules.hpp"
#include "gost/v1/offer.pb.h"

namespace gost {

/// The rules of one offer's life, without actors or storage: what a create, update or delete
/// turns into given what is stored now. The offer actor asks it, stores the answer, and calls
/// `committed` once the store confirmed. Errors are gost::errc values with a
/// message for the client.
class offer_entity {
public:
  using time_point = std::chrono::system_clock::time_point;

  offer_entity() = default;
  explicit offer_entity(std::string id) { offer_.set_id(std::move(id)); }

  /// The offer's id (kept in the offer's own id field, also while nothing is loaded).
  const std::string& id() const noexcept { return offer_.id(); }

  /// Nothing loaded yet.
  bool loaded() const noexcept { return status_ != status::unknown; }
  /// The stored offer; nullptr when it does not exist (or was deleted).
  const v1::Offer* current() const noexcept {
    return status_ == status::present ? &offer_ : nullptr;
  }

  /// What the store holds now (from a load or a confirmed write).
  void committed(std::optional<v1::Offer> offer) {
    if (offer) {
      if (offer->id().empty())
        offer->set_id(offer_.id());
      offer_ = std::move(*offer);
      status_ = status::present;
    } else {
      reset_to_id();
      status_ = status::absent;
    }
  }

  /// Back to nothing loaded (the next event loads again).
  void forget() {
    reset_to_id();
    status_ = status::unknown;
  }

  /// The offer to insert: version 1, both timestamps `now`, source defaulting to manual; the
  /// content rules (content_rules.hpp) checked within `limits` (errc::invalid_argument naming
  /// the field).
  caf::expected<v1::Offer> prepare_create(v1::Offer in, time_point now,
                                          const offer_limits& limits) const;

  /// The new content with version + 1, created_at kept and updated_at `now`; `expected` is
  /// the version the client saw or any_version (-1). A non-empty `mask` (comma-separated
  /// top-level field names, checked by the caller) takes only those fields from `in` and
  /// keeps the others as stored; a masked field absent from `in` is cleared. The content rules
  /// are checked on the merged offer, within `limits`.
  caf::expected<v1::Offer> prepare_update(v1::Offer in, int64_t expected, time_point now,
                                          const offer_limits& limits,
                                          const std::string& mask = {}) const;

  /// The version to delete at (checked against `expected` unless it is any_version).
  caf::expected<int64_t> prepare_delete(int64_t expected) const;

private:
  // A plain Offer and a status byte rather than optional<Offer> and a flag: 8 bytes less in
  // every resident offer actor.
  enum class status : uint8_t { unknown, absent, present };
  void reset_to_id() {
    // A fresh message gives back the old offer's memory (Clear() would keep its strings).
    v1::Offer fresh;
    fresh.set_id(offer_.id());
    offer_ = std::move(fresh);
  }

  v1::Offer offer_;
  status status_ = status::unknown;
};

} // namespace gost
