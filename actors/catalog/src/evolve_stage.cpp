#include "gost/catalog/evolve_stage.hpp"

#include "gost/offers/typed_stage.hpp"
#include "gost/v1/catalog.pb.h"

namespace gost::catalog {

namespace {

/// The part of an offer the rules read and write (a copy of the whole offer is not needed to
/// decide).
v1::Offer slim_of(const v1::Offer& offer) {
  v1::Offer slim;
  slim.set_category(offer.category());
  *slim.mutable_attributes() = offer.attributes();
  return slim;
}

bool same_attributes(const v1::Offer& a, const v1::Offer& b) {
  if (a.attributes().size() != b.attributes().size())
    return false;
  for (auto& [k, v] : a.attributes()) {
    auto it = b.attributes().find(k);
    if (it == b.attributes().end() || it->second != v)
      return false;
  }
  return true;
}

class evolve_stage final : public typed_stage<v1::CatalogPosition> {
public:
  explicit evolve_stage(std::shared_ptr<const evolution_source> source)
    : source_(std::move(source)) {}

  decision should_process(const v1::Offer& offer, const v1::CatalogPosition* state) const override {
    auto ev = source_->get();
    if (!ev)
      return decision::skip();
    auto from = state ? state->version() : ev->base();
    auto slim = slim_of(offer);
    auto r = ev->apply(slim, from);
    switch (r.what) {
      case outcome::moved: return decision::process();
      case outcome::ambiguous:
        // Recorded already for the same reason: nothing new to say (the offer is asked again
        // when its category or attributes change).
        if (state && state->stuck_at() == r.stuck_at && state->reason() == r.reason
            && state->version() == r.version)
          return decision::skip();
        return decision::process();
      case outcome::unchanged: break;
    }
    // Nothing to move. Without a state it stays implicit (no write for an untouched offer);
    // a stuck state that no longer is gets cleared.
    return state && state->stuck_at() != 0 ? decision::process() : decision::skip();
  }

  typed_result<v1::CatalogPosition> process(const v1::Offer& offer,
                                            const v1::CatalogPosition* state) const override {
    typed_result<v1::CatalogPosition> out;
    auto ev = source_->get();
    if (!ev)
      return out;
    auto from = state ? state->version() : ev->base();
    auto slim = slim_of(offer);
    auto r = ev->apply(slim, from);
    bool changed = slim.category() != offer.category() || !same_attributes(slim, offer);
    if (!changed && r.what != outcome::ambiguous && !(state && state->stuck_at() != 0))
      return out; // re-checked: already moved since it was queued
    v1::CatalogPosition next;
    if (state)
      next = *state;
    next.set_version(r.version);
    next.set_stuck_at(r.stuck_at);
    next.set_reason(r.reason);
    if (changed) {
      if (slim.category() != offer.category())
        next.set_moved_from(offer.category());
      out.offer = offer;
      out.offer->set_category(slim.category());
      *out.offer->mutable_attributes() = slim.attributes();
    }
    out.state = std::move(next);
    return out;
  }

  std::vector<std::string> interests() const override { return {"category", "attributes"}; }

private:
  std::shared_ptr<const evolution_source> source_;
};

} // namespace

std::shared_ptr<const stage> make_evolve_stage(std::shared_ptr<const evolution_source> source) {
  return std::make_shared<evolve_stage>(std::move(source));
}

std::string sweep_token(int version) {
  return std::string{evolve_stage_id} + "@" + std::to_string(version);
}

} // namespace gost::catalog
