#pragma once
// A result row as the API says it (gost.v1.ImageResponse), shared by ImageService and the
// notifications (images.notify_topic): one place maps statuses and parses stored results.

#include "gost/images/request.hpp"
#include "gost/persistence/images/images.hpp"
#include "gost/v1/images.pb.h"

namespace gost::images {

v1::ImageFunction to_proto(function fn);
/// The function of a proto code (RATIO for anything unknown: callers validate first).
function from_proto(int fn);

/// Fills status, result or error and attempts of `out` from `row` of function `fn`. A stored
/// value that does not parse answers ERROR `internal` (ask again with options.compute).
void fill_response(function fn, const persistence::image_result& row, v1::ImageResponse& out);

/// The notification of a finished row (DONE or ERROR): its Kafka key is `row.key`.
v1::ImageNotice make_notice(const task_key& task, const persistence::image_result& row);

} // namespace gost::images
