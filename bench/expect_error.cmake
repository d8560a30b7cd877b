# Runs EXE OPTION VALUE and expects exit status 2 with MESSAGE in its standard error (a bench
# driver's bad input: a clear error, no crash, no run).
execute_process(COMMAND ${EXE} ${OPTION} ${VALUE} RESULT_VARIABLE rc ERROR_VARIABLE err
                OUTPUT_VARIABLE out)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "${EXE} ${OPTION} ${VALUE}: exit ${rc}, expected 2\n${err}")
endif()
string(FIND "${err}" "${MESSAGE}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${EXE} ${OPTION} ${VALUE}: stderr lacks \"${MESSAGE}\":\n${err}")
endif()
