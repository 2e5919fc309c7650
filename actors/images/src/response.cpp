#include "gost/images/response.hpp"

#include <string>

namespace gost::images {

v1::ImageFunction to_proto(function fn) {
  switch (fn) {
    case function::preview: return v1::IMAGE_FUNCTION_PREVIEW;
    case function::main_color: return v1::IMAGE_FUNCTION_MAIN_COLOR;
    case function::rotate: return v1::IMAGE_FUNCTION_ROTATE;
    case function::ratio: break;
  }
  return v1::IMAGE_FUNCTION_RATIO;
}

function from_proto(int fn) {
  switch (fn) {
    case v1::IMAGE_FUNCTION_PREVIEW: return function::preview;
    case v1::IMAGE_FUNCTION_MAIN_COLOR: return function::main_color;
    case v1::IMAGE_FUNCTION_ROTATE: return function::rotate;
    default: return function::ratio;
  }
}

void fill_response(function fn, const persistence::image_result& row, v1::ImageResponse& out) {
  out.set_attempts(row.attempts);
  if (row.status == "pending") {
    out.set_status(v1::IMAGE_STATUS_PENDING);
    return;
  }
  if (row.status == "error") {
    out.set_status(v1::IMAGE_STATUS_ERROR);
    out.set_error_kind(row.error_kind);
    out.set_error(row.error);
    return;
  }
  out.set_status(v1::IMAGE_STATUS_DONE);
  bool ok = false;
  switch (fn) {
    case function::ratio: ok = out.mutable_ratio()->ParseFromString(row.value); break;
    case function::preview: ok = out.mutable_preview()->ParseFromString(row.value); break;
    case function::main_color: ok = out.mutable_main_color()->ParseFromString(row.value); break;
    case function::rotate: ok = out.mutable_rotated()->ParseFromString(row.value); break;
  }
  if (!ok) { // a row written by another version: computed again on request with `compute`
    out.clear_result();
    out.set_status(v1::IMAGE_STATUS_ERROR);
    out.set_error_kind("internal");
    out.set_error("the cached result does not parse; ask again with options.compute");
  }
}

v1::ImageNotice make_notice(const task_key& task, const persistence::image_result& row) {
  v1::ImageNotice n;
  n.set_function(to_proto(task.fn));
  n.set_url(std::string{task.url()});
  if (auto nl = task.args.find('\n'); nl != std::string::npos)
    n.set_angle(std::stod(task.args.substr(nl + 1)));
  n.mutable_response()->set_key(row.key);
  fill_response(task.fn, row, *n.mutable_response());
  return n;
}

} // namespace gost::images
