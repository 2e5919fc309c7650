#pragma once
// The example stage of docs/adding-a-stage.md: counts an offer's photos into its own state
// whenever the photos change, and marks offers without photos as drafts. A typed stage: its
// state is its own protobuf message (proto/photos/v1/photo_count.proto).

#include "gost/offers/typed_stage.hpp"
#include "photos/v1/photo_count.pb.h"

namespace photos {

class photo_count final : public gost::typed_stage<v1::PhotoCount> {
public:
  gost::decision should_process(const gost::v1::Offer& offer,
                                const v1::PhotoCount* state) const override;
  gost::typed_result<v1::PhotoCount> process(const gost::v1::Offer& offer,
                                             const v1::PhotoCount* state) const override;
  /// Only changes of the photos (or the status) make gost ask again.
  std::vector<std::string> interests() const override { return {"photos", "status"}; }
};

} // namespace photos
