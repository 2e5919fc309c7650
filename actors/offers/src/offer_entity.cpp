#include "gost/offers/offer_entity.hpp"

#include <google/protobuf/field_mask.pb.h>
#include <google/protobuf/util/field_mask_util.h>

#include <google/protobuf/util/time_util.h>

#include "gost/core/errc.hpp"
#include "gost/offers/protocol.hpp"

namespace gost {

namespace {

void stamp(google::protobuf::Timestamp* ts, offer_entity::time_point now) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  *ts = google::protobuf::util::TimeUtil::NanosecondsToTimestamp(ns);
}

caf::error missing(const std::string& id) {
  return make_error(errc::not_found, "offer " + id + " does not exist");
}

caf::error check_version(const v1::Offer& cur, int64_t expected) {
  if (expected != any_version && expected != cur.version())
    return make_error(errc::conflict, "offer " + cur.id() + " is at version "
                                        + std::to_string(cur.version()) + ", not the expected "
                                        + std::to_string(expected) + "; read it again and retry");
  return caf::error{};
}

} // namespace

caf::expected<v1::Offer> offer_entity::prepare_create(v1::Offer in, time_point now,
                                                      const offer_limits& limits) const {
  if (current())
    return make_error(errc::already_exists, "offer " + id() + " already exists");
  if (auto problem = check_content(in, limits); !problem.empty())
    return make_error(errc::invalid_argument, problem);
  in.set_id(id()); // the entity's id, whatever the content said
  in.set_version(1);
  if (in.source() == v1::OFFER_SOURCE_UNSPECIFIED)
    in.set_source(v1::OFFER_SOURCE_MANUAL);
  stamp(in.mutable_created_at(), now);
  stamp(in.mutable_updated_at(), now);
  return in;
}

caf::expected<v1::Offer> offer_entity::prepare_update(v1::Offer in, int64_t expected,
                                                      time_point now, const offer_limits& limits,
                                                      const std::string& mask) const {
  if (!current())
    return missing(in.id());
  if (auto err = check_version(offer_, expected))
    return err;
  if (!mask.empty()) {
    google::protobuf::FieldMask fm;
    google::protobuf::util::FieldMaskUtil::FromString(mask, &fm);
    google::protobuf::util::FieldMaskUtil::MergeOptions opts;
    opts.set_replace_message_fields(true);
    opts.set_replace_repeated_fields(true);
    v1::Offer merged = offer_;
    google::protobuf::util::FieldMaskUtil::MergeMessageTo(in, fm, opts, &merged);
    merged.set_id(in.id());
    in = std::move(merged);
  }
  // The rules hold for the offer as it will be stored (a masked update is checked merged).
  if (auto problem = check_content(in, limits); !problem.empty())
    return make_error(errc::invalid_argument, problem);
  in.set_version(offer_.version() + 1);
  *in.mutable_created_at() = offer_.created_at();
  stamp(in.mutable_updated_at(), now);
  if (in.source() == v1::OFFER_SOURCE_UNSPECIFIED)
    in.set_source(offer_.source());
  return in;
}

caf::expected<int64_t> offer_entity::prepare_delete(int64_t expected) const {
  if (!current())
    return missing(id());
  if (auto err = check_version(offer_, expected))
    return err;
  return offer_.version();
}

} // namespace gost
