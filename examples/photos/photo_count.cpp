#include "photo_count.hpp"

namespace photos {

namespace {

v1::PhotoCount count(const gost::v1::Offer& offer) {
  v1::PhotoCount c;
  c.set_photos(offer.photos_size());
  for (auto& p : offer.photos())
    c.set_without_url(c.without_url() + (p.url().empty() ? 1 : 0));
  return c;
}

} // namespace

gost::decision photo_count::should_process(const gost::v1::Offer& offer,
                                           const v1::PhotoCount* state) const {
  auto now = count(offer);
  bool same = state != nullptr && state->photos() == now.photos()
              && state->without_url() == now.without_url();
  bool needs_draft = offer.photos_size() == 0 && offer.status() == gost::v1::OFFER_STATUS_ACTIVE;
  return same && !needs_draft ? gost::decision::skip() : gost::decision::process();
}

gost::typed_result<v1::PhotoCount> photo_count::process(const gost::v1::Offer& offer,
                                                        const v1::PhotoCount*) const {
  gost::typed_result<v1::PhotoCount> r;
  r.state = count(offer); // written only when it differs from the stored one
  if (offer.photos_size() == 0 && offer.status() == gost::v1::OFFER_STATUS_ACTIVE) {
    r.offer = offer; // an active offer without photos goes back to draft
    r.offer->set_status(gost::v1::OFFER_STATUS_DRAFT);
  }
  return r;
}

} // namespace photos
