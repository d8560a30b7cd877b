# Installs the build into PREFIX, then runs the installed CLI on the installed default model with
# no source or build path in reach (a copy of the prefix elsewhere would work the same).
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${PREFIX}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
foreach(f bin/cachelens-cli share/cachelens/assets/models/cachelens-tiny/config.json
          share/cachelens/assets/lessons/01-bidirectional.lesson.json)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
execute_process(COMMAND env -u CACHELENS_MODEL -u CACHELENS_ASSETS ${PREFIX}/bin/cachelens-cli
                        inspect-model --json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "cachelens-tiny")
  message(FATAL_ERROR "installed cachelens-cli inspect-model failed (${rc}): ${out}${err}")
endif()
message(STATUS "installed CLI found ${PREFIX}/share/cachelens/assets")
