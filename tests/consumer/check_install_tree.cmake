# cmake -DPREFIX=<install prefix> -P check_install_tree.cmake: the installed headers are the
# public API only. Internal headers live under src/ (and the driver's under drivers/), so no
# installed header may sit in a detail/ folder, and the headers that moved out of the install
# must not come back. Run by the install_consumer test (check.cmake) and by .ci/run.
get_filename_component(PREFIX "${PREFIX}" ABSOLUTE)  # GLOB ... RELATIVE needs it absolute
if(NOT IS_DIRECTORY "${PREFIX}/include/knmf")
  message(FATAL_ERROR "check_install_tree: no installed headers under '${PREFIX}/include/knmf'")
endif()
file(GLOB_RECURSE installed RELATIVE "${PREFIX}/include" "${PREFIX}/include/knmf/*")
list(LENGTH installed count)
if(count EQUAL 0)
  message(FATAL_ERROR "check_install_tree: no files found under '${PREFIX}/include/knmf'")
endif()
set(problems "")
foreach(f IN LISTS installed)
  if(f MATCHES "(^|/)detail/")
    string(APPEND problems "\n  ${f}: an internal header (detail/) is installed")
  endif()
endforeach()
# internal headers that were installed once (src/matrix, src/prepare, drivers/ now), and the
# header of the driver's knmf_plot library, which is not installed
foreach(f IN ITEMS knmf/matrix/detail/block_csc.hpp knmf/prepare/detail/sim_random.hpp
                   knmf/io/hdf5_library.hpp knmf/matrix/block_csc.hpp knmf/prepare/sim_random.hpp
                   knmf/consensus/plot.hpp)
  if(EXISTS "${PREFIX}/include/${f}")
    string(APPEND problems "\n  ${f}: an internal header is installed")
  endif()
endforeach()
if(NOT problems STREQUAL "")
  message(FATAL_ERROR "check_install_tree: ${PREFIX}/include:${problems}")
endif()
message(STATUS "check_install_tree: ${count} installed files under include/knmf, none internal")
