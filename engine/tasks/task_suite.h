// The CacheLens task suite: code-generated instruction data with checkable answers, used to
// train the embedded default model and to measure what a cache policy costs in accuracy.
//
// Families: `arith` (addition of zero-padded operands with worked steps, least significant digit
// first), `kv` (long-range key-value recall: the queried key sits early in a 100-250 token
// prompt; keys are one-token words), `reverse` (reversal of a list of digits), `prose` (King James
// Bible verses, public domain, from Debian's bible-kjv package; continuation, for language, not
// scored). Seeded; the train and eval splits are disjoint by construction (different seeds streams
// and a hash-based split on the content). Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace cl::tasks {

enum class Split { Train, Eval };

struct TaskItem {
    std::string family;
    std::string prompt;    // the user message (the chat template is applied by the caller)
    std::string response;  // the full target response (worked steps + "Answer: ...")
    std::string answer;    // what exact match compares (empty for unscored families)
};

struct Difficulty {
    int arith_max_digits = 3;                  // operands have 1..max digits, zero padded to max
    int kv_min_pairs = 16, kv_max_pairs = 40;  // 16..40 pairs: prompts of ~100-250 tokens
    int reverse_min = 3, reverse_max = 8;      // lists of single digits
};

const std::vector<std::string>& all_families();
bool is_scored(const std::string& family);

class TaskGenerator {
public:
    // `prose_text` may be empty when the prose family is not used.
    TaskGenerator(uint64_t seed, Split split, Difficulty difficulty = {},
                  std::vector<std::string> prose_verses = {});
    // Throws std::invalid_argument for an unknown family.
    TaskItem next(const std::string& family);

private:
    TaskItem arith();
    TaskItem kv();
    TaskItem reverse();
    TaskItem prose();
    bool in_split(const std::string& content) const;

    std::mt19937_64 m_rng;
    Split m_split;
    Difficulty m_difficulty;
    std::vector<std::string> m_verses;
};

// The benchmarks' prompts: the first n of `family` from the eval split at seed 7, kv prompts
// with 16-28 pairs (~110-190 tokens; the benchmark asks for prompts of about 64-200
// tokens). One definition for `cachelens-cli bench` and cachelens-bench-steps, so that their
// figures are on the same prompts. Throws std::invalid_argument for an unknown family.
std::vector<std::string> benchmark_prompts(int n, const std::string& family);

// The task item a prompt is, when it is written as one of the scored families writes its prompts
// ("What is 047 + 385?", "Reverse the list: 1 7 9", "Remember: king=417, sea=338. What is sea?"),
// with the answer computed from the prompt; nullopt for any other text. Lets the app show whether
// a typed or example prompt was answered correctly.
std::optional<TaskItem> recognise_task_prompt(const std::string& prompt);

// Extracts the text after the last "Answer:" (trimmed, up to a newline); "" when absent.
std::string extract_answer(const std::string& generated);
bool exact_match(const TaskItem& item, const std::string& generated);

// Loads the King James Bible verses through Debian's `bible` program (package bible-kjv).
// Throws cl::InputError with an install hint when it is not available.
std::vector<std::string> load_kjv_verses();

}  // namespace cl::tasks
