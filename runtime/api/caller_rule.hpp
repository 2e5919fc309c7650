#pragma once
// Who may call (issue 27 §4): the rule the request edge applies to every call of the public
// gRPC API (rpc::guarded, api/call_gate.hpp) and to the admin HTTP listener.
//
// - Callers are named by a bearer token (`authorization: Bearer <token>`; the older
//   `x-gost-token` metadata too) or by a verified client certificate's subject, each mapped to a
//   role: read < write < admin (`auth.tokens`, `auth.tokens_file`, `auth.cert_roles`).
// - Each method needs a role, by its full name (`required`): reads need read, mutations write,
//   AdminService's verbs admin; health and reflection are open; a method the table does not know
//   needs admin.
// - With no roles configured (`enforced()` false) the node behaves as before: every call is let
//   in but AdminService's verbs, which need `console.token` when it is set, and else a loopback
//   `grpc.listen`.
// - With roles, `console.token` is one more admin token (named `console`).
//
// Plain data, no I/O: a decision never touches a secret beyond comparing it.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gost::runtime {

enum class role : uint8_t { none = 0, read = 1, write = 2, admin = 3 };

const char* to_string(role r);
/// `read`, `write` or `admin`; `role::none` for anything else.
role parse_role(std::string_view text);

/// What the edge knows of a call.
struct caller_facts {
  std::string_view bearer; ///< the token of `authorization: Bearer …` or `x-gost-token`
  bool malformed = false;  ///< an `authorization` value that is not `Bearer <token>`
  std::vector<std::string> cert_subjects; ///< CN and SANs of a verified client certificate
  std::string_view peer;                  ///< the caller's address, for the log
};

/// The decision on one call.
struct verdict {
  enum class kind : uint8_t { admitted, unauthenticated, denied };
  kind what = kind::admitted;
  /// For the caller: what is wrong and what to fix (the status message, the HTTP body).
  std::string message;
  /// The caller's name (a token's or certificate's entry), or empty when unknown.
  std::string caller;
  /// The label of gost_auth_refused_total: `no_credential`, `unknown_token`, `malformed`,
  /// `unknown_certificate`, `role` (too low), `not_loopback` (a verb without console.token).
  std::string reason;

  bool admitted() const noexcept { return what == kind::admitted; }
};

class caller_rule {
public:
  struct entry {
    std::string name;
    role grants = role::none;
    std::string secret; ///< a token, or a certificate subject
  };

  struct settings {
    std::vector<entry> tokens;     ///< auth.tokens and auth.tokens_file
    std::vector<entry> cert_roles; ///< auth.cert_roles (secret: the subject)
    std::string console_token;     ///< console.token
    /// The node's own read caller (`node`): the web console's live trace, a client of this
    /// node's AdminService (node/start_http.cpp); a random token made at start.
    std::string internal_token;
    bool loopback = true; ///< grpc.listen is a loopback address
    std::string listen;   ///< grpc.listen, for the messages
  };

  /// The reasons gost_auth_refused_total counts (every one exported, 0 until seen).
  static const std::vector<std::string>& reasons();

  /// Parses `name:role:token` entries separated by commas or new lines (`#` starts a comment
  /// line; blanks ignored) into `out`; the problem (naming `key` and the entry's position, never
  /// the token) or an empty string.
  static std::string parse_tokens(std::string_view text, const std::string& key,
                                  std::vector<entry>& out);
  /// Parses `subject:role` entries separated by commas into `out`; the problem or "".
  static std::string parse_cert_roles(std::string_view text, const std::string& key,
                                      std::vector<entry>& out);

  /// The role `method` (`/gost.v1.OfferService/GetOffer`) needs; `role::none`: open.
  static role required(std::string_view method);
  /// Whether `method` is one of AdminService's verbs (the console's mutations).
  static bool is_verb(std::string_view method);

  explicit caller_rule(settings s);

  /// Whether callers need a role (tokens or certificate roles configured).
  bool enforced() const noexcept { return enforced_; }

  /// The decision on a call of `method` (or of an HTTP path needing `needs`).
  verdict decide(std::string_view method, const caller_facts& facts) const;
  verdict decide_role(role needs, std::string_view what, const caller_facts& facts) const;

private:
  /// The entry `facts` name; null when none matches. `reason` says why not.
  const entry* identify(const caller_facts& facts, std::string& reason) const;

  settings s_;
  bool enforced_;
};

} // namespace gost::runtime
