# gost_add_proto(<target> PROTOS <files...> [ROOT <dir>] [GRPC])
# Generates C++ for an application's .proto files into a static library <target>, which links
# protobuf (and grpc++ with GRPC) and gost::proto, and gives its users the generated headers.
#   PROTOS  the files, relative to ROOT, as they import each other ("bank/v1/account.proto")
#   ROOT    the folder of the .proto tree (default: the calling folder)
#   GRPC    also generate gRPC services (*.grpc.pb.h) with grpc_cpp_plugin
# protoc's import path: ROOT, gost's own .proto files (GOST_PROTO_DIR: proto/ in gost's tree,
# <prefix>/include when installed, set by gostConfig.cmake) and protobuf's well-known types.
# Installed with the package; gostConfig.cmake includes it. Needs Protobuf (and gRPC for GRPC)
# found, which gostConfig.cmake does.
function(gost_add_proto target)
  cmake_parse_arguments(ARG "GRPC" "ROOT" "PROTOS" ${ARGN})
  if(NOT ARG_PROTOS)
    message(FATAL_ERROR "gost_add_proto(${target}): PROTOS names no .proto file")
  endif()
  set(root ${CMAKE_CURRENT_SOURCE_DIR})
  if(ARG_ROOT)
    get_filename_component(root ${ARG_ROOT} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
  endif()
  set(gen ${CMAKE_CURRENT_BINARY_DIR}/${target}_gen)
  file(MAKE_DIRECTORY ${gen})
  set(import_args --proto_path=${root})
  foreach(dir ${GOST_PROTO_DIR} ${Protobuf_INCLUDE_DIRS})
    list(APPEND import_args --proto_path=${dir})
  endforeach()
  set(grpc_args)
  set(tools protobuf::protoc)
  if(ARG_GRPC)
    set(grpc_args --grpc_out=${gen} --plugin=protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>)
    list(APPEND tools gRPC::grpc_cpp_plugin)
  endif()
  set(srcs)
  foreach(proto ${ARG_PROTOS})
    string(REGEX REPLACE "\\.proto$" "" base ${proto})
    set(outs ${gen}/${base}.pb.cc ${gen}/${base}.pb.h)
    if(ARG_GRPC)
      list(APPEND outs ${gen}/${base}.grpc.pb.cc ${gen}/${base}.grpc.pb.h)
    endif()
    add_custom_command(
      OUTPUT ${outs}
      COMMAND protobuf::protoc ${import_args} --cpp_out=${gen} ${grpc_args} ${root}/${proto}
      DEPENDS ${root}/${proto} ${tools}
      COMMENT "protoc ${proto}"
      VERBATIM)
    list(APPEND srcs ${outs})
  endforeach()
  add_library(${target} STATIC ${srcs})
  target_include_directories(${target} SYSTEM PUBLIC $<BUILD_INTERFACE:${gen}>)
  target_link_libraries(${target} PUBLIC gost::proto protobuf::libprotobuf)
  if(ARG_GRPC)
    target_link_libraries(${target} PUBLIC gRPC::grpc++)
  endif()
endfunction()
