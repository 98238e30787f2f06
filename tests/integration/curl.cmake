# The libcurl transport against the real sg-fakemodel (included by
# tests/integration/CMakeLists.txt).
sg_parts_check(curl_ok curl_transport_test ${CMAKE_CURRENT_SOURCE_DIR}/curl_transport_test.c)
if(TARGET sg-fakemodel AND curl_ok)
  add_executable(curl_transport_test ${CMAKE_CURRENT_SOURCE_DIR}/curl_transport_test.c)
  target_link_libraries(curl_transport_test PRIVATE streamguard_static PkgConfig::CMOCKA)
  target_compile_options(curl_transport_test PRIVATE -Wall -Wextra)
  add_test(NAME integration.curl_transport
           COMMAND curl_transport_test $<TARGET_FILE:sg-fakemodel>)
  set_tests_properties(integration.curl_transport PROPERTIES LABELS integration TIMEOUT 300)
endif()

# libcurl's threaded resolver busy when the budget ends (needs unshare(2):
# a private network namespace; skipped elsewhere).
sg_parts_check(resolver_ok curl_resolver_test ${CMAKE_CURRENT_SOURCE_DIR}/curl_resolver_test.c)
if(resolver_ok)
  add_executable(curl_resolver_test ${CMAKE_CURRENT_SOURCE_DIR}/curl_resolver_test.c)
  target_link_libraries(curl_resolver_test PRIVATE streamguard_static PkgConfig::CMOCKA)
  target_compile_options(curl_resolver_test PRIVATE -Wall -Wextra)
  add_test(NAME integration.curl_resolver COMMAND curl_resolver_test)
  set_tests_properties(integration.curl_resolver PROPERTIES LABELS integration TIMEOUT 60)
endif()

# Streams expiring together: all told before any connection closes.
sg_parts_check(expiry_ok curl_expiry_test ${CMAKE_CURRENT_SOURCE_DIR}/curl_expiry_test.c)
if(TARGET sg-fakemodel AND expiry_ok)
  add_executable(curl_expiry_test ${CMAKE_CURRENT_SOURCE_DIR}/curl_expiry_test.c)
  target_link_libraries(curl_expiry_test PRIVATE streamguard_static PkgConfig::CMOCKA)
  target_compile_options(curl_expiry_test PRIVATE -Wall -Wextra)
  add_test(NAME integration.curl_expiry COMMAND curl_expiry_test $<TARGET_FILE:sg-fakemodel>)
  set_tests_properties(integration.curl_expiry PROPERTIES LABELS integration TIMEOUT 60)
endif()

# The heap an open stream holds over libcurl (libcurl's share counted by
# its own allocators).
sg_parts_check(curl_mem_ok curl_memory_test ${CMAKE_CURRENT_SOURCE_DIR}/curl_memory_test.c)
if(TARGET sg-fakemodel AND curl_mem_ok)
  add_executable(curl_memory_test ${CMAKE_CURRENT_SOURCE_DIR}/curl_memory_test.c)
  target_link_libraries(curl_memory_test PRIVATE streamguard_static PkgConfig::CMOCKA)
  target_compile_options(curl_memory_test PRIVATE -Wall -Wextra)
  add_test(NAME integration.curl.memory COMMAND curl_memory_test $<TARGET_FILE:sg-fakemodel>)
  set_tests_properties(integration.curl.memory PROPERTIES LABELS integration TIMEOUT 60)
endif()

# libcurl's read buffers given back while their transfers are quiet
# (sg_curl_global_init): its own process, libcurl's allocators its first.
sg_parts_check(curl_readbuf_ok curl_readbuf_test ${CMAKE_CURRENT_SOURCE_DIR}/curl_readbuf_test.c
               DIRS ${PROJECT_SOURCE_DIR}/src)
if(TARGET sg-fakemodel AND curl_readbuf_ok)
  add_executable(curl_readbuf_test ${CMAKE_CURRENT_SOURCE_DIR}/curl_readbuf_test.c)
  target_link_libraries(curl_readbuf_test PRIVATE streamguard_static PkgConfig::CMOCKA)
  target_include_directories(curl_readbuf_test PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(curl_readbuf_test PRIVATE -Wall -Wextra)
  add_test(NAME integration.curl.readbuf COMMAND curl_readbuf_test $<TARGET_FILE:sg-fakemodel>)
  set_tests_properties(integration.curl.readbuf PROPERTIES LABELS integration TIMEOUT 60)
endif()
