#include "watchlist.hpp"

#include <algorithm>

namespace watchlist {

namespace {

int64_t ms_of(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

void sweep_later(gost::entity_context& ctx, std::chrono::milliseconds after) {
  v1::WatchlistEvent sweep;
  sweep.mutable_sweep();
  ctx.set_timer("sweep", after, sweep); // replaces the pending "sweep", if any
}

} // namespace

void watchlist::handle(v1::Watchlist& w, const v1::WatchlistEvent& e,
                       gost::entity_context& ctx) const {
  v1::WatchlistReply reply;
  auto* entries = w.mutable_entries();
  auto find = [&](const std::string& id) {
    return std::find_if(entries->begin(), entries->end(),
                        [&](const auto& x) { return x.offer_id() == id; });
  };
  switch (e.kind_case()) {
    case v1::WatchlistEvent::kAdd: {
      auto& id = e.add().offer_id();
      if (id.empty())
        throw gost::refused(gost::errc::invalid_argument, "add.offer_id is required");
      if (find(id) == entries->end()) {
        if (w.entries_size() >= max_entries)
          throw gost::refused(gost::errc::failed_precondition,
                              "the watchlist holds " + std::to_string(max_entries)
                                + " offers already: remove one first");
        auto* x = w.add_entries();
        x->set_offer_id(id);
        x->set_added_at_ms(ms_of(ctx.now()));
        reply.set_changed(true);
        sweep_later(ctx, sweep_after);
      }
      break;
    }
    case v1::WatchlistEvent::kRemove: {
      auto at = find(e.remove().offer_id());
      if (at != entries->end()) {
        entries->erase(at);
        reply.set_changed(true);
        if (w.entries_size() == 0)
          ctx.cancel_timer("sweep"); // nothing left to sweep
        else
          sweep_later(ctx, sweep_after);
      }
      break;
    }
    case v1::WatchlistEvent::kSweep: {
      auto cutoff = ms_of(ctx.now()) - std::chrono::milliseconds{max_age}.count();
      auto old = std::remove_if(entries->begin(), entries->end(),
                                [&](const auto& x) { return x.added_at_ms() < cutoff; });
      auto removed = std::distance(old, entries->end());
      entries->erase(old, entries->end());
      w.set_swept(w.swept() + removed);
      reply.set_changed(removed > 0);
      if (w.entries_size() > 0)
        sweep_later(ctx, sweep_after);
      break;
    }
    default: throw gost::refused(gost::errc::invalid_argument, "a WatchlistEvent needs a kind");
  }
  reply.set_size(w.entries_size());
  ctx.reply(reply);
}

} // namespace watchlist
