#include "gostctl/cli.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fstream>
#include <sstream>

#include <google/protobuf/util/time_util.h>
#include <grpcpp/support/client_interceptor.h>

namespace gost::ctl {

namespace {

/// Whether `--name` is an option without a value: one of the command's flags; before the
/// command word, a flag of any command but `--json` (trace's flag; create, update and send
/// take a JSON after it).
bool is_flag(const std::string& cmd, const std::string& name) {
  auto listed = [&](const command& c) {
    auto flags = std::string{" "} + c.flags + " ";
    return flags.find(" --" + name + " ") != std::string::npos;
  };
  if (const auto* c = find_command(cmd))
    return listed(*c);
  if (!cmd.empty() || name == "json")
    return false;
  for (auto& c : commands())
    if (listed(c))
      return true;
  return false;
}

/// An option, else its GOST_ variable, else "".
std::string opt_or_env(const cli& c, const char* name, const char* env) {
  const char* e = std::getenv(env);
  return opt(c, name, e != nullptr ? e : "");
}

/// How every channel connects: the bearer token of every call, and TLS when asked.
struct connection {
  std::string token;
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
};

connection& conn() {
  static connection c;
  return c;
}

/// Adds `authorization: Bearer <token>` to every call of a channel.
class bearer final : public grpc::experimental::Interceptor {
public:
  explicit bearer(const std::string& token) : value_("Bearer " + token) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    using grpc::experimental::InterceptionHookPoints;
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA))
      m->GetSendInitialMetadata()->insert({"authorization", value_});
    m->Proceed();
  }

private:
  std::string value_;
};

class bearer_factory final : public grpc::experimental::ClientInterceptorFactoryInterface {
public:
  explicit bearer_factory(std::string token) : token_(std::move(token)) {}
  grpc::experimental::Interceptor*
  CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new bearer(token_);
  }

private:
  std::string token_;
};

bool read_file(const std::string& opt_name, const std::string& path, std::string& out) {
  std::ifstream in{path};
  std::stringstream ss;
  if (in)
    ss << in.rdbuf();
  out = ss.str();
  if (out.empty()) {
    std::fprintf(stderr, "gostctl: --%s %s: cannot read it (or it is empty); give a PEM file\n",
                 opt_name.c_str(), path.c_str());
    return false;
  }
  return true;
}

/// The token and TLS options into conn(); false (after saying why) when a file is unreadable.
bool connect_options(const cli& c) {
  auto& cn = conn();
  cn.token = opt_or_env(c, "token", "GOST_TOKEN");
  auto ca = opt_or_env(c, "tls-ca", "GOST_TLS_CA");
  auto cert = opt_or_env(c, "cert", "GOST_CERT");
  auto key = opt_or_env(c, "key", "GOST_KEY");
  if (cert.empty() != key.empty()) {
    std::fprintf(stderr, "gostctl: --cert and --key go together (a client certificate and its "
                         "key)\n");
    return false;
  }
  if (ca.empty() && cert.empty())
    return true;
  grpc::SslCredentialsOptions o;
  if (!ca.empty() && !read_file("tls-ca", ca, o.pem_root_certs))
    return false;
  if (!cert.empty()
      && (!read_file("cert", cert, o.pem_cert_chain) || !read_file("key", key, o.pem_private_key)))
    return false;
  cn.creds = grpc::SslCredentials(o);
  return true;
}

} // namespace

bool parse(int argc, char** argv, cli& out) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      out.help = true;
      continue;
    }
    if (a.rfind("--", 0) == 0) {
      auto eq = a.find('=');
      if (eq != std::string::npos)
        out.opts[a.substr(2, eq - 2)] = a.substr(eq + 1);
      else if (is_flag(out.cmd, a.substr(2)))
        out.opts[a.substr(2)] = "";
      else if (i + 1 < argc)
        out.opts[a.substr(2)] = argv[++i];
      else
        return false;
    } else if (out.cmd.empty()) {
      out.cmd = a;
    } else {
      out.positional.push_back(a);
    }
  }
  out.addr =
    opt(out, "addr", std::getenv("GOST_ADDR") ? std::getenv("GOST_ADDR") : "127.0.0.1:50051");
  return !out.cmd.empty() && connect_options(out);
}

std::string opt(const cli& c, const std::string& k, const std::string& def) {
  auto i = c.opts.find(k);
  return i == c.opts.end() ? def : i->second;
}

std::string who(const cli& c) {
  return opt(c, "who", std::getenv("USER") ? std::getenv("USER") : "");
}

std::shared_ptr<grpc::Channel> channel_to(const std::string& addr) {
  auto& cn = conn();
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> edge;
  if (!cn.token.empty())
    edge.push_back(std::make_unique<bearer_factory>(cn.token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
    addr, cn.creds, grpc::ChannelArguments{}, std::move(edge));
}

std::shared_ptr<grpc::Channel> channel(const cli& c) {
  static auto ch = channel_to(c.addr);
  return ch;
}

std::unique_ptr<v1::AdminService::Stub> admin_stub(const cli& c) {
  return v1::AdminService::NewStub(channel(c));
}

void set_deadline(grpc::ClientContext& ctx) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds{30});
}

void call_context(grpc::ClientContext& ctx, const cli& c) {
  set_deadline(ctx);
  if (auto w = who(c); !w.empty())
    ctx.AddMetadata("x-gost-who", w);
}

void admin_context(grpc::ClientContext& ctx, const cli& c) {
  call_context(ctx, c); // the token goes with every call of the channel (channel_to)
}

int fail(const grpc::Status& s) {
  std::fprintf(stderr, "gostctl: %s: %s\n", std::to_string(s.error_code()).c_str(),
               s.error_message().c_str());
  return 1;
}

bool given(const cli& c, size_t n, const char* what) {
  if (c.positional.size() >= n)
    return true;
  std::fprintf(stderr, "gostctl %s: give %s\n", c.cmd.c_str(), what);
  return false;
}

bool whole_opt(const cli& c, const char* name, int64_t& out) {
  if (c.opts.count(name) == 0)
    return true;
  auto text = opt(c, name);
  char* end = nullptr;
  errno = 0;
  auto v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0') {
    std::fprintf(stderr, "gostctl %s: --%s `%s` is not a whole number\n", c.cmd.c_str(), name,
                 text.c_str());
    return false;
  }
  out = v;
  return true;
}

bool positive(const std::string& text, int64_t& out) {
  char* end = nullptr;
  errno = 0;
  out = std::strtoll(text.c_str(), &end, 10);
  return !text.empty() && errno == 0 && *end == '\0' && out > 0;
}

int64_t duration_ms(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  auto n = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || n < 0)
    return -1;
  std::string unit{end};
  if (unit.empty() || unit == "s")
    return n * 1000;
  if (unit == "ms")
    return n;
  if (unit == "m")
    return n * 60'000;
  if (unit == "h")
    return n * 3'600'000;
  return -1;
}

bool time_opt(const cli& c, const char* name, google::protobuf::Timestamp* out, bool& given) {
  auto text = opt(c, name);
  given = c.opts.count(name) > 0;
  if (!given)
    return true;
  if (google::protobuf::util::TimeUtil::FromString(text, out))
    return true;
  static const std::map<char, int64_t> unit_s{{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
  char* end = nullptr;
  auto n = text.empty() ? -1 : std::strtoll(text.c_str(), &end, 10);
  if (n >= 0 && end != nullptr && end != text.c_str() && unit_s.count(*end) && end[1] == '\0') {
    auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
    *out = google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(
      now - n * unit_s.at(*end) * 1000000);
    return true;
  }
  std::fprintf(stderr,
               "gostctl %s: --%s `%s` is neither an RFC 3339 time (2026-11-26T17:00:00Z) nor an "
               "age (90s, 30m, 2h, 7d)\n",
               c.cmd.c_str(), name, text.c_str());
  return false;
}

} // namespace gost::ctl
