# Trace context on the wire (<streamguard/otel_trace.h>; docs/otel.md):
# the traceparent each attempt sent, as sg-fakemodel logged it, against
# the spans a capture sink received (tests/unit/otel_sink.c).
sg_parts_check(otel_it_ok otel_fakemodel_test
               ${CMAKE_CURRENT_LIST_DIR}/otel_fakemodel_test.c
               DIRS ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests/unit)
if(NOT TARGET sg-fakemodel OR NOT otel_it_ok)
  return()
endif()
add_executable(otel_fakemodel_test ${CMAKE_CURRENT_LIST_DIR}/otel_fakemodel_test.c
                                   ${PROJECT_SOURCE_DIR}/tests/unit/otel_sink.c)
# (the sink before libstreamguard-otel: its exporter is never pulled in)
target_link_libraries(otel_fakemodel_test PRIVATE streamguard_static PkgConfig::CMOCKA)
sg_parts_link(otel_fakemodel_test ${otel_it_ok_PARTS})
target_include_directories(otel_fakemodel_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}
                           ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests/unit)
target_compile_options(otel_fakemodel_test PRIVATE -Wall -Wextra -Wno-unused-function)
add_test(NAME integration.otel.traceparent
         COMMAND otel_fakemodel_test $<TARGET_FILE:sg-fakemodel>)
set_tests_properties(integration.otel.traceparent PROPERTIES LABELS integration TIMEOUT 120)
