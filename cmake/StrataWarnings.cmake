# Warnings and sanitizer flags for every target of ours.
add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wall> $<$<COMPILE_LANGUAGE:CXX>:-Wextra>
                    $<$<COMPILE_LANGUAGE:CXX>:-Wno-missing-field-initializers>)
# Clang checks the lock annotations of base/thread_annotations.h (the beta
# part checks the lock order declared with ACQUIRED_BEFORE/ACQUIRED_AFTER);
# make lint (STRATA_LINT=ON) turns what it finds into errors.
option(STRATA_LINT "Clang build for make lint: thread-safety warnings are errors" OFF)
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wthread-safety>
                      $<$<COMPILE_LANGUAGE:CXX>:-Wthread-safety-beta>)
  if(STRATA_LINT)
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Werror=thread-safety>)
  endif()
elseif(STRATA_LINT)
  message(FATAL_ERROR "STRATA_LINT needs clang (CMAKE_CXX_COMPILER=clang++), not ${CMAKE_CXX_COMPILER_ID}")
endif()

if(STRATA_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(STRATA_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(STRATA_SANITIZE)
  message(FATAL_ERROR "STRATA_SANITIZE must be address, thread or empty, not '${STRATA_SANITIZE}'")
endif()

# make fuzz: every target instrumented for libFuzzer with ASan and UBSan; the
# fuzz executables add -fsanitize=fuzzer (libFuzzer's main) at link time.
if(STRATA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "STRATA_FUZZ needs clang (CMAKE_CXX_COMPILER=clang++), not ${CMAKE_CXX_COMPILER_ID}")
  endif()
  if(STRATA_SANITIZE)
    message(FATAL_ERROR "STRATA_FUZZ brings its own sanitizers; leave STRATA_SANITIZE empty")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=address,undefined)
endif()
