// All Qt -> Dear ImGui input translation (the 1.86 io.KeysDown / io.MouseDown API) lives in this
// one file, so an ImGui upgrade (1.87 replaced the API) touches nothing else.
#pragma once

class QEvent;

namespace cl::app {

class ImGuiQtInput {
public:
    void install_key_map();
    // Returns true when the event was consumed for ImGui.
    bool handle(QEvent* event);
    // Called at frame start: applies the click latch (a press and release between two frames
    // still registers as a click: verified necessary with QTest::mouseClick).
    void new_frame();

private:
    bool m_pressed[3] = {false, false, false};
    bool m_just_pressed[3] = {false, false, false};
};

}  // namespace cl::app
