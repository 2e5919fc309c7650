#include "gost/images/stats.hpp"

namespace gost::images {

void add_image_metrics(stats_registry& reg, std::shared_ptr<const image_stats> stats) {
  for (auto fn : {function::ratio, function::preview, function::main_color, function::rotate})
    reg.add_stats("gost_image_", member_of(stats, stats->functions[image_stats::slot(fn)]),
                  {{"function", to_string(fn)}});
  reg.add([stats](metric_families& out) {
    const char* name = "gost_image_task_failures_total";
    const char* help = "Failed runs of image tasks by function and error kind (final and retried).";
    out.declare(name, metric_type::counter, help);
    for (auto& [k, v] : stats->failures())
      out.add(name, stat_kind::counter, help,
              {{"function", to_string(k.first)}, {"kind", k.second}}, static_cast<int64_t>(v));
  });
  reg.add_stats("gost_image_", stats);
}

} // namespace gost::images
