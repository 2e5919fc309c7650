#pragma once
// An entity kind's events written as JSON, and what the node answers printed as JSON: both
// with the types the node publishes (AdminService.DescribeTypes), never with types linked into
// gostctl, so a kind of any application works. `send` uses it; a verb that asks an entity and
// prints its reply takes the same two calls (encode, then to_json on the reply).

#include <memory>
#include <string>

#include <google/protobuf/any.pb.h>

#include "gostctl/cli.hpp"
#include "rpc/proto_types.hpp"

namespace gost::ctl {

class kind_codec {
public:
  /// The kind's types from the node at --addr; null after printing why, with the exit code in
  /// `rc` (1: the node failed; 2: it hosts no such kind).
  static std::unique_ptr<kind_codec> load(const cli& c, const std::string& kind, int& rc);

  /// `json` as the kind's event, packed into `out`; false after printing what is wrong,
  /// naming the field (exit code 2).
  bool encode(const cli& c, const std::string& json, google::protobuf::Any& out) const;

  /// An Any the node answered (a reply, a state) as indented JSON, or its type URL and size
  /// when the node did not publish its type.
  std::string to_json(const google::protobuf::Any& any) const;

  const std::string& kind() const noexcept { return kind_; }
  const std::string& event_type() const noexcept { return event_type_; }

private:
  kind_codec(std::string kind, std::string event_type,
             std::unique_ptr<runtime::rpc::type_pool> pool)
    : kind_(std::move(kind)), event_type_(std::move(event_type)), pool_(std::move(pool)) {}

  std::string kind_;
  std::string event_type_;
  std::unique_ptr<runtime::rpc::type_pool> pool_;
};

} // namespace gost::ctl
