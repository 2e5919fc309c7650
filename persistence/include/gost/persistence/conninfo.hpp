#pragma once
// libpq connection strings: parameters gost adds to the user's DSN (`pg.dsn`) where the DSN
// does not set them itself (its own settings win).

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace gost::persistence {

/// `dsn` (key=value or URI form) with each of `params` the DSN does not set added.
std::string with_conninfo_defaults(const std::string& dsn,
                                   const std::vector<std::pair<std::string, std::string>>& params);

/// `text` (a DSN, or a message quoting one) with the password of `dsn` masked: its value as
/// `password=...` (key=value form, quoted or not) or as `user:...@` and `password=...` (URI
/// form) becomes `***` wherever it occurs in `text`. For logs, errors and listings.
std::string masked_password(const std::string& text, const std::string& dsn);
inline std::string masked_dsn(const std::string& dsn) {
  return masked_password(dsn, dsn);
}

/// `dsn` with TCP timeouts, so that a connection whose server stopped answering at the TCP
/// level (a dead path, a half-open connection) fails after about `timeout` instead of the
/// kernel's retransmission timeout (about 15 minutes): libpq's `tcp_user_timeout` (data sent
/// and not acknowledged) and keepalives (`keepalives_idle` = `keepalives_interval` = a quarter
/// of it in whole seconds, at least 1, `keepalives_count` = 3: an idle connection, or one
/// waiting for an answer). Unchanged for 0.
std::string with_tcp_timeouts(const std::string& dsn, std::chrono::milliseconds timeout);

} // namespace gost::persistence
