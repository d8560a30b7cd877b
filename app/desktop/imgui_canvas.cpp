#include "app/desktop/imgui_canvas.h"

#include <algorithm>

#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <QEvent>
#include <QFile>
#include <QGuiApplication>
#include <QOpenGLContext>
#include <QOpenGLFramebufferObject>
#include <QOpenGLShaderProgram>
#include <QTimer>
#include <chrono>

// The shaders live in a Qt resource compiled into a static library: register it explicitly
// (Q_INIT_RESOURCE must be called from the global namespace).
static void init_shader_resources() {
    Q_INIT_RESOURCE(shaders);
}

namespace cl::app {

namespace {
const char* kFontPaths[] = {"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                            "/usr/share/fonts/TTF/DejaVuSans.ttf"};

QByteArray read_resource(const char* path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}
}  // namespace

ImGuiCanvas::ImGuiCanvas(QWidget* parent) : QOpenGLWidget(parent) {
    IMGUI_CHECKVERSION();
    init_shader_resources();
    m_ctx = ImGui::CreateContext();
    ImGui::SetCurrentContext(m_ctx);
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;  // view layout lives in QSettings, not in the working directory
    io.BackendFlags |= ImGuiBackendFlags_HasMouseCursors;
    m_input.install_key_map();
    set_dark(true);
    setMouseTracking(true);
    setFocusPolicy(Qt::StrongFocus);
    m_clock.start();
    // Chain repaints while anything animates; idle canvases repaint on input only.
    connect(this, &QOpenGLWidget::frameSwapped, this, [this] {
        if (m_extra_frames > 0) {
            --m_extra_frames;
            update();
        }
    });
}

ImGuiCanvas::~ImGuiCanvas() {
    makeCurrent();
    release_gl();
    doneCurrent();
    ImGui::DestroyContext(m_ctx);
}

void ImGuiCanvas::set_dark(bool dark) {
    m_dark = dark;
    ImGui::SetCurrentContext(m_ctx);
    if (dark)
        ImGui::StyleColorsDark();
    else
        ImGui::StyleColorsLight();
    ImGuiStyle& s = ImGui::GetStyle();
    s.WindowRounding = 0;
    s.ChildRounding = 3;
    s.FrameRounding = 2;
    update();
}

void ImGuiCanvas::set_font_scale(double scale) {
    const double clamped = std::clamp(scale, 0.6, 6.0);
    if (clamped == m_font_scale) return;
    m_font_scale = clamped;
    m_fonts_dirty = true;  // rebuilt at the next frame, with the GL context current
    update();
}

void ImGuiCanvas::rebuild_fonts() {
    ImGuiIO& io = ImGui::GetIO();
    io.Fonts->Clear();
    bool loaded = false;
    // Rasterise at the device pixel ratio and scale back: crisp text, layout in logical pixels.
    for (const char* p : kFontPaths)
        if (QFile::exists(p)) {
            // Latin, Greek, Cyrillic, punctuation, arrows, box drawing and block elements: what
            // token texts and the masked-token glyph need.
            static const ImWchar ranges[] = {0x0020, 0x024F, 0x0370, 0x03FF, 0x0400,
                                             0x04FF, 0x2000, 0x206F, 0x2190, 0x21FF,
                                             0x2200, 0x22FF, 0x2500, 0x259F, 0};
            loaded =
                io.Fonts->AddFontFromFileTTF(p, static_cast<float>(15.0 * m_font_scale * m_dpr),
                                             nullptr, ranges) != nullptr;
            if (loaded) break;
        }
    if (!loaded) {
        ImFontConfig cfg;
        cfg.SizePixels = static_cast<float>(13.0 * m_font_scale * m_dpr);
        io.Fonts->AddFontDefault(&cfg);
    }
    io.FontGlobalScale = static_cast<float>(1.0 / m_dpr);
    if (m_backend_ready) {
        ImGui_ImplOpenGL3_DestroyFontsTexture();
        ImGui_ImplOpenGL3_CreateFontsTexture();
    }
    m_fonts_dirty = false;
}

void ImGuiCanvas::initializeGL() {
    initializeOpenGLFunctions();
    ImGui::SetCurrentContext(m_ctx);
    m_backend_ready = ImGui_ImplOpenGL3_Init("#version 330 core");
    m_fonts_dirty = true;
    // The context can be destroyed (reparenting, screen change): free GL objects and re-init later.
    connect(context(), &QOpenGLContext::aboutToBeDestroyed, this, [this] {
        makeCurrent();
        release_gl();
        doneCurrent();
    });
    m_colormap = std::make_unique<QOpenGLShaderProgram>();
    m_colormap->addShaderFromSourceCode(QOpenGLShader::Vertex,
                                        read_resource(":/shaders/heatmap.vert"));
    m_colormap->addShaderFromSourceCode(QOpenGLShader::Fragment,
                                        read_resource(":/shaders/heatmap.frag"));
    if (!m_colormap->link())
        qWarning("heatmap shader failed to link: %s", qPrintable(m_colormap->log()));
    glGenVertexArrays(1, &m_vao);
}

void ImGuiCanvas::release_gl() {
    ImGui::SetCurrentContext(m_ctx);
    for (auto& [k, t] : m_textures)
        if (!t.fbo && t.id) glDeleteTextures(1, &t.id);
    m_textures.clear();
    m_colormap.reset();
    if (m_vao) glDeleteVertexArrays(1, &m_vao);
    m_vao = 0;
    if (m_backend_ready) ImGui_ImplOpenGL3_Shutdown();
    m_backend_ready = false;
}

void ImGuiCanvas::paintGL() {
    ImGui::SetCurrentContext(m_ctx);
    if (!m_backend_ready) return;
    const double dpr = devicePixelRatioF();
    if (dpr != m_dpr || m_fonts_dirty) {
        m_dpr = dpr;
        rebuild_fonts();
    }
    ImGuiIO& io = ImGui::GetIO();
    io.DisplaySize = ImVec2(static_cast<float>(width()), static_cast<float>(height()));
    io.DisplayFramebufferScale = ImVec2(static_cast<float>(dpr), static_cast<float>(dpr));
    const qint64 now = m_clock.nsecsElapsed();
    io.DeltaTime = std::max(1e-4f, static_cast<float>((now - m_last_ns) / 1e9));
    m_last_ns = now;
    m_input.new_frame();
    ++m_frame;

    const auto t0 = std::chrono::steady_clock::now();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(io.DisplaySize);
    ImGui::Begin("##canvas", nullptr,
                 ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                     ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoSavedSettings);
    if (m_draw) m_draw();
    ImGui::End();
    ImGui::Render();
    m_frame_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    // Our own passes (colour maps) may have bound other framebuffers: back to the widget's.
    glBindFramebuffer(GL_FRAMEBUFFER, defaultFramebufferObject());
    glViewport(0, 0, static_cast<GLsizei>(width() * dpr), static_cast<GLsizei>(height() * dpr));
    const ImVec4 bg = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
    glClearColor(bg.x, bg.y, bg.z, 1.f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());

    // Cursor shape from ImGui.
    switch (ImGui::GetMouseCursor()) {
        case ImGuiMouseCursor_TextInput:
            setCursor(Qt::IBeamCursor);
            break;
        case ImGuiMouseCursor_Hand:
            setCursor(Qt::PointingHandCursor);
            break;
        case ImGuiMouseCursor_ResizeEW:
            setCursor(Qt::SizeHorCursor);
            break;
        case ImGuiMouseCursor_ResizeNS:
            setCursor(Qt::SizeVerCursor);
            break;
        default:
            setCursor(Qt::ArrowCursor);
            break;
    }
    // Drop textures unused for a while (every step makes new ones).
    for (auto it = m_textures.begin(); it != m_textures.end();) {
        if (m_frame - it->second.last_used > 120) {
            if (!it->second.fbo && it->second.id) glDeleteTextures(1, &it->second.id);
            it = m_textures.erase(it);
        } else {
            ++it;
        }
    }
}

bool ImGuiCanvas::event(QEvent* e) {
    ImGui::SetCurrentContext(m_ctx);
    if (e->type() == QEvent::ShortcutOverride) {
        // Typing into an ImGui field must not trigger the window's shortcuts.
        if (ImGui::GetIO().WantTextInput) {
            e->accept();
            return true;
        }
        return QOpenGLWidget::event(e);
    }
    const bool used = m_input.handle(e);
    if (used || e->type() == QEvent::Leave) {
        m_extra_frames = 3;  // popups and hover states settle a few frames after the last event
        update();
    }
    if (used && (e->type() == QEvent::KeyPress || e->type() == QEvent::KeyRelease)) return true;
    return QOpenGLWidget::event(e);
}

ImTextureID ImGuiCanvas::cached(const std::string& key) {
    auto it = m_textures.find(key);
    if (it == m_textures.end()) return nullptr;
    it->second.last_used = m_frame;
    return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(it->second.id));
}

ImTextureID ImGuiCanvas::rgba_texture(const std::string& key, int w, int h,
                                      const std::vector<uint32_t>& rgba) {
    auto it = m_textures.find(key);
    if (it != m_textures.end()) {
        it->second.last_used = m_frame;
        return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(it->second.id));
    }
    if (w <= 0 || h <= 0 || rgba.size() != static_cast<size_t>(w) * static_cast<size_t>(h))
        return nullptr;
    Texture t;
    glGenTextures(1, &t.id);
    glBindTexture(GL_TEXTURE_2D, t.id);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, w, h, 0, GL_RGBA, GL_UNSIGNED_BYTE, rgba.data());
    t.last_used = m_frame;
    const GLuint id = t.id;
    m_textures[key] = std::move(t);
    return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(id));
}

ImTextureID ImGuiCanvas::scalar_texture(const std::string& key, int w, int h,
                                        const std::vector<float>& values, float lo, float hi,
                                        viz::Colormap cmap) {
    auto it = m_textures.find(key);
    if (it != m_textures.end()) {
        it->second.last_used = m_frame;
        return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(it->second.id));
    }
    if (!m_colormap || w <= 0 || h <= 0 ||
        values.size() != static_cast<size_t>(w) * static_cast<size_t>(h))
        return nullptr;
    // Upload the scalar field, then colour-map it into an RGBA texture with shaders/heatmap.frag.
    GLuint field = 0;
    glGenTextures(1, &field);
    glBindTexture(GL_TEXTURE_2D, field);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_R32F, w, h, 0, GL_RED, GL_FLOAT, values.data());
    Texture t;
    t.fbo = std::make_unique<QOpenGLFramebufferObject>(w, h, QOpenGLFramebufferObject::NoAttachment,
                                                       GL_TEXTURE_2D, GL_RGBA8);
    t.fbo->bind();
    glViewport(0, 0, w, h);
    glDisable(GL_BLEND);
    glDisable(GL_SCISSOR_TEST);
    m_colormap->bind();
    glActiveTexture(GL_TEXTURE0);
    glBindTexture(GL_TEXTURE_2D, field);
    m_colormap->setUniformValue("field", 0);
    m_colormap->setUniformValue("lo", lo);
    m_colormap->setUniformValue("hi", hi);
    m_colormap->setUniformValue("cmap", static_cast<int>(cmap));
    glBindVertexArray(m_vao);
    glDrawArrays(GL_TRIANGLE_STRIP, 0, 4);
    glBindVertexArray(0);
    m_colormap->release();
    t.fbo->release();
    glDeleteTextures(1, &field);
    t.id = t.fbo->texture();
    glBindTexture(GL_TEXTURE_2D, t.id);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glBindFramebuffer(GL_FRAMEBUFFER, defaultFramebufferObject());
    t.last_used = m_frame;
    const GLuint id = t.id;
    m_textures[key] = std::move(t);
    return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(id));
}

}  // namespace cl::app
