// Lesson claims checked against the session they replay. A lesson step's text points at
// something on screen ("the red marks in the diff strips", "the marker on the left of the map");
// its "checks" say what, so a test can tell when a re-recorded session no longer shows it:
//   "checks": [ {"kind": "differs", "column": 3},            // tokens differ from the baseline
//               {"kind": "agrees", "column": 2},             // and do not
//               {"kind": "trigger", "column": 3},            // a fired trigger at the step
//               {"kind": "reuses", "column": 2},             // some (layer, row) not recomputed
//               {"kind": "recomputes-all", "column": 1},     // a full forward
//               {"kind": "recompute-differs", "column": 1, "other": 2} ]  // the maps differ
// Columns count from 1, as the lesson texts do; the step is the lesson step's (-1 = the last).
#pragma once

#include <string>
#include <vector>

namespace cl::viz {

struct RunView;  // viz_context.h (which includes lesson.h, which includes this)

struct LessonCheck {
    std::string kind;
    int column = 0;  // 1-based
    int other = 0;   // 1-based, recompute-differs only
};

// The check kinds a lesson may use.
const std::vector<std::string>& lesson_check_kinds();

// "" when the claim holds at `step` (-1: each column's last step), else what is missing there.
std::string evaluate_lesson_check(const LessonCheck& check, const std::vector<RunView>& runs,
                                  int32_t step);

}  // namespace cl::viz
