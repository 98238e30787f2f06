# sg-fakemodel's limits over each protocol, with the curl command: the rate
# limiter (requests and tokens per window, OpenAI's and Anthropic's
# headers, 429s, /_stats) and fail_first with each failure
# (fakemodel_limits.sh).
if(TARGET sg-fakemodel AND SG_CURL_PROGRAM)
  foreach(proto h1 h2c h2tls)
    add_test(NAME integration.fakemodel.limits.${proto}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/fakemodel_limits.sh
                     $<TARGET_FILE:sg-fakemodel> ${proto})
    set_tests_properties(integration.fakemodel.limits.${proto} PROPERTIES
                         LABELS integration TIMEOUT 120)
  endforeach()
endif()
