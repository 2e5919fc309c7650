#pragma once
// Who made a call, as the node records it with a write (the offer's history) and logs it with
// a verb: the name the caller gives in the metadata `x-gost-who` (gostctl --who, default
// $USER) and its address.

#include <string>

#include <grpcpp/server_context.h>

namespace gost::runtime::rpc {

/// `NAME peer=ADDR`, or `peer=ADDR` when the call names nobody. A name is cut at 128 bytes.
inline std::string caller_of(const grpc::ServerContextBase& ctx) {
  std::string who;
  auto& md = ctx.client_metadata();
  if (auto i = md.find("x-gost-who"); i != md.end())
    who.assign(i->second.data(), std::min<size_t>(i->second.size(), 128));
  return (who.empty() ? std::string{} : who + " ") + "peer=" + ctx.peer();
}

} // namespace gost::runtime::rpc
