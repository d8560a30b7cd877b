// ImGuiCanvas: a QOpenGLWidget hosting a Dear ImGui context (the Qt <-> ImGui bridge of
// code-anchors.md section 4): context per canvas created in the constructor (UI state survives GL
// context loss), backend re-initialised in initializeGL, HiDPI fonts rasterised at dpr, Tab kept
// for ImGui, shortcuts yielded when ImGui wants the keyboard, and GPU colour-mapped heatmaps.
#pragma once

#include <QElapsedTimer>
#include <QOpenGLExtraFunctions>
#include <QOpenGLWidget>
#include <functional>
#include <map>
#include <memory>

#include "app/desktop/imgui_qt_input.h"
#include "viz/viz_context.h"

struct ImGuiContext;
class QOpenGLShaderProgram;
class QOpenGLFramebufferObject;

namespace cl::app {

class ImGuiCanvas : public QOpenGLWidget,
                    protected QOpenGLExtraFunctions,
                    public viz::TextureProvider {
    Q_OBJECT
public:
    explicit ImGuiCanvas(QWidget* parent = nullptr);
    ~ImGuiCanvas() override;

    // Called inside every frame between NewFrame and Render.
    void set_draw(std::function<void()> draw) { m_draw = std::move(draw); }
    void set_dark(bool dark);
    // Text size relative to the default 15 px (workshop projectors: 1.5-2); layout follows it.
    void set_font_scale(double scale);
    double font_scale() const { return m_font_scale; }
    double last_frame_build_ms() const { return m_frame_ms; }

    ImTextureID scalar_texture(const std::string& key, int w, int h,
                               const std::vector<float>& values, float lo, float hi,
                               viz::Colormap cmap) override;
    ImTextureID rgba_texture(const std::string& key, int w, int h,
                             const std::vector<uint32_t>& rgba) override;
    ImTextureID cached(const std::string& key) override;

protected:
    void initializeGL() override;
    void paintGL() override;
    bool event(QEvent* e) override;
    bool focusNextPrevChild(bool) override { return false; }  // Tab belongs to ImGui

private:
    void release_gl();
    void rebuild_fonts();

    ImGuiContext* m_ctx = nullptr;
    ImGuiQtInput m_input;
    std::function<void()> m_draw;
    QElapsedTimer m_clock;
    qint64 m_last_ns = 0;
    bool m_backend_ready = false;
    bool m_fonts_dirty = true;
    bool m_dark = true;
    double m_dpr = 1.0;
    double m_font_scale = 1.0;
    double m_frame_ms = 0;
    int m_extra_frames = 0;
    std::unique_ptr<QOpenGLShaderProgram> m_colormap;
    GLuint m_vao = 0;
    struct Texture {
        GLuint id = 0;
        std::unique_ptr<QOpenGLFramebufferObject> fbo;  // owner for colour-mapped textures
        uint64_t last_used = 0;
    };
    std::map<std::string, Texture> m_textures;
    uint64_t m_frame = 0;
};

}  // namespace cl::app
