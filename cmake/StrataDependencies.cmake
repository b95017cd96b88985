# Finds the Debian packages Strata builds with (installed by scripts/deps.sh).
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)

pkg_check_modules(LIBURING REQUIRED IMPORTED_TARGET liburing)
pkg_check_modules(LIBNUMA IMPORTED_TARGET numa)
if(NOT LIBNUMA_FOUND)
  find_library(NUMA_LIBRARY numa REQUIRED)
  add_library(PkgConfig::LIBNUMA UNKNOWN IMPORTED)
  set_target_properties(PkgConfig::LIBNUMA PROPERTIES IMPORTED_LOCATION ${NUMA_LIBRARY})
endif()
pkg_check_modules(LIBXXHASH REQUIRED IMPORTED_TARGET libxxhash)

find_library(ROCKSDB_LIBRARY rocksdb REQUIRED)
find_path(ROCKSDB_INCLUDE_DIR rocksdb/db.h REQUIRED)
add_library(strata_rocksdb INTERFACE)
target_link_libraries(strata_rocksdb INTERFACE ${ROCKSDB_LIBRARY})
target_include_directories(strata_rocksdb SYSTEM INTERFACE ${ROCKSDB_INCLUDE_DIR})

find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(GTest REQUIRED)
find_package(benchmark REQUIRED)
