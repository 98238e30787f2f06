# libstreamguard-otel: the OpenTelemetry exporter (include/streamguard/
# otel.h, src/otel/; docs/otel.md), a library of its own beside
# libstreamguard, so that a program without tracing links neither
# protobuf-c nor the exporter's thread.  Included by the top-level
# CMakeLists.txt when SG_WITH_OTEL is on.
#
# The OTLP messages are C that protoc-c generates at build time from the
# vendored, pinned third_party/opentelemetry-proto; the generated code is
# compiled without the project's warnings (it is not ours) and hidden in
# the library like the rest.

# The SONAME's version: bump on any incompatible change of otel.h.
set(SG_OTEL_SOVERSION 1)

set(SG_OTEL_PROTO_DIR ${PROJECT_SOURCE_DIR}/third_party/opentelemetry-proto)
set(SG_OTEL_GEN_DIR ${PROJECT_BINARY_DIR}/generated/otel)
set(SG_OTEL_PROTOS "")
set(SG_OTEL_GEN "")
foreach(proto common/v1/common resource/v1/resource trace/v1/trace
              collector/trace/v1/trace_service)
  list(APPEND SG_OTEL_PROTOS ${SG_OTEL_PROTO_DIR}/opentelemetry/proto/${proto}.proto)
  list(APPEND SG_OTEL_GEN ${SG_OTEL_GEN_DIR}/opentelemetry/proto/${proto}.pb-c.c
              ${SG_OTEL_GEN_DIR}/opentelemetry/proto/${proto}.pb-c.h)
endforeach()
add_custom_command(
  OUTPUT ${SG_OTEL_GEN}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${SG_OTEL_GEN_DIR}
  COMMAND ${SG_PROTOC_C} --c_out=${SG_OTEL_GEN_DIR} -I ${SG_OTEL_PROTO_DIR} ${SG_OTEL_PROTOS}
  DEPENDS ${SG_OTEL_PROTOS}
  COMMENT "protoc-c: the OTLP trace messages (third_party/opentelemetry-proto)"
  VERBATIM)
# One target runs protoc-c; the others wait for it (never two at once).
add_custom_target(sg_otel_generated DEPENDS ${SG_OTEL_GEN})
set(SG_OTEL_GEN_C ${SG_OTEL_GEN})
list(FILTER SG_OTEL_GEN_C INCLUDE REGEX "\\.c$")
add_library(sg_otel_proto OBJECT ${SG_OTEL_GEN_C})
add_dependencies(sg_otel_proto sg_otel_generated)
set_target_properties(sg_otel_proto PROPERTIES
    POSITION_INDEPENDENT_CODE ON
    C_VISIBILITY_PRESET hidden)
target_include_directories(sg_otel_proto PRIVATE ${SG_OTEL_GEN_DIR}
    $<TARGET_PROPERTY:PkgConfig::PROTOBUFC,INTERFACE_INCLUDE_DIRECTORIES>)

# The exporter's own code sees, like a layer (CMakeLists.txt, "library"),
# a view: the public headers of the core and the policy (the observer
# seam) and otel.h, its own folder and src/sgx/ - never a layer's insides.
set(SG_PUB_otel core guard ${SG_PUB_POLICY} otel otel_trace)
set(view ${PROJECT_BINARY_DIR}/layers/otel)
file(MAKE_DIRECTORY ${view}/streamguard ${view}/streamguard/unstable)
foreach(h IN LISTS SG_PUB_otel)
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/streamguard/${h}.h
       ${view}/streamguard/${h}.h SYMBOLIC)
endforeach()
foreach(d otel sgx)
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${d} ${view}/${d} SYMBOLIC)
endforeach()
file(GLOB SG_OTEL_SRCS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/otel/*.c)
add_library(sg_otel OBJECT ${SG_OTEL_SRCS})
add_dependencies(sg_otel sg_otel_generated)
set_target_properties(sg_otel PROPERTIES
    POSITION_INDEPENDENT_CODE ON
    C_VISIBILITY_PRESET hidden)
target_compile_options(sg_otel PRIVATE ${SG_WARNINGS} ${SG_LIB_FLAGS})
target_include_directories(sg_otel PRIVATE ${view})
# (the generated headers and the third-party ones as system headers: their
# code is not held to the project's warnings)
target_include_directories(sg_otel SYSTEM PRIVATE ${SG_OTEL_GEN_DIR}
    $<TARGET_PROPERTY:PkgConfig::PROTOBUFC,INTERFACE_INCLUDE_DIRECTORIES>
    $<TARGET_PROPERTY:PkgConfig::CURL,INTERFACE_INCLUDE_DIRECTORIES>)
target_compile_definitions(sg_otel PRIVATE SG_OTEL_VERSION="${PROJECT_VERSION}")

set(SG_OTEL_OBJECTS $<TARGET_OBJECTS:sg_otel> $<TARGET_OBJECTS:sg_otel_proto>)
add_library(streamguard_otel SHARED ${SG_OTEL_OBJECTS})
set_target_properties(streamguard_otel PROPERTIES
    OUTPUT_NAME streamguard-otel
    VERSION ${PROJECT_VERSION}
    SOVERSION ${SG_OTEL_SOVERSION}
    C_VISIBILITY_PRESET hidden)
target_include_directories(streamguard_otel PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(streamguard_otel PUBLIC streamguard
                      PRIVATE PkgConfig::CURL PkgConfig::PROTOBUFC Threads::Threads)
if(NOT SG_SANITIZE)
  target_link_options(streamguard_otel PRIVATE -Wl,--no-undefined)
endif()
if(SG_HAVE_BSYMBOLIC)
  target_link_options(streamguard_otel PRIVATE -Wl,-Bsymbolic-functions)
endif()
# Exports: the sg_otel_ names alone, in their own version node
# (tests/build/exports.sh holds it to that, as it does libstreamguard).
configure_file(${PROJECT_SOURCE_DIR}/cmake/streamguard-otel.map.in
               ${PROJECT_BINARY_DIR}/streamguard-otel.map @ONLY)
target_link_options(streamguard_otel PRIVATE
    -Wl,--version-script=${PROJECT_BINARY_DIR}/streamguard-otel.map)
set_property(TARGET streamguard_otel APPEND PROPERTY LINK_DEPENDS
             ${PROJECT_BINARY_DIR}/streamguard-otel.map)

# The static form, for the tests and benchmarks that reach sg__ internals
# (not installed): over libstreamguard's static library.
add_library(streamguard_otel_static STATIC ${SG_OTEL_OBJECTS})
set_target_properties(streamguard_otel_static PROPERTIES OUTPUT_NAME streamguard-otel)
target_include_directories(streamguard_otel_static PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${SG_OTEL_GEN_DIR}>)
target_link_libraries(streamguard_otel_static PUBLIC streamguard_static PkgConfig::CURL
                      PkgConfig::PROTOBUFC Threads::Threads)
add_dependencies(streamguard_otel_static sg_otel_generated)

add_library(streamguard::streamguard_otel ALIAS streamguard_otel)
# What a test, benchmark or program that includes <streamguard/otel.h> or
# "otel/..." links (cmake/SgParts.cmake).
set(SG_TARGETS_otel streamguard_otel_static)
