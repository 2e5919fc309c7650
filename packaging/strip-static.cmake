# CPack pre-build script (CPACK_PRE_BUILD_SCRIPTS): the static libraries in the staged
# libgost-dev lose their debug information (a RelWithDebInfo build's are ~600 MB with it,
# ~10x less without); CPACK_STRIP_FILES strips only the programs and shared libraries.
file(GLOB_RECURSE archives "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/*.a")
foreach(a ${archives})
  execute_process(COMMAND "${CPACK_GOST_STRIP}" --strip-debug "${a}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "strip --strip-debug ${a} failed")
  endif()
endforeach()
