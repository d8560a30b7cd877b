#include "viz/text_fit.h"

#include <cstdarg>
#include <cstdio>
#include <vector>

namespace cl::viz {

namespace {

constexpr const char* kEllipsis = "...";

bool is_continuation_byte(char c) {
    return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

float text_width(const std::string& text, size_t bytes) {
    return ImGui::CalcTextSize(text.data(), text.data() + bytes).x;
}

}  // namespace

std::string fit_to_width(const std::string& text, float width) {
    if (text_width(text, text.size()) <= width) return text;
    const float room = width - ImGui::CalcTextSize(kEllipsis).x;
    // Prefix lengths that end on a character boundary; the width grows with the length, so the
    // longest one that fits is found by bisection.
    std::vector<size_t> ends;
    for (size_t i = 1; i < text.size(); ++i)
        if (!is_continuation_byte(text[i])) ends.push_back(i);
    size_t lo = 0;  // a count of `ends` that fit
    size_t hi = ends.size();
    while (lo < hi) {
        const size_t mid = (lo + hi + 1) / 2;
        if (text_width(text, ends[mid - 1]) <= room)
            lo = mid;
        else
            hi = mid - 1;
    }
    return text.substr(0, lo ? ends[lo - 1] : 0) + kEllipsis;
}

void fitted_text(const std::string& text, bool dim) {
    const float width = ImGui::GetContentRegionAvail().x;
    const std::string shown = fit_to_width(text, width);
    if (dim) ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextUnformatted(shown.c_str());
    if (dim) ImGui::PopStyleColor();
    if (shown.size() != text.size() && ImGui::IsItemHovered()) {
        ImGui::BeginTooltip();
        ImGui::PushTextWrapPos(ImGui::GetFontSize() * 36);
        ImGui::TextUnformatted(text.c_str());
        ImGui::PopTextWrapPos();
        ImGui::EndTooltip();
    }
}

void fitted_textf(bool dim, const char* format, ...) {
    char buffer[1024];
    va_list args;
    va_start(args, format);
    std::vsnprintf(buffer, sizeof buffer, format, args);
    va_end(args);
    fitted_text(buffer, dim);
}

void wrap_before(float width) {
    // After SameLine() the cursor sits on the previous item's line; NewLine() undoes that.
    const bool line_start = ImGui::GetCursorPosX() <= ImGui::GetCursorStartPos().x + 1;
    if (!line_start && ImGui::GetContentRegionAvail().x < width) ImGui::NewLine();
}

}  // namespace cl::viz
