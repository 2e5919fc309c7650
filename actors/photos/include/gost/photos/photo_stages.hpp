#pragma once
// The built-in photo stages (issue 16 item 9, MISSION G12): stages of gost over the image
// functions (seed 003). They ask the image service the way its API does (cache first; a miss
// queues one task) and never wait for a computation: a photo still computing stays pending in
// the stage's state and the stage comes back by a timer, each time later.
//
//   photos.download     every photo fetched once (its Ratio task); failures per photo
//   photos.ratio_color  ratio and main colour per photo
//   photos.orientation  photos with a non-upright EXIF orientation rotated upright (Rotate)
//
// States: gost.v1.PhotoDownloads, PhotoRatioColors, PhotoOrientations (proto/gost/v1/photos.proto).

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "gost/images/ask.hpp"
#include "gost/offers/stage.hpp"

namespace gost::v1 {
class ImageResponse;
}

namespace gost::photos {

/// How the stages reach the image service: each ask answered in order (from the cache, or
/// PENDING with a task queued). Throws `unavailable_error` when the service cannot answer
/// (its database is down): the run is retried with back-off and never dead-lettered.
class image_asker {
public:
  virtual ~image_asker() = default;
  virtual std::vector<v1::ImageResponse> ask(const std::vector<images::image_ask>& asks) const = 0;
};

/// The node's asker: `images::ask_images` on the shard groups' databases `where()` returns
/// (null until PostgreSQL is started: unavailable; its shard count is the partitions), tasks
/// queued where `queue()` says (null, or no `queue`: the PostgreSQL queue; images.queue=kafka:
/// the Kafka queue).
std::shared_ptr<const image_asker>
make_pg_asker(std::function<const persistence::shard_placement*()> where,
              std::function<images::task_queue*()> queue = {});

struct photo_stage_options {
  std::shared_ptr<const image_asker> images;
  /// How long results (and pending statuses) are kept: images.ttl.
  std::chrono::milliseconds ttl{std::chrono::hours{24 * 7}};
  /// The first wait before asking again for results still pending; doubled each time.
  std::chrono::milliseconds recheck{1000};
  std::chrono::milliseconds recheck_max{300'000};
};

/// The ids the stages are registered under (stored in queues and states: never rename).
inline constexpr const char* download_stage_id = "photos.download";
inline constexpr const char* ratio_color_stage_id = "photos.ratio_color";
inline constexpr const char* orientation_stage_id = "photos.orientation";

std::shared_ptr<const stage> make_download_stage(photo_stage_options opts);
std::shared_ptr<const stage> make_ratio_color_stage(photo_stage_options opts);
std::shared_ptr<const stage> make_orientation_stage(photo_stage_options opts);

/// The wait before the next ask after `rounds` asks that left something pending:
/// recheck × 2^rounds, at most recheck_max.
std::chrono::milliseconds recheck_delay(int rounds, std::chrono::milliseconds recheck,
                                        std::chrono::milliseconds recheck_max);

} // namespace gost::photos
