# The OpenTelemetry exporter end to end (libstreamguard-otel, when built):
# a test OTLP/HTTP collector on loopback that decodes what it receives
# (otel_collector.c), a blackhole and a refusing port (otel_export_test.c).
if(TARGET streamguard_otel_static)
  add_executable(otel_export_test otel_export_test.c otel_collector.c)
  target_link_libraries(otel_export_test PRIVATE streamguard_otel_static PkgConfig::CMOCKA)
  target_include_directories(otel_export_test PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(otel_export_test PRIVATE -Wall -Wextra)
  add_test(NAME integration.otel_export COMMAND otel_export_test)
  set_tests_properties(integration.otel_export PROPERTIES LABELS integration TIMEOUT 120)
endif()
