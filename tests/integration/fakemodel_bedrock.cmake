# sg-fakemodel's Bedrock formats in AWS event-stream framing, over each
# protocol: curl as the client, a small independent Python decoder (zlib's
# crc32) as the judge of the bytes.  python3: Debian package python3.
if(TARGET sg-fakemodel AND SG_CURL_PROGRAM)
  find_program(SG_PYTHON3 python3)
  if(SG_PYTHON3)
    foreach(proto h1 h2c h1tls h2tls)
      add_test(NAME integration.fakemodel.bedrock.${proto}
               COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/fakemodel_bedrock.sh
                       $<TARGET_FILE:sg-fakemodel> ${proto} ${SG_PYTHON3})
      set_tests_properties(integration.fakemodel.bedrock.${proto} PROPERTIES
                           LABELS integration TIMEOUT 120)
    endforeach()
  else()
    message(STATUS "python3 not found: sg-fakemodel Bedrock tests skipped")
  endif()
endif()
