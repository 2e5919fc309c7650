#include "api/caller_rule.hpp"

#include <algorithm>
#include <map>

namespace gost::runtime {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

/// Compares without stopping at the first difference (a token's prefix is not timed out).
bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

/// Splits on commas and new lines; drops blanks and `#` comment lines.
std::vector<std::string_view> items(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i)
    if (i == text.size() || text[i] == ',' || text[i] == '\n') {
      auto item = trim(text.substr(start, i - start));
      if (!item.empty() && item.front() != '#')
        out.push_back(item);
      start = i + 1;
    }
  return out;
}

constexpr std::string_view admin_service = "/gost.v1.AdminService/";

/// The methods that read (everything else of gost.v1 needs write, AdminService's verbs admin).
const std::map<std::string_view, role, std::less<>>& table() {
  static const std::map<std::string_view, role, std::less<>> t = {
    {"/gost.v1.OfferService/CreateOffer", role::write},
    {"/gost.v1.OfferService/GetOffer", role::read},
    {"/gost.v1.OfferService/UpdateOffer", role::write},
    {"/gost.v1.OfferService/DeleteOffer", role::write},
    {"/gost.v1.OfferService/ListOffers", role::read},
    {"/gost.v1.StateService/Read", role::read},
    {"/gost.v1.StateService/Update", role::write},
    {"/gost.v1.EntityService/Send", role::write},
    {"/gost.v1.EntityService/Ask", role::write}, // a handler may change the entity
    {"/gost.v1.EntityService/Get", role::read},
    {"/gost.v1.EntityService/PullOutputs", role::read},
    {"/gost.v1.EntityService/ListTypes", role::read},
    {"/gost.v1.TaskService/CreateGroup", role::write},
    {"/gost.v1.TaskService/CreateTask", role::write},
    {"/gost.v1.TaskService/SendEvent", role::write},
    {"/gost.v1.TaskService/Cancel", role::write},
    {"/gost.v1.TaskService/Reprioritize", role::write},
    {"/gost.v1.TaskService/GetTask", role::read},
    {"/gost.v1.TaskService/PullResults", role::read},
    {"/gost.v1.TaskService/ListTasks", role::read},
    {"/gost.v1.ImageService/Ratio", role::read}, // computed from a URL; cached, nothing else
    {"/gost.v1.ImageService/Preview", role::read},
    {"/gost.v1.ImageService/MainColor", role::read},
    {"/gost.v1.ImageService/Rotate", role::read},
    {"/gost.v1.ImageService/Batch", role::read},
    {"/gost.v1.FeedService/CreateFeed", role::write},
    {"/gost.v1.FeedService/UpdateFeed", role::write},
    {"/gost.v1.FeedService/DeleteFeed", role::write},
    {"/gost.v1.FeedService/GetFeed", role::read},
    {"/gost.v1.FeedService/ListFeeds", role::read},
    {"/gost.v1.FeedService/Upload", role::write},
    {"/gost.v1.FeedService/LoadNow", role::write},
    {"/gost.v1.FeedService/ListLoads", role::read},
    {"/gost.v1.FeedService/GetLoad", role::read},
    {"/gost.v1.FeedService/ListErrors", role::read},
    {"/gost.v1.ScheduledActionService/Create", role::write},
    {"/gost.v1.ScheduledActionService/Update", role::write},
    {"/gost.v1.ScheduledActionService/Delete", role::write},
    {"/gost.v1.ScheduledActionService/Get", role::read},
    {"/gost.v1.ScheduledActionService/List", role::read},
    {"/gost.v1.ScheduledActionService/Pause", role::write},
    {"/gost.v1.ScheduledActionService/Resume", role::write},
    {"/gost.v1.ScheduledActionService/RunNow", role::write},
    {"/gost.v1.AdminService/InspectOffer", role::read},
    {"/gost.v1.AdminService/InspectEntity", role::read},
    {"/gost.v1.AdminService/ListStages", role::read},
    {"/gost.v1.AdminService/ListNodes", role::read},
    {"/gost.v1.AdminService/ListShards", role::read},
    {"/gost.v1.AdminService/ListGroups", role::read},
    {"/gost.v1.AdminService/Top", role::read},
    {"/gost.v1.AdminService/ListDeadLetters", role::read},
    {"/gost.v1.AdminService/ListParkedOutbox", role::read},
    {"/gost.v1.AdminService/DescribeTypes", role::read},
    {"/gost.v1.AdminService/OfferHistory", role::read},
    {"/gost.v1.AdminService/Trace", role::read},
    {"/gost.v1.AdminService/PauseStage", role::admin},
    {"/gost.v1.AdminService/ResumeStage", role::admin},
    {"/gost.v1.AdminService/PassivateOffer", role::admin},
    {"/gost.v1.AdminService/RequeueOffer", role::admin},
    {"/gost.v1.AdminService/RetryDeadLetters", role::admin},
    {"/gost.v1.AdminService/DiscardDeadLetters", role::admin},
    {"/gost.v1.AdminService/RetryParkedOutbox", role::admin},
    {"/gost.v1.AdminService/DropParkedOutbox", role::admin},
    {"/gost.v1.AdminService/DrainNode", role::admin},
    {"/gost.v1.AdminService/UndrainNode", role::admin},
    {"/gost.v1.AdminService/AddGroup", role::admin},
    {"/gost.v1.AdminService/MoveShards", role::admin},
  };
  return t;
}

verdict refuse(verdict::kind k, std::string reason, std::string message, std::string caller = {}) {
  verdict v;
  v.what = k;
  v.reason = std::move(reason);
  v.message = std::move(message);
  v.caller = std::move(caller);
  return v;
}

} // namespace

const char* to_string(role r) {
  switch (r) {
    case role::read: return "read";
    case role::write: return "write";
    case role::admin: return "admin";
    case role::none: break;
  }
  return "none";
}

role parse_role(std::string_view text) {
  if (text == "read")
    return role::read;
  if (text == "write")
    return role::write;
  if (text == "admin")
    return role::admin;
  return role::none;
}

const std::vector<std::string>& caller_rule::reasons() {
  static const std::vector<std::string> r = {
    "no_credential", "unknown_token", "malformed", "unknown_certificate", "role", "not_loopback"};
  return r;
}

std::string caller_rule::parse_tokens(std::string_view text, const std::string& key,
                                      std::vector<entry>& out) {
  size_t n = 0;
  for (auto item : items(text)) {
    ++n;
    auto at = "entry " + std::to_string(n) + " of " + key;
    auto c1 = item.find(':');
    auto c2 = c1 == std::string_view::npos ? c1 : item.find(':', c1 + 1);
    if (c2 == std::string_view::npos)
      return at + " is not `name:role:token`";
    entry e;
    e.name = std::string{trim(item.substr(0, c1))};
    auto r = trim(item.substr(c1 + 1, c2 - c1 - 1));
    e.grants = parse_role(r);
    e.secret = std::string{trim(item.substr(c2 + 1))};
    if (e.name.empty())
      return at + " has no name (`name:role:token`)";
    at += " (`" + e.name + "`)";
    if (e.grants == role::none)
      return at + ": role `" + std::string{r} + "` is not read, write or admin";
    if (e.secret.size() < 16)
      return at
             + ": the token is shorter than 16 characters; use a long random one (openssl "
               "rand -hex 24)";
    for (auto& o : out)
      if (same_secret(o.secret, e.secret))
        return at + ": the same token as `" + o.name + "`; give each caller its own";
    out.push_back(std::move(e));
  }
  return {};
}

std::string caller_rule::parse_cert_roles(std::string_view text, const std::string& key,
                                          std::vector<entry>& out) {
  size_t n = 0;
  for (auto item : items(text)) {
    ++n;
    auto colon = item.rfind(':');
    if (colon == std::string_view::npos || colon == 0)
      return "entry " + std::to_string(n) + " of " + key + " is not `subject:role`";
    entry e;
    e.secret = std::string{trim(item.substr(0, colon))};
    e.name = "cert:" + e.secret;
    auto r = trim(item.substr(colon + 1));
    e.grants = parse_role(r);
    if (e.grants == role::none)
      return "entry " + std::to_string(n) + " of " + key + " (`" + e.secret + "`): role `"
             + std::string{r} + "` is not read, write or admin";
    out.push_back(std::move(e));
  }
  return {};
}

role caller_rule::required(std::string_view method) {
  if (method.rfind("/grpc.health.v1.", 0) == 0 || method.rfind("/grpc.reflection.", 0) == 0)
    return role::none;
  auto& t = table();
  auto i = t.find(method);
  return i == t.end() ? role::admin : i->second;
}

bool caller_rule::is_verb(std::string_view method) {
  return method.rfind(admin_service, 0) == 0 && required(method) == role::admin;
}

caller_rule::caller_rule(settings s) : s_(std::move(s)) {
  enforced_ = !s_.tokens.empty() || !s_.cert_roles.empty();
  if (enforced_ && !s_.console_token.empty())
    s_.tokens.push_back(entry{"console", role::admin, s_.console_token});
  if (enforced_ && !s_.internal_token.empty())
    s_.tokens.push_back(entry{"node", role::read, s_.internal_token});
}

const caller_rule::entry* caller_rule::identify(const caller_facts& facts,
                                                std::string& reason) const {
  if (!facts.bearer.empty()) {
    for (auto& e : s_.tokens)
      if (same_secret(e.secret, facts.bearer))
        return &e;
    reason = "unknown_token";
    return nullptr;
  }
  if (facts.malformed) {
    reason = "malformed";
    return nullptr;
  }
  if (!facts.cert_subjects.empty()) {
    for (auto& subject : facts.cert_subjects)
      for (auto& e : s_.cert_roles)
        if (e.secret == subject)
          return &e;
    reason = "unknown_certificate";
    return nullptr;
  }
  reason = "no_credential";
  return nullptr;
}

verdict caller_rule::decide(std::string_view method, const caller_facts& facts) const {
  auto needs = required(method);
  if (needs == role::none)
    return {};
  if (!enforced_) {
    if (!is_verb(method))
      return {};
    // Before roles: the verbs need console.token, or a loopback listener without one.
    auto verb = std::string{method.substr(admin_service.size())};
    if (s_.console_token.empty()) {
      if (s_.loopback)
        return {};
      return refuse(verdict::kind::denied, "not_loopback",
                    verb + " refused: the node listens on grpc.listen=" + s_.listen
                      + ", not a loopback address, and has no `console.token`; set "
                        "`console.token` (or `auth.tokens` with an admin role) on the node and "
                        "pass it with gostctl --token (or GOST_TOKEN)");
    }
    if (facts.bearer.empty())
      return refuse(verdict::kind::unauthenticated, facts.malformed ? "malformed" : "no_credential",
                    verb
                      + " refused: the node needs its `console.token` in the call (gostctl "
                        "--token, or GOST_TOKEN; metadata `authorization: Bearer <token>`)");
    if (!same_secret(facts.bearer, s_.console_token))
      return refuse(verdict::kind::unauthenticated, "unknown_token",
                    verb + " refused: the token given is not the node's `console.token`");
    verdict ok;
    ok.caller = "console";
    return ok;
  }
  return decide_role(needs, method, facts);
}

verdict caller_rule::decide_role(role needs, std::string_view what,
                                 const caller_facts& facts) const {
  if (needs == role::none || !enforced_)
    return {};
  std::string reason;
  auto* e = identify(facts, reason);
  auto w = std::string{what};
  if (e == nullptr) {
    std::string msg;
    if (reason == "unknown_token")
      msg = w
            + " refused: the bearer token is not one of the node's `auth.tokens`; ask its "
              "operator for a token with role "
            + to_string(needs) + " or higher";
    else if (reason == "malformed")
      msg = w + " refused: the `authorization` metadata must be `Bearer <token>`";
    else if (reason == "unknown_certificate")
      msg = w + " refused: the client certificate's subject (" + facts.cert_subjects.front()
            + ") is not in the node's `auth.cert_roles`";
    else
      msg = w
            + " refused: no credential; send `authorization: Bearer <token>` with a token "
              "of role "
            + to_string(needs)
            + " or higher (gostctl --token, or GOST_TOKEN), or a client certificate named in "
              "`auth.cert_roles`";
    return refuse(verdict::kind::unauthenticated, reason, std::move(msg));
  }
  if (e->grants < needs)
    return refuse(verdict::kind::denied, "role",
                  w + " refused: caller `" + e->name + "` has role " + to_string(e->grants)
                    + "; it needs " + to_string(needs)
                    + " (use a token of that role, or give this one a higher role in "
                      "`auth.tokens`)",
                  e->name);
  verdict ok;
  ok.caller = e->name;
  return ok;
}

} // namespace gost::runtime
