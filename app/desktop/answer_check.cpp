// check_answers (answer_check.h).
#include "app/desktop/answer_check.h"

#include "engine/tasks/task_suite.h"

namespace cl::app {

void check_answers(std::vector<viz::RunView>& runs) {
    for (auto& run : runs) {
        const auto item = tasks::recognise_task_prompt(run.info.prompt_text);
        if (!item) {
            run.answer.reset();
            continue;
        }
        viz::RunView::AnswerCheck check;
        check.expected = item->answer;
        if (run.summary && run.summary->status == trace::RunStatus::Complete) {
            check.complete = true;
            check.answered = tasks::extract_answer(run.summary->final_text);
            check.correct = tasks::exact_match(*item, run.summary->final_text);
        }
        run.answer = check;
    }
}

}  // namespace cl::app
