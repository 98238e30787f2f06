# HTTP/2 transport integration tests (included from
# tests/integration/CMakeLists.txt).  Real loopback sockets against the real
# sg-fakemodel, and against nghttpd (Debian package nghttp2-server) when it
# is installed.
sg_parts_check(h2_ok h2_tests ${CMAKE_CURRENT_LIST_DIR}/h2_fakemodel_test.c
               ${CMAKE_CURRENT_LIST_DIR}/h2_peer_test.c
               ${CMAKE_CURRENT_LIST_DIR}/h2_memory_test.c)
if(NOT TARGET sg-fakemodel OR NOT h2_ok)
  return()
endif()
if(NOT TARGET PkgConfig::CMOCKA)
  pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)
endif()

foreach(name h2_fakemodel_test h2_peer_test h2_memory_test)
  add_executable(${name} ${CMAKE_CURRENT_LIST_DIR}/${name}.c)
  target_link_libraries(${name} PRIVATE streamguard_static PkgConfig::CMOCKA)
  target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_LIST_DIR} ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${name} PRIVATE -Wall -Wextra -Wno-unused-function)
endforeach()

add_test(NAME integration.h2.fakemodel
         COMMAND h2_fakemodel_test $<TARGET_FILE:sg-fakemodel>)
set_tests_properties(integration.h2.fakemodel PROPERTIES LABELS integration TIMEOUT 120)

# The heap per open stream (glibc's mallinfo2); alone, not beside other
# tests' allocations (it measures its own process only, but it is timing-free
# and cheap).
add_test(NAME integration.h2.memory
         COMMAND h2_memory_test $<TARGET_FILE:sg-fakemodel>)
set_tests_properties(integration.h2.memory PROPERTIES LABELS integration TIMEOUT 120)

# Without nghttpd its cases are skipped; the scripted-peer cases still run.
find_program(SG_NGHTTPD_PROGRAM nghttpd PATHS /usr/sbin /usr/local/sbin)
set(SG_NGHTTPD_ARG "")
if(SG_NGHTTPD_PROGRAM)
  set(SG_NGHTTPD_ARG "${SG_NGHTTPD_PROGRAM}")
else()
  message(STATUS "nghttpd not found: its HTTP/2 peer tests will be skipped")
endif()
add_test(NAME integration.h2.peer
         COMMAND h2_peer_test "${SG_NGHTTPD_ARG}")
set_tests_properties(integration.h2.peer PROPERTIES LABELS integration TIMEOUT 120)
