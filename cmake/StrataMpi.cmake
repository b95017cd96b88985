# STRATA_MPI=AUTO|ON|OFF. AUTO builds strata::Cluster (engine/cluster*.cc,
# include/strata/cluster.h) and its mpirun tests whenever Open MPI's C
# bindings are found (scripts/deps.sh installs libopenmpi-dev and
# openmpi-bin). Sets STRATA_HAVE_MPI and, for the tests, MPIEXEC_EXECUTABLE.
set(STRATA_HAVE_MPI OFF)
if(NOT STRATA_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(STRATA_HAVE_MPI ON)
  elseif(STRATA_MPI STREQUAL "ON")
    message(FATAL_ERROR "STRATA_MPI=ON but no MPI (libopenmpi-dev) was found")
  endif()
endif()
