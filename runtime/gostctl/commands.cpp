#include <cstring>

#include "gostctl/cli.hpp"

namespace gost::ctl {

namespace {

const char* options_text =
  "Options:\n"
  "  --addr HOST:PORT     the node (default 127.0.0.1:50051, or GOST_ADDR)\n"
  "  --status STATUS      draft, active, inactive or banned (gost.v1.OfferStatus); stages such\n"
  "                       as `expire` act on active offers only\n"
  "  --photos URL,...     the offer's photos, in this order (Photo.order 1, 2, ...)\n"
  "  --token T            the caller's token (or GOST_TOKEN), sent on every call as\n"
  "                       `authorization: Bearer T`: one of the node's `auth.tokens` (its role\n"
  "                       says what you may call), or its `console.token` for the verbs\n"
  "  --tls-ca FILE        speak TLS, trusting the node's certificate by this CA's PEM file\n"
  "                       (or GOST_TLS_CA)\n"
  "  --cert F, --key F    a client certificate and its key (PEM; or GOST_CERT, GOST_KEY):\n"
  "                       the node maps its name to a role (`auth.cert_roles`)\n"
  "  --who NAME           who asks (default: $USER), sent on every call (metadata x-gost-who):\n"
  "                       logged with a verb, recorded with a change in the offer's history\n"
  "  --since T, --until T a time: RFC 3339 (2026-11-26T17:00:00Z) or an age (90s, 30m, 2h,\n"
  "                       7d ago); --since is inclusive, --until exclusive\n"
  "Exit code: 0 on success, 1 when the node answered an error, 2 on bad usage.\n";

/// "  NAME SYNOPSIS" and the help indented to column 23, on the synopsis' last line when it
/// ends before column 22.
void append(std::string& out, const command& c) {
  std::string head = std::string{"  "} + c.name + (*c.synopsis ? " " : "") + c.synopsis;
  out += head;
  auto last = head.size() - (head.rfind('\n') == std::string::npos ? 0 : head.rfind('\n') + 1);
  const std::string indent(23, ' ');
  std::string help = c.help;
  size_t from = 0;
  bool first = true;
  while (from <= help.size()) {
    auto nl = help.find('\n', from);
    auto line = help.substr(from, nl == std::string::npos ? std::string::npos : nl - from);
    if (first && last < 22)
      out += std::string(23 - last, ' ') + line + "\n";
    else
      out += (first ? "\n" : "") + indent + line + "\n";
    first = false;
    if (nl == std::string::npos)
      break;
    from = nl + 1;
  }
}

} // namespace

const std::vector<command>& commands() {
  static const auto all = [] {
    std::vector<command> out;
    for (auto group :
         {offer_commands, entity_commands, stage_commands, dead_letter_commands, watch_commands,
          cluster_commands, task_commands, action_commands, feed_commands})
      for (auto& c : group())
        out.push_back(c);
    return out;
  }();
  return all;
}

const command* find_command(const std::string& name) {
  for (auto& c : commands())
    if (name == c.name)
      return &c;
  return nullptr;
}

std::string usage() {
  std::string out = "gostctl - talk to a gost node over gRPC\n\n"
                    "Usage: gostctl [--addr HOST:PORT] COMMAND [ARGS]\n"
                    "       gostctl COMMAND --help       (one command's help)\n";
  const char* group = "";
  for (auto& c : commands()) {
    if (std::strcmp(group, c.group) != 0) {
      group = c.group;
      out += std::string{"\n"} + group + ":\n";
    }
    append(out, c);
  }
  return out + "\n" + options_text;
}

std::string usage(const command& c) {
  std::string out =
    "Usage: gostctl [--addr HOST:PORT] " + std::string{c.name} + " " + c.synopsis + "\n\n  ";
  for (const char* p = c.help; *p != '\0'; ++p)
    out += *p == '\n' ? std::string{"\n  "} : std::string(1, *p);
  return out + "\n\n" + options_text;
}

} // namespace gost::ctl
