// Lessons for workshops: an ordered list of steps, each pointing the viewer at a step of a session,
// highlighting panels and explaining what to look at. Stepped with Space in the app.
//
// File format (assets/lessons/NAME.lesson.json):
// { "title": "...", "session": "NAME.clsession",            // relative to the lesson file
//   "steps": [ { "title": "...", "text": "...", "step": 12,  // the denoising step to show (-1 =
//   last)
//                "panels": ["recompute", "attention"],       // header, tokens, timeline,
//                recompute,
//                                                            // attention, drift, diff, inspector
//                "layer": 3, "oracle": false,                 // optional view settings
//                "annotations": [ { "step": 12, "position": 40, "layer": 3, "text": "..." } ],
//                "checks": [ { "kind": "differs", "column": 3 } ] } ] }  // viz/lesson_checks.h
#pragma once

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "viz/lesson_checks.h"

namespace cl::viz {

struct Annotation {
    int32_t step = -1, position = -1, layer = -1;
    std::string text;
};

struct LessonStep {
    std::string title, text;
    int32_t step = -1;
    int32_t layer = -1;  // -1 = leave as is
    bool oracle = false;
    std::set<std::string> panels;
    std::vector<Annotation> annotations;
    std::vector<LessonCheck> checks;  // what the text says is on screen (tests check it)
};

struct Lesson {
    std::string path, title, session;  // session: absolute path after loading
    std::vector<LessonStep> steps;
};

// Throws std::runtime_error naming the file and the problem.
Lesson load_lesson(const std::string& path);

}  // namespace cl::viz
