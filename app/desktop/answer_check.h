// Fills RunView::answer for runs whose prompt is a task-suite item (engine/tasks): the answer the
// prompt expects and, once a run is complete, whether its text after "Answer:" matches. Live and
// replayed runs go through the same function, so both show the same verdict.
#pragma once

#include <vector>

#include "viz/viz_context.h"

namespace cl::app {

void check_answers(std::vector<viz::RunView>& runs);

}  // namespace cl::app
