#include "viz/lesson.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/base/json_int.h"
#include "viz/panels/panels.h"

namespace cl::viz {

Lesson load_lesson(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path + ": cannot open lesson");
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
        throw std::runtime_error(path + ": invalid JSON: " + e.what());
    }
    const std::set<std::string> known(panel_names().begin(), panel_names().end());
    Lesson l;
    l.path = path;
    try {
        l.title = j.at("title").get<std::string>();
        const auto session = j.at("session").get<std::string>();
        l.session = (std::filesystem::path(path).parent_path() / session).string();
        for (const auto& s : j.at("steps")) {
            LessonStep st;
            st.title = s.at("title").get<std::string>();
            st.text = s.at("text").get<std::string>();
            st.step = json_int_or<int32_t>(s, "step", -1);
            st.layer = json_int_or<int32_t>(s, "layer", -1);
            st.oracle = s.value("oracle", false);
            for (const auto& p : s.value("panels", nlohmann::json::array())) {
                const auto name = p.get<std::string>();
                if (!known.count(name)) throw std::runtime_error("unknown panel '" + name + "'");
                st.panels.insert(name);
            }
            for (const auto& c : s.value("checks", nlohmann::json::array())) {
                LessonCheck check{c.at("kind").get<std::string>(), json_int<int>(c.at("column")),
                                  json_int_or<int>(c, "other", 0)};
                const auto& kinds = lesson_check_kinds();
                if (std::find(kinds.begin(), kinds.end(), check.kind) == kinds.end())
                    throw std::runtime_error("unknown check '" + check.kind + "'");
                if (check.column < 1) throw std::runtime_error("check columns count from 1");
                st.checks.push_back(check);
            }
            for (const auto& a : s.value("annotations", nlohmann::json::array()))
                st.annotations.push_back(
                    {json_int_or<int32_t>(a, "step", -1), json_int_or<int32_t>(a, "position", -1),
                     json_int_or<int32_t>(a, "layer", -1), a.value("text", "")});
            l.steps.push_back(std::move(st));
        }
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(path + ": malformed lesson: " + e.what());
    } catch (const std::runtime_error& e) {
        throw std::runtime_error(path + ": " + e.what());
    }
    if (l.steps.empty()) throw std::runtime_error(path + ": a lesson needs at least one step");
    return l;
}

}  // namespace cl::viz
