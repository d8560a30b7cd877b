# `cachelens` command line: --help and --version without a display; every bad value an error
# (exit 2) that names the option; a model that cannot load fails a headless figure (exit 2).
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})

function(expect_run code pattern)  # ARGN: the command line
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL code)
    message(FATAL_ERROR "${ARGN}: exit ${rc}, expected ${code}\n${out}\n${err}")
  endif()
  if(NOT "${out}${err}" MATCHES "${pattern}")
    message(FATAL_ERROR "${ARGN}: output does not match '${pattern}':\n${out}\n${err}")
  endif()
endfunction()

# No display at all: help and version print and exit 0 (QApplication would abort without one).
expect_run(0 "--screenshot" env -u DISPLAY -u WAYLAND_DISPLAY QT_QPA_PLATFORM=xcb ${APP} --help)
expect_run(0 "cachelens [0-9]+\\.[0-9]+" env -u DISPLAY QT_QPA_PLATFORM=xcb ${APP} --version)
# Bad values: named, refused before any window.
expect_run(2 "--policies: unknown policy 'bogus'" ${APP} --policies none,bogus)
expect_run(2 "--advance x: expected a whole number" ${APP} --advance x)
expect_run(2 "--threads 0: expected a whole number from 1" ${APP} --threads 0)
expect_run(2 "--size 12: expected WxH" ${APP} --size 12)
expect_run(2 "--export-panel bogus: unknown panel" ${APP} --screenshot ${OUT}/a.png
           --export ${OUT}/b.png --export-panel bogus)
expect_run(2 "--export needs --screenshot" ${APP} --export ${OUT}/b.png)
expect_run(2 "--export-scale 9: expected a whole number from 1 to 4" ${APP} --screenshot
           ${OUT}/a.png --export ${OUT}/b.png --export-scale 9)
# The attention's level of detail and the zoom window: bad values are named.
expect_run(2 "--attention-budget 0: expected a whole number from 1 to 100000" ${APP} --screenshot
           ${OUT}/a.png --attention-budget 0)
expect_run(2 "--zoom 5,x: expected FIRST,COUNT" ${APP} --screenshot ${OUT}/a.png --zoom 5,x)
expect_run(2 "--zoom 5,4: expected FIRST,COUNT" ${APP} --screenshot ${OUT}/a.png --zoom 5,4)
expect_run(2 "--export-columns 0,2: expected column numbers from 1" ${APP} --screenshot
           ${OUT}/a.png --export ${OUT}/b.png --export-columns 0,2)
expect_run(2 "--export-scale and --export-columns need --export FILE.png" ${APP} --screenshot
           ${OUT}/a.png --export ${OUT}/b.csv --export-scale 2)
expect_run(2 "--step needs --session" ${APP} --step 3)
expect_run(2 "unexpected argument 'stray'" ${APP} stray)
expect_run(2 "Unknown option" ${APP} --no-such-option)
# A model folder that does not exist: a headless figure is an error that names it (the window
# falls back to the embedded model, but a figure of the wrong model is no figure).
expect_run(2 "Model not loaded: ${OUT}/missing: model folder not found" ${APP} --model
           ${OUT}/missing --no-record --screenshot ${OUT}/c.png)
if(EXISTS ${OUT}/c.png)
  message(FATAL_ERROR "a failed load wrote a screenshot")
endif()
# The same for a session that does not open: its path once, no screenshot.
expect_run(2 "cachelens: ${OUT}/none.clsession: session file not found" ${APP} --session
           ${OUT}/none.clsession --no-record --screenshot ${OUT}/d.png)
execute_process(COMMAND ${APP} --session ${OUT}/none.clsession --no-record --screenshot
                ${OUT}/d.png OUTPUT_VARIABLE out ERROR_VARIABLE err)
if("${out}${err}" MATCHES "none.clsession.*none.clsession")
  message(FATAL_ERROR "the session's path is named twice:\n${out}${err}")
endif()
if(EXISTS ${OUT}/d.png)
  message(FATAL_ERROR "a failed session wrote a screenshot")
endif()
