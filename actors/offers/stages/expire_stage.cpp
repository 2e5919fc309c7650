#include <google/protobuf/util/time_util.h>

#include "gost/offers/builtin_stages.hpp"

namespace gost {

namespace {

using google::protobuf::util::TimeUtil;

class expire_stage final : public stage {
public:
  explicit expire_stage(std::chrono::milliseconds after) : after_(after) {}

  decision should_process(const v1::Offer& offer, const google::protobuf::Any*) const override {
    if (offer.status() != v1::OFFER_STATUS_ACTIVE)
      return decision::skip();
    auto deadline = deadline_of(offer);
    return stage_clock::now() >= deadline ? decision::process() : decision::timer(deadline);
  }

  stage_result process(const v1::Offer& offer, const google::protobuf::Any*) const override {
    stage_result r;
    if (offer.status() != v1::OFFER_STATUS_ACTIVE)
      return r; // re-checked: the offer may have changed since it was queued
    auto deadline = deadline_of(offer);
    if (stage_clock::now() < deadline) {
      r.timer = deadline;
      return r;
    }
    r.offer = offer;
    r.offer->set_status(v1::OFFER_STATUS_INACTIVE);
    return r;
  }

  std::vector<std::string> interests() const override { return {"status", "created_at"}; }

private:
  stage_clock::time_point deadline_of(const v1::Offer& offer) const {
    auto created = std::chrono::microseconds{TimeUtil::TimestampToMicroseconds(offer.created_at())};
    return stage_clock::time_point{
      std::chrono::duration_cast<stage_clock::duration>(created + after_)};
  }

  std::chrono::milliseconds after_;
};

} // namespace

std::shared_ptr<const stage> make_expire_stage(std::chrono::milliseconds after) {
  return std::make_shared<expire_stage>(after);
}

} // namespace gost
