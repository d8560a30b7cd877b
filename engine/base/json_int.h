// Integers read from untrusted JSON. nlohmann's get<int>() converts a floating-point value with a
// plain cast: undefined behaviour when it does not fit (fuzz_lesson found "step": -8.9e67). This
// accepts integers, and floating-point values that are whole numbers, within T's range; anything
// else throws std::range_error saying what it got.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace cl {

template <typename T>
T json_int(const nlohmann::json& v) {
    static_assert(std::is_integral_v<T>);
    constexpr auto lo = static_cast<long double>(std::numeric_limits<T>::min());
    constexpr auto hi = static_cast<long double>(std::numeric_limits<T>::max());
    long double x = 0;
    if (v.is_number_unsigned())
        x = static_cast<long double>(v.get<uint64_t>());
    else if (v.is_number_integer())
        x = static_cast<long double>(v.get<int64_t>());
    else if (v.is_number_float())
        x = static_cast<long double>(v.get<double>());
    else
        throw std::range_error("expected an integer, got " + std::string(v.type_name()));
    if (!(x >= lo && x <= hi) || x != std::trunc(x))
        throw std::range_error(
            "expected an integer in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
            std::to_string(std::numeric_limits<T>::max()) + "], got " + v.dump());
    return static_cast<T>(x);
}

// An array of integers, each checked as json_int does; throws std::range_error for anything else.
template <typename T>
std::vector<T> json_ints(const nlohmann::json& v) {
    if (!v.is_array())
        throw std::range_error("expected an array of integers, got " + std::string(v.type_name()));
    std::vector<T> out;
    out.reserve(v.size());
    for (const auto& x : v) out.push_back(json_int<T>(x));
    return out;
}

// `key` of `object` as an integer, `fallback` when absent or null.
template <typename T>
T json_int_or(const nlohmann::json& object, const char* key, T fallback) {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) return fallback;
    return json_int<T>(*it);
}

}  // namespace cl
