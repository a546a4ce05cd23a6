# `knmf demo`'s work folder (drivers/commands/demo.cpp), run by ctest:
#   cmake -DKNMF=<knmf> -DMODE=temp|out -DWORK=<empty folder to use> -P demo_workdir.cmake
# temp: the README's demo (defaults) with TMPDIR pointed at WORK/tmp: it recovers every planted
#       program, and its temporary work folder is gone afterwards.
# out:  a small demo with --out WORK/out keeps the prepared matrix and the results file there
#       (and leaves nothing in TMPDIR); run again, it resumes the complete results file.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/tmp")
set(ENV{TMPDIR} "${WORK}/tmp")

function(run_demo expect_regex)
  execute_process(COMMAND "${KNMF}" demo ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "knmf demo ${ARGN}: exit ${rc}")
  endif()
  if(NOT out MATCHES "${expect_regex}")
    message(FATAL_ERROR "knmf demo ${ARGN}: no line matching '${expect_regex}'")
  endif()
endfunction()

function(expect_empty_tmp)
  file(GLOB left "${WORK}/tmp/*")
  if(left)
    message(FATAL_ERROR "knmf demo left files in its temporary folder: ${left}")
  endif()
endfunction()

if(MODE STREQUAL "temp")
  run_demo("recovered 6/6 planted programs")
  expect_empty_tmp()
elseif(MODE STREQUAL "out")
  set(small --cells 1500 --genes 1000 --numgenes 500 --programs 3 --activity 0 -k 3 --n-iter 5
            --out "${WORK}/out")
  run_demo("kept in .*recovered 3/3 planted programs" ${small})
  expect_empty_tmp()
  foreach(f demo.norm_counts.h5ad demo.results.h5)
    if(NOT EXISTS "${WORK}/out/${f}")
      message(FATAL_ERROR "knmf demo --out: no ${WORK}/out/${f}")
    endif()
  endforeach()
  run_demo("every replicate already in the results file.*recovered 3/3 planted programs" ${small})
else()
  message(FATAL_ERROR "MODE must be temp or out")
endif()
