#pragma once
// A buyer's watchlist as a gost actor type (docs/adding-an-actor-type.md): asks that answer
// and refuse, and a named timer that is replaced on every change.
//
// - Add: adds an offer, answering the new size; refused (FAILED_PRECONDITION) when the list
//   holds `max_entries` already. Adding an offer that is there changes nothing.
// - Remove: removes an offer.
// - Every change (re)sets the named timer "sweep" to `sweep_after` from now: the list is swept
//   once it has been left alone that long, never once per add. The sweep removes entries older
//   than `max_age` and sets itself again while entries remain.

#include <chrono>
#include <string>

#include "gost/entities/entity_type.hpp"
#include "watchlist/v1/watchlist.pb.h"

namespace watchlist {

class watchlist final
  : public gost::entity_type<v1::Watchlist, v1::WatchlistEvent, v1::WatchlistReply> {
public:
  static constexpr int max_entries = 100;
  static constexpr std::chrono::hours sweep_after{24};
  static constexpr std::chrono::hours max_age{24 * 30};

  std::string kind() const override { return "watchlist"; }
  void handle(v1::Watchlist& w, const v1::WatchlistEvent& e,
              gost::entity_context& ctx) const override;
};

} // namespace watchlist
