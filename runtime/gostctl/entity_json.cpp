#include "gostctl/entity_json.hpp"

#include <cstdio>

namespace gost::ctl {

std::unique_ptr<kind_codec> kind_codec::load(const cli& c, const std::string& kind, int& rc) {
  auto admin = admin_stub(c);
  grpc::ClientContext ctx;
  call_context(ctx, c);
  v1::DescribeTypesResponse resp;
  if (auto s = admin->DescribeTypes(&ctx, v1::DescribeTypesRequest{}, &resp); !s.ok()) {
    rc = fail(s);
    return nullptr;
  }
  std::string kinds;
  for (auto& t : resp.types()) {
    if (t.kind() != v1::PublishedType::ENTITY)
      continue;
    if (t.id() == kind)
      return std::unique_ptr<kind_codec>{new kind_codec{
        kind, t.event_type(), std::make_unique<runtime::rpc::type_pool>(resp.files())}};
    kinds += (kinds.empty() ? "" : ", ") + t.id();
  }
  std::fprintf(stderr, "gostctl %s: `%s` is not an entity kind of the node (its kinds: %s)\n",
               c.cmd.c_str(), kind.c_str(), kinds.empty() ? "none" : kinds.c_str());
  rc = 2;
  return nullptr;
}

bool kind_codec::encode(const cli& c, const std::string& json, google::protobuf::Any& out) const {
  auto problem = pool_->from_json(event_type_, json, out);
  if (problem.empty())
    return true;
  std::fprintf(stderr, "gostctl %s: --json is not a %s event (%s): %s\n", c.cmd.c_str(),
               kind_.c_str(), event_type_.c_str(), problem.c_str());
  return false;
}

std::string kind_codec::to_json(const google::protobuf::Any& any) const {
  return pool_->render(any, true);
}

} // namespace gost::ctl
