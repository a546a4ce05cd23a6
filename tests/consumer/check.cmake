# cmake -P script run by the install_consumer test.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()
run(${CMAKE_COMMAND} --install ${KNMF_BUILD_DIR} --prefix ${prefix})
# the public headers only: nothing of detail/ or of src/ installed
run(${CMAKE_COMMAND} -DPREFIX=${prefix} -P ${CMAKE_CURRENT_LIST_DIR}/check_install_tree.cmake)
message("${last_output}")
run(${CMAKE_COMMAND} -G ${GENERATOR} -S ${CONSUMER_SRC} -B ${WORK_DIR}/build
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
    -Dknmf_DIR=${prefix}/lib/cmake/knmf -DKokkos_DIR=${Kokkos_DIR}
    -DKokkosKernels_DIR=${KokkosKernels_DIR})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/knmf_consumer)
message(STATUS "consumer output:\n${last_output}")
if(NOT last_output MATCHES "consumer ok")
  message(FATAL_ERROR "consumer did not report success")
endif()
# the Python module, when built: importable from the prefix alone
if(PYTHON AND PYTHON_SITE)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${prefix}/${PYTHON_SITE} ${PYTHON_ENV}
                          ${PYTHON} -c "import knmf, os; print(knmf.__version__, os.path.dirname(knmf.__file__))"
                  WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "^${VERSION} ${prefix}/${PYTHON_SITE}/knmf")
    message(FATAL_ERROR "the installed Python module does not import from ${prefix}/${PYTHON_SITE} (${rc}): ${out}${err}")
  endif()
  message(STATUS "Python module: ${out}")
endif()
