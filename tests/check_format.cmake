# SPDX-License-Identifier: MIT
# Fails when any C source differs from what clang-format and .clang-format make of it.
file(GLOB_RECURSE sources
  ${SOURCE_DIR}/common/*.[ch] ${SOURCE_DIR}/daemon/*.[ch] ${SOURCE_DIR}/client/*.[ch]
  ${SOURCE_DIR}/tests/*.[ch] ${SOURCE_DIR}/bench/*.[ch])
set(bad "")
foreach(f ${sources})
  execute_process(COMMAND ${CLANG_FORMAT} --dry-run --Werror ${f}
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT rc EQUAL 0)
    list(APPEND bad ${f})
  endif()
endforeach()
if(bad)
  message(FATAL_ERROR "clang-format disagrees with: ${bad}\nRun: clang-format -i <files>")
endif()
