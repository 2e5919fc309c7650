#include "gost/runtime/node_builder.hpp"

#include <cstdio>
#include <stdexcept>

#include "gost/config/node_config.hpp"
#include "node/logging.hpp"

extern char** environ;

namespace gost {

node_builder::node_builder() {
  ext_.entity_types = std::make_shared<entity_registry>();
}

node_builder& node_builder::name(std::string app_name, std::string version) {
  if (app_name.empty() && error_.empty())
    error_ = "name: an application needs a name";
  app_.name = std::move(app_name);
  app_.version = std::move(version);
  return *this;
}

node_builder& node_builder::add_stage(std::string id, std::shared_ptr<const stage> impl,
                                      stage_options opts) {
  if (id.empty() && error_.empty())
    error_ = "add_stage: a stage needs an id";
  for (auto& s : ext_.stages)
    if (s.id == id && error_.empty())
      error_ = "add_stage: stage id `" + id + "` is registered twice";
  app_.stages.push_back(id);
  ext_.stages.push_back(
    {std::move(id), std::move(impl), std::make_shared<const stage_options>(std::move(opts))});
  return *this;
}

node_builder& node_builder::add_entity_type(std::shared_ptr<const entity_type_base> type) {
  if (auto err = ext_.entity_types->add(std::move(type)); err && error_.empty())
    error_ = "add_entity_type: " + error_message(err);
  return *this;
}

int node_builder::run(int argc, char** argv) {
  auto& name = app_.name;
  if (!error_.empty()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), error_.c_str());
    return 2;
  }
  auto r = config::load_node_config(argc, argv, environ, app_);
  if (!r.output.empty()) {
    std::fputs(r.output.c_str(), stdout);
    return 0;
  }
  if (!r.config) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), r.error.c_str());
    return 2;
  }
  return runtime::run_node(std::move(*r.config), std::move(ext_));
}

std::unique_ptr<runtime::node> node_builder::start(const std::vector<std::string>& args) const {
  auto& name = app_.name;
  if (!error_.empty())
    throw std::runtime_error(name + ": " + error_);
  std::vector<std::string> line{name};
  line.insert(line.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : line)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  char* no_env[] = {nullptr};
  auto r = config::load_node_config(static_cast<int>(line.size()), argv.data(), no_env, app_);
  if (!r.config)
    throw std::runtime_error(
      name + ": "
      + (r.error.empty() ? "the arguments ask for output, not a node: " + r.output.substr(0, 80)
                         : r.error));
  runtime::setup_logging(r.config->node.id, r.config->log);
  auto n = std::make_unique<runtime::node>(std::move(*r.config), ext_);
  if (auto err = n->start(); !err.empty()) {
    n->stop();
    throw std::runtime_error(name + " cannot start: " + err);
  }
  return n;
}

} // namespace gost
