# Small helpers shared by the folders. Kept deliberately tiny.
include(GNUInstallDirs)

# Warnings for gost's own targets (never applied to generated code).
function(gost_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
    -Wnon-virtual-dtor -Wno-unused-parameter -Wno-missing-field-initializers)
  if(GOST_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# gost_export(<target> <name> [NO_HEADERS]): a library of the installed package, `gost::<name>` (the same
# name is an alias in the tree, so examples/ link the same names inside gost and outside it).
# Its folder's include/, when there is one, holds its public headers: they are the target's
# include directory in the build tree and go to <prefix>/include with the package. Static
# libraries carry their PRIVATE dependencies into the export as $<LINK_ONLY:...>; gostConfig
# finds those too (cmake/gostConfig.cmake.in).
function(gost_export target name)
  cmake_parse_arguments(ARG "NO_HEADERS" "" "" ${ARGN})
  add_library(gost::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  target_compile_features(${target} PUBLIC cxx_std_17)
  if(NOT ARG_NO_HEADERS AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_include_directories(${target} PUBLIC
      $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>)
    install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
  endif()
  install(TARGETS ${target} EXPORT gostTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endfunction()

if(GOST_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
elseif(GOST_TSAN)
  # Debian's libprotobuf is built without TSan, and protobuf's map_field.h gives MapFieldBase two
  # more members when __SANITIZE_THREAD__ is defined: code compiled with it reads every map at
  # the wrong offsets (a SIGSEGV in the first test touching a map field). Headers must see the
  # libraries as they were built.
  add_compile_options(-fsanitize=thread -U__SANITIZE_THREAD__)
  add_link_options(-fsanitize=thread)
endif()

# gost_tests(<library> SOURCES <files...> [LIBS <libs...>])
# Builds one doctest binary for a library and registers one CTest entry per tier found among
# the sources, by file-name convention:
#   x.test.cpp -> label unit (no services), x.pgtest.cpp -> label pg,
#   x.kafkatest.cpp -> label kafka, x.redistest.cpp -> label redis (a real Redis:
#   scripts/redis.sh), x.e2etest.cpp -> label e2e.
# Each entry runs the same binary filtered to that tier's files (doctest --source-file).
# Binaries with a unit tier are collected for the `unit-tests` target (top-level CMakeLists).
# E2E_APART <files...>: e2e files run as a second entry, ${lib}.e2e_apart (label e2e), so that
# neither entry nears the per-entry timeout and the two run in parallel.
function(gost_tests lib)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;E2E_APART" ${ARGN})
  set(bin ${lib}_tests)
  add_executable(${bin} ${CMAKE_SOURCE_DIR}/tests/doctest_main.cpp ${ARG_SOURCES})
  target_link_libraries(${bin} PRIVATE ${lib} gost_testing doctest::doctest ${ARG_LIBS})
  target_include_directories(${bin} PRIVATE ${CMAKE_SOURCE_DIR}/tests/include ${CMAKE_CURRENT_SOURCE_DIR}/src)
  gost_warnings(${bin})
  if(GOST_TSAN)
    # What a test asks to know it runs under TSan (__SANITIZE_THREAD__ is undefined, above).
    target_compile_definitions(${bin} PRIVATE GOST_UNDER_TSAN=1)
  endif()
  foreach(tier test pgtest kafkatest redistest e2etest)
    set(found OFF)
    foreach(src ${ARG_SOURCES})
      if(src MATCHES "\\.${tier}\\.cpp$")
        set(found ON)
      endif()
    endforeach()
    if(found)
      string(REPLACE "pgtest" "pg" label ${tier})
      string(REPLACE "kafkatest" "kafka" label ${label})
      string(REPLACE "e2etest" "e2e" label ${label})
      string(REPLACE "redistest" "redis" label ${label})
      string(REPLACE "test" "unit" label ${label})
      set(filter --source-file=*.${tier}.cpp)
      if(label STREQUAL "e2e" AND ARG_E2E_APART)
        set(apart "")
        foreach(src ${ARG_E2E_APART})
          get_filename_component(name ${src} NAME)
          list(APPEND apart "*/${name}")
        endforeach()
        string(REPLACE ";" "," apart "${apart}")
        list(APPEND filter --source-file-exclude=${apart})
        add_test(NAME ${lib}.e2e_apart COMMAND ${bin} --source-file=${apart} --no-intro=true)
        set_tests_properties(${lib}.e2e_apart PROPERTIES LABELS e2e TIMEOUT 600)
      endif()
      add_test(NAME ${lib}.${label} COMMAND ${bin} ${filter} --no-intro=true)
      set_tests_properties(${lib}.${label} PROPERTIES LABELS ${label} TIMEOUT 600)
      if(label STREQUAL "unit" OR label STREQUAL "pg")
        # For the `unit-tests` target (the unit and pg tiers' binaries, built under ASan/UBSan
        # by CI; a binary serves both tiers).
        set_property(GLOBAL APPEND PROPERTY GOST_UNIT_TEST_BINARIES ${bin})
      endif()
    endif()
  endforeach()
endfunction()
