# libFuzzer targets (clang only), included by the top-level CMakeLists.txt
# when TOKENGATE_FUZZ is ON, in place of the normal build: scripts/fuzz
# configures build-fuzz/ with clang++ and runs each target for a bounded time.
# Only the parsing code is compiled, header-only Boost (no Asio runtime).
set(FUZZ_FLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
               -fno-omit-frame-pointer -g -O1)
add_library(fuzz_parsing STATIC
  proxy/config/config.cpp proxy/config/duration.cpp proxy/config/budget_section.cpp
  proxy/config/cache_section.cpp
  proxy/config/fleet_section.cpp proxy/config/glob.cpp proxy/config/tracing_section.cpp
  proxy/routing/json_scan.cpp proxy/routing/policy.cpp proxy/scan/sha256.cpp proxy/upstream/body_edits.cpp
  proxy/stream/sse_parser.cpp proxy/stream/observation.cpp proxy/stream/observer.cpp proxy/stream/chat_dialect.cpp
  proxy/stream/responses_dialect.cpp proxy/stream/anthropic_dialect.cpp proxy/stream/native_dialect.cpp
  proxy/stream/whole_usage.cpp
  proxy/http/body_decoder.cpp
  proxy/http/headers.cpp proxy/http/head_bytes.cpp proxy/http/request_head.cpp proxy/http/chunked_body.cpp
  proxy/http/message_head.cpp proxy/http/response_head.cpp
  proxy/translate/anthropic_from_chat.cpp proxy/translate/chat_from_anthropic.cpp
  proxy/translate/anthropic_request_from_chat.cpp proxy/translate/chat_request_from_anthropic.cpp
  proxy/translate/chat_request_from_responses.cpp proxy/translate/responses_from_chat.cpp
  proxy/translate/prompt_cache.cpp
  proxy/translate/responses_request_from_chat.cpp proxy/translate/chat_from_responses.cpp
  proxy/translate/responses_from_anthropic.cpp
  proxy/translate/anthropic_from_responses.cpp
  proxy/translate/errors.cpp proxy/stream/error_event.cpp proxy/http/json_error.cpp
  ${EMBEDDED_CONFIG_CPP})
add_dependencies(fuzz_parsing layers_checked)
target_include_directories(fuzz_parsing PUBLIC ${CMAKE_SOURCE_DIR}/proxy)
target_compile_definitions(fuzz_parsing PUBLIC BOOST_JSON_NO_LIB BOOST_URL_NO_LIB)
target_compile_options(fuzz_parsing PUBLIC ${FUZZ_FLAGS})
target_link_libraries(fuzz_parsing PUBLIC Boost::json OpenSSL::Crypto yaml-cpp spdlog::spdlog)

foreach(name sse policy config http_request body response_head translate)
  add_executable(${name}_fuzz tests/fuzz/${name}_fuzz.cpp)
  target_link_libraries(${name}_fuzz PRIVATE fuzz_parsing)
  target_link_options(${name}_fuzz PRIVATE -fsanitize=fuzzer,address,undefined)
endforeach()
