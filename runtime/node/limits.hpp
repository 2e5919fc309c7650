#pragma once
// `limits.*` mapped once, at start, to the options of the parts that enforce them (the actors
// below runtime/ do not see config/): the offers' content rules (shards, the API's edge, the
// feed exchange), the API's own limits, the gRPC servers' message sizes.

#include "api/limits.hpp"
#include "gost/config/node_config.hpp"
#include "gost/offers/content_rules.hpp"

namespace gost::runtime {

offer_limits offer_limits_of(const config::limits_config& c);

api_limits api_limits_of(const config::limits_config& c);

/// The largest message a node link takes, either way: a forwarded request is a client's (at
/// most `limits.request_max_bytes`) with a few ids around it, and an answer (an offer with
/// what stages added, a state) gets as much room: twice the public limit.
int link_max_bytes(const config::limits_config& c);

} // namespace gost::runtime
