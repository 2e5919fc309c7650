#pragma once
// Test support for the image functions end to end: JPEGs made with libvips, and a gostd child
// serving ImageService with its pools polling fast (images from loopback allowed). Tests that
// include this link libvips and define GOSTD_PATH.

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <vips/vips8>

#include "gost/testing/node.hpp"
#include "gost/v1/images.grpc.pb.h"

namespace gost::testing {

using namespace std::chrono_literals;

inline std::string jpeg(int w, int h) {
  static bool started = [] { return VIPS_INIT("gost-test") == 0; }();
  REQUIRE(started);
  auto img = vips::VImage::black(w, h, vips::VImage::option()->set("bands", 3))
               .new_from_image({40, 160, 220})
               .cast(VIPS_FORMAT_UCHAR);
  void* buf = nullptr;
  size_t size = 0;
  img.write_to_buffer(".jpg", &buf, &size);
  std::string out(static_cast<const char*>(buf), size);
  g_free(buf);
  return out;
}

struct image_node {
  temp_db& db;
  std::vector<std::string> extra_;
  std::string port_file = temp_path("gostd-images");
  std::string blobs = temp_path("gostd-blobs");
  std::unique_ptr<child_process> proc;
  int grpc_port = 0, http_port = 0;
  std::unique_ptr<v1::ImageService::Stub> stub;

  /// `extra`: more gostd flags (images.redis.address, images.notify_topic, ...).
  explicit image_node(temp_db& d, std::vector<std::string> extra = {})
    : db(d), extra_(std::move(extra)) {
    start();
  }
  ~image_node() { std::filesystem::remove_all(blobs); }
  void start() {
    std::remove(port_file.c_str());
    std::vector<std::string> flags{"--http.listen=127.0.0.1:0",
                                   "--images.allow_private_sources=true", "--images.poll=20ms",
                                   "--images.retry_delay=50ms", "--images.blob_dir=" + blobs};
    flags.insert(flags.end(), extra_.begin(), extra_.end());
    proc = std::make_unique<child_process>(GOSTD_PATH, node_args(db, port_file, flags));
    std::tie(grpc_port, http_port) = read_ports(*proc, port_file);
    stub = v1::ImageService::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port),
                                                         grpc::InsecureChannelCredentials()));
  }

  grpc::Status call(grpc::Status (v1::ImageService::Stub::*m)(grpc::ClientContext*,
                                                              const v1::ImageRequest&,
                                                              v1::ImageResponse*),
                    const v1::ImageRequest& req, v1::ImageResponse& resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    return ((*stub).*m)(&ctx, req, &resp);
  }
  /// One Batch call of `fn` on `urls` (default options), which must succeed.
  v1::ImageBatchResponse batch(v1::ImageFunction fn, const std::vector<std::string>& urls) {
    v1::ImageBatchRequest req;
    req.set_function(fn);
    for (auto& u : urls)
      req.add_requests()->set_url(u);
    v1::ImageBatchResponse out;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto s = stub->Batch(&ctx, req, &out);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    return out;
  }

  /// Calls until the answer is no longer PENDING.
  v1::ImageResponse settled(grpc::Status (v1::ImageService::Stub::*m)(grpc::ClientContext*,
                                                                      const v1::ImageRequest&,
                                                                      v1::ImageResponse*),
                            const v1::ImageRequest& req) {
    v1::ImageResponse resp;
    eventually(20s, [&] {
      resp.Clear();
      REQUIRE(call(m, req, resp).ok());
      return resp.status() != v1::IMAGE_STATUS_PENDING;
    });
    return resp;
  }
};

inline v1::ImageRequest at(const std::string& url) {
  v1::ImageRequest r;
  r.set_url(url);
  return r;
}

} // namespace gost::testing
