#include "app/desktop/imgui_qt_input.h"

#include <imgui.h>

#include <QKeyEvent>
#include <QMouseEvent>
#include <QWheelEvent>
#include <cfloat>

namespace cl::app {
namespace {

int imgui_key(int qt_key) {
    switch (qt_key) {
        case Qt::Key_Tab:
            return ImGuiKey_Tab;
        case Qt::Key_Left:
            return ImGuiKey_LeftArrow;
        case Qt::Key_Right:
            return ImGuiKey_RightArrow;
        case Qt::Key_Up:
            return ImGuiKey_UpArrow;
        case Qt::Key_Down:
            return ImGuiKey_DownArrow;
        case Qt::Key_PageUp:
            return ImGuiKey_PageUp;
        case Qt::Key_PageDown:
            return ImGuiKey_PageDown;
        case Qt::Key_Home:
            return ImGuiKey_Home;
        case Qt::Key_End:
            return ImGuiKey_End;
        case Qt::Key_Insert:
            return ImGuiKey_Insert;
        case Qt::Key_Delete:
            return ImGuiKey_Delete;
        case Qt::Key_Backspace:
            return ImGuiKey_Backspace;
        case Qt::Key_Space:
            return ImGuiKey_Space;
        case Qt::Key_Return:
            return ImGuiKey_Enter;
        case Qt::Key_Enter:
            return ImGuiKey_KeyPadEnter;
        case Qt::Key_Escape:
            return ImGuiKey_Escape;
        case Qt::Key_A:
            return ImGuiKey_A;
        case Qt::Key_C:
            return ImGuiKey_C;
        case Qt::Key_V:
            return ImGuiKey_V;
        case Qt::Key_X:
            return ImGuiKey_X;
        case Qt::Key_Y:
            return ImGuiKey_Y;
        case Qt::Key_Z:
            return ImGuiKey_Z;
        default:
            return -1;
    }
}

int button_index(Qt::MouseButton b) {
    switch (b) {
        case Qt::LeftButton:
            return 0;
        case Qt::RightButton:
            return 1;
        case Qt::MiddleButton:
            return 2;
        default:
            return -1;
    }
}

}  // namespace

void ImGuiQtInput::install_key_map() {
    ImGuiIO& io = ImGui::GetIO();
    for (int k = 0; k < ImGuiKey_COUNT; ++k)
        io.KeyMap[k] = k;  // our table maps straight to ImGuiKey
}

bool ImGuiQtInput::handle(QEvent* event) {
    ImGuiIO& io = ImGui::GetIO();
    switch (event->type()) {
        case QEvent::MouseMove: {
            const auto* e = static_cast<QMouseEvent*>(event);
            io.MousePos = ImVec2(static_cast<float>(e->position().x()),
                                 static_cast<float>(e->position().y()));
            return true;
        }
        case QEvent::MouseButtonPress:
        case QEvent::MouseButtonDblClick: {  // Qt sends DblClick instead of the second press
            const auto* e = static_cast<QMouseEvent*>(event);
            io.MousePos = ImVec2(static_cast<float>(e->position().x()),
                                 static_cast<float>(e->position().y()));
            const int b = button_index(e->button());
            if (b >= 0) m_pressed[b] = m_just_pressed[b] = true;
            return true;
        }
        case QEvent::MouseButtonRelease: {
            const auto* e = static_cast<QMouseEvent*>(event);
            const int b = button_index(e->button());
            if (b >= 0) m_pressed[b] = false;
            return true;
        }
        case QEvent::Wheel: {
            const auto* e = static_cast<QWheelEvent*>(event);
            if (!e->pixelDelta().isNull()) {
                io.MouseWheel +=
                    static_cast<float>(e->pixelDelta().y()) / (5.f * ImGui::GetTextLineHeight());
                io.MouseWheelH +=
                    static_cast<float>(e->pixelDelta().x()) / (5.f * ImGui::GetTextLineHeight());
            } else {
                io.MouseWheel += static_cast<float>(e->angleDelta().y()) / 120.f;
                io.MouseWheelH += static_cast<float>(e->angleDelta().x()) / 120.f;
            }
            return true;
        }
        case QEvent::Leave:
            io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
            return true;
        case QEvent::KeyPress:
        case QEvent::KeyRelease: {
            const auto* e = static_cast<QKeyEvent*>(event);
            const bool down = event->type() == QEvent::KeyPress;
            const int k = imgui_key(e->key());
            if (k >= 0) io.KeysDown[k] = down;
            io.KeyCtrl = e->modifiers() & Qt::ControlModifier;
            io.KeyShift = e->modifiers() & Qt::ShiftModifier;
            io.KeyAlt = e->modifiers() & Qt::AltModifier;
            io.KeySuper = e->modifiers() & Qt::MetaModifier;
            if (down && !e->text().isEmpty() && e->text().at(0).isPrint())
                io.AddInputCharactersUTF8(e->text().toUtf8().constData());
            return io.WantCaptureKeyboard;
        }
        case QEvent::FocusIn:
            io.AddFocusEvent(true);
            return false;
        case QEvent::FocusOut:
            io.AddFocusEvent(false);
            return false;
        default:
            return false;
    }
}

void ImGuiQtInput::new_frame() {
    ImGuiIO& io = ImGui::GetIO();
    for (int b = 0; b < 3; ++b) {
        io.MouseDown[b] = m_pressed[b] || m_just_pressed[b];
        m_just_pressed[b] = false;
    }
}

}  // namespace cl::app
