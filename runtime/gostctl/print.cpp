#include "gostctl/print.hpp"

#include <set>

#include <google/protobuf/any.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

namespace gost::ctl {

void print_json(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  std::fputs(out.c_str(), stdout);
}

std::unique_ptr<runtime::rpc::type_pool>
node_types(v1::AdminService::Stub& admin, const cli& c,
           const std::vector<const google::protobuf::Descriptor*>& envelopes) {
  grpc::ClientContext ctx;
  admin_context(ctx, c);
  v1::DescribeTypesResponse resp;
  auto s = admin.DescribeTypes(&ctx, v1::DescribeTypesRequest{}, &resp);
  if (!s.ok())
    std::fprintf(stderr,
                 "gostctl: the node published no types (%s): states show as type URL "
                 "and size\n",
                 s.error_message().c_str());
  auto files = resp.files(); // the node's first: its version of a file wins
  std::set<std::string> have;
  for (auto& f : files.file())
    have.insert(f.name());
  auto own = runtime::rpc::files_of(envelopes);
  for (auto& f : own.file())
    if (have.insert(f.name()).second)
      *files.add_file() = f;
  return std::make_unique<runtime::rpc::type_pool>(files);
}

void print_decoded(const runtime::rpc::type_pool& pool, const google::protobuf::Message& m) {
  google::protobuf::Any any;
  any.PackFrom(m);
  std::string out;
  if (pool.to_json(any, out, true))
    std::fputs(out.c_str(), stdout);
  else
    print_json(m);
}

std::string short_time(const google::protobuf::Timestamp& t) {
  auto text = google::protobuf::util::TimeUtil::ToString(t); // 2026-11-26T17:00:00.123456Z
  auto pos = text.find('T');
  return pos == std::string::npos ? text : text.substr(pos + 1);
}

void print_event(const v1::TraceEvent& e, bool with_offer) {
  if (e.kind() == "owner") {
    std::printf("-- owner changed: %s %s (shard %u) is now served by node %s\n",
                e.offer_id().empty() ? "entity" : "offer",
                e.offer_id().empty() ? e.entity_key().c_str() : e.offer_id().c_str(), e.shard(),
                e.node().c_str());
    return;
  }
  std::printf("  %-17s %s%s%-12s %-7s %-8s %-14s %-9s %8lld us  v%lld\n",
              short_time(e.at()).c_str(),
              !with_offer            ? ""
              : e.offer_id().empty() ? e.entity_key().c_str()
                                     : e.offer_id().c_str(),
              with_offer ? " " : "", e.node().c_str(), e.kind().c_str(), e.source().c_str(),
              e.stage().empty() ? "-" : e.stage().c_str(), e.result().c_str(),
              static_cast<long long>(e.duration_us()), static_cast<long long>(e.version()));
}

} // namespace gost::ctl
