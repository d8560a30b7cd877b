// Text that stays inside its column: a line too long for the width left is cut with "..." and
// shows the whole text in a tooltip; layout items that do not fit on the current line go to the
// next one. Columns are narrow at 1280x720 and ImGui clips silently otherwise.
#pragma once

#include <imgui.h>

#include <string>

namespace cl::viz {

// The longest prefix of `text` (whole UTF-8 characters) that, followed by "...", is at most
// `width` pixels wide in the current font; `text` itself when it fits.
std::string fit_to_width(const std::string& text, float width);

// `text` in the width left on the current line (dim: the disabled-text colour), cut to fit; the
// whole text in a tooltip when cut.
void fitted_text(const std::string& text, bool dim = false);
// printf-style; the formatted text is cut as above.
void fitted_textf(bool dim, const char* format, ...) IM_FMTARGS(2);

// Before an item `width` pixels wide that follows SameLine(): starts a new line when it would not
// fit in what is left of this one.
void wrap_before(float width);

}  // namespace cl::viz
