# Installs the build into a scratch prefix, then configures, builds and runs
# tests/install/consumer against it with find_package(strata).
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${STRATA_BINARY_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
# The installed headers are the public API alone: every header they include is
# another installed header or a system one (no internal base/, io/, ...).
file(GLOB installed_headers RELATIVE ${WORK_DIR}/prefix/include ${WORK_DIR}/prefix/include/*
     ${WORK_DIR}/prefix/include/*/*)
foreach(header ${installed_headers})
  if(NOT header MATCHES "^strata/[a-z_]+\\.h$" AND NOT IS_DIRECTORY ${WORK_DIR}/prefix/include/${header})
    message(FATAL_ERROR "installed header outside include/strata: ${header}")
  endif()
  if(header MATCHES "\\.h$")
    file(STRINGS ${WORK_DIR}/prefix/include/${header} includes REGEX "^#include \"")
    foreach(line ${includes})
      string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" included "${line}")
      if(NOT EXISTS ${WORK_DIR}/prefix/include/${included})
        message(FATAL_ERROR "installed ${header} includes ${included}, which is not installed")
      endif()
    endforeach()
  endif()
endforeach()

execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build -G Ninja
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the consumer project failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the consumer project failed (${rc})")
endif()
execute_process(COMMAND ${WORK_DIR}/build/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "consumer printed: ${out}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "strata-consumer-ok")
  message(FATAL_ERROR "the consumer program failed (${rc}): ${out}")
endif()

# The Cluster from the installed package, under mpirun at two ranks, where
# the package has it (and mpirun is there: MPIEXEC).
if(EXISTS ${WORK_DIR}/build/consumer_cluster)
  if(NOT MPIEXEC)
    message(FATAL_ERROR "the package has strata::Cluster but no mpirun was found to run it")
  endif()
  set(root_flag "")
  execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(uid STREQUAL "0")
    set(root_flag --allow-run-as-root)
  endif()
  execute_process(COMMAND ${MPIEXEC} --oversubscribe ${root_flag} --mca btl self,vader
                          --mca btl_vader_single_copy_mechanism none -np 2
                          ${WORK_DIR}/build/consumer_cluster ${WORK_DIR}/cluster
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
  message(STATUS "consumer_cluster printed: ${out}")
  if(NOT rc EQUAL 0 OR NOT out MATCHES "strata-consumer-cluster-ok 2")
    message(FATAL_ERROR "the cluster consumer failed (${rc}): ${out} ${err}")
  endif()
endif()
