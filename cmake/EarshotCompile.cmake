# Compile settings for earshot's own targets (never applied to third-party code).

add_library(earshot_compile_options INTERFACE)
target_compile_options(earshot_compile_options INTERFACE -Wall -Wextra)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  # GCC 12 reports -Wrestrict false positives inside std::string at -O2/-O3 (GCC bug 105651).
  target_compile_options(earshot_compile_options INTERFACE -Wno-restrict)
endif()
if(EARSHOT_SANITIZE)
  target_compile_options(earshot_compile_options INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
    # UBSan's vptr check probes the vtable through a pipe(): out of file descriptors (a
    # state the server must survive; StreamLimits.OutOfFileDescriptors... creates it) every
    # probe fails and a valid Beast operation is reported as "invalid vptr". ASan still
    # catches the use-after-free a bad vptr would mean; the fuzz flavour keeps the check.
    -fno-sanitize=vptr)
  target_link_options(earshot_compile_options INTERFACE -fsanitize=address,undefined)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # ASan instrumentation makes GCC's -Wmaybe-uninitialized fire inside Boost.Beast's
    # parser headers (false positives; the Release build stays clean with it on).
    target_compile_options(earshot_compile_options INTERFACE -Wno-maybe-uninitialized)
  endif()
endif()

if(EARSHOT_FUZZ)
  # The fuzz flavour (scripts/build.sh fuzz): earshot's own code carries libFuzzer's
  # coverage instrumentation plus ASan and UBSan; the targets in fuzz/ link the fuzzer.
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "EARSHOT_FUZZ=ON needs clang (libFuzzer): configure with CC=clang CXX=clang++")
  endif()
  target_compile_options(earshot_compile_options INTERFACE
    -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(earshot_compile_options INTERFACE -fsanitize=address,undefined)
endif()
if(EARSHOT_TSAN)
  if(EARSHOT_SANITIZE)
    message(FATAL_ERROR "EARSHOT_TSAN and EARSHOT_SANITIZE cannot be combined (ThreadSanitizer excludes ASan)")
  endif()
  # ThreadSanitizer on earshot's own code (ggml stays uninstrumented: its threadpool's
  # accesses are invisible to TSan, and tsan.supp covers what its interceptors still see).
  target_compile_options(earshot_compile_options INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(earshot_compile_options INTERFACE -fsanitize=thread)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # As with ASan: false -Wmaybe-uninitialized in Beast's parser; and GCC's -Wtsan notes that
    # TSan does not model std::atomic_thread_fence, which Boost.Asio uses only on paths we do not take.
    target_compile_options(earshot_compile_options INTERFACE -Wno-maybe-uninitialized -Wno-tsan)
  endif()
endif()

# earshot_library(NAME SOURCES... [DEPS ...]): a part of earshot, e.g. earshot_audio.
function(earshot_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC earshot_compile_options ${ARG_DEPS})
endfunction()

# earshot_test(NAME SOURCES... [DEPS ...] [LABELS ...]): a GoogleTest executable under CTest.
# Tests run from the build tree; EARSHOT_SHARED_DIR tells them where ../shared is.
function(earshot_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE earshot_compile_options GTest::gtest GTest::gtest_main GTest::gmock ${ARG_DEPS})
  target_compile_definitions(${name} PRIVATE EARSHOT_SHARED_DIR="${EARSHOT_SHARED_DIR}"
                                             EARSHOT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  if(("slow" IN_LIST ARG_LABELS AND NOT EARSHOT_SLOW_TESTS) OR (NOT "slow" IN_LIST ARG_LABELS AND NOT EARSHOT_FAST_TESTS))
    # Kept as a target (callers may still configure it) but neither built nor registered.
    set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL ON)
    return()
  endif()
  include(GoogleTest)
  # An empty LABELS value would vanish from the list and swallow the next key, so add it only when set.
  set(properties ENVIRONMENT "EARSHOT_SHARED_DIR=${EARSHOT_SHARED_DIR}")
  if(ARG_LABELS)
    string(REPLACE ";" "\\;" labels "${ARG_LABELS}")  # several labels stay one property value
    list(APPEND properties LABELS "${labels}")
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES ${properties})
endfunction()

# earshot_fuzz_regression_test(TARGET DEPS ...): the fuzz target fuzz/targets/TARGET.cpp
# run as a GoogleTest over the inputs that once broke it, kept beside the parser's
# tests in fuzz_regressions/TARGET/ of the calling folder (fuzz/replay_test.cpp).
function(earshot_fuzz_regression_test target)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  earshot_test(earshot_fuzz_regression_${target}
    SOURCES ${PROJECT_SOURCE_DIR}/fuzz/replay_test.cpp ${PROJECT_SOURCE_DIR}/fuzz/targets/${target}.cpp
    DEPS ${ARG_DEPS})
  target_compile_definitions(earshot_fuzz_regression_${target} PRIVATE
    EARSHOT_FUZZ_REGRESSIONS="${CMAKE_CURRENT_SOURCE_DIR}/fuzz_regressions/${target}")
endfunction()
