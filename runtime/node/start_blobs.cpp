// The node's one blob store (gost/core/blob_store.hpp) under `images.blob_dir`, when the image
// functions or the feed processor run here. Made before the gRPC API (FeedService.Upload writes
// feed files to it) and housekeeping (the feed cleanup removes them), stopped after all of
// them; start_images gives it the base URL of rotated images once the admin HTTP port is bound.

#include <filesystem>

#include "gost/core/errc.hpp"
#include "node/start.hpp"

namespace gost::runtime {

caf::error start_blob_store(node_context& n) {
  if (!n.cfg.images.enabled && !n.cfg.feeds.enabled)
    return {};
  auto& dir = n.cfg.images.blob_dir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return make_error(errc::invalid_argument, "cannot create images.blob_dir=" + dir + ": "
                                                + ec.message() + "; choose another directory");
  n.blobs = std::make_unique<blob_store>(dir, "");
  n.stops.push("blob store", [&n] { n.blobs.reset(); });
  return {};
}

} // namespace gost::runtime
