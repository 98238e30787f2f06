# HTTP/2 refused streams - REFUSED_STREAM, and streams above a GOAWAY's
# last stream id - on both transports, against the real sg-fakemodel over
# TLS (a fragment included from tests/integration/CMakeLists.txt).
sg_parts_check(refused_ok refused_stream_test ${CMAKE_CURRENT_LIST_DIR}/refused_stream_test.c)
if(TARGET sg-fakemodel AND refused_ok)
  add_executable(refused_stream_test ${CMAKE_CURRENT_LIST_DIR}/refused_stream_test.c)
  target_link_libraries(refused_stream_test PRIVATE streamguard_static PkgConfig::CMOCKA)
  target_compile_options(refused_stream_test PRIVATE -Wall -Wextra -Wno-unused-function)
  add_test(NAME integration.refused_stream
           COMMAND refused_stream_test $<TARGET_FILE:sg-fakemodel>)
  set_tests_properties(integration.refused_stream PROPERTIES LABELS integration TIMEOUT 120)
endif()
