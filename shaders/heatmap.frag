#version 330 core
// Colour-maps a scalar field (R32F) into RGBA8: value -> [lo, hi] -> viridis or magma (5-stop
// piecewise-linear fits, the same stops as viz::colormap_color). NaN (rows not computed) -> grey.
uniform sampler2D field;
uniform float lo;
uniform float hi;
uniform int cmap;  // 0 viridis, 1 magma
in vec2 uv;
out vec4 color;

vec3 ramp(float t, vec3 c0, vec3 c1, vec3 c2, vec3 c3, vec3 c4) {
    t = clamp(t, 0.0, 1.0) * 4.0;
    if (t < 1.0) return mix(c0, c1, t);
    if (t < 2.0) return mix(c1, c2, t - 1.0);
    if (t < 3.0) return mix(c2, c3, t - 2.0);
    return mix(c3, c4, t - 3.0);
}

void main() {
    // Row 0 of the field lands in row 0 of the target texture, which ImGui draws at the top.
    float v = texture(field, uv).r;
    if (isnan(v) || isinf(v)) { color = vec4(0.5, 0.5, 0.5, 1.0); return; }
    float t = hi > lo ? (v - lo) / (hi - lo) : 0.0;
    if (cmap == 1)
        color = vec4(ramp(t, vec3(0.001, 0.000, 0.014), vec3(0.317, 0.071, 0.485), vec3(0.716, 0.215, 0.475),
                          vec3(0.987, 0.535, 0.382), vec3(0.987, 0.991, 0.750)), 1.0);
    else
        color = vec4(ramp(t, vec3(0.267, 0.005, 0.329), vec3(0.231, 0.322, 0.545), vec3(0.129, 0.569, 0.549),
                          vec3(0.369, 0.788, 0.384), vec3(0.993, 0.906, 0.144)), 1.0);
}
