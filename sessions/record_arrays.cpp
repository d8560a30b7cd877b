// The per-step arrays of StepRecord (record_schema.h): one row of the table per array, each
// built from the record member it reads and writes and the element type it is stored as.
#include <cmath>
#include <limits>
#include <type_traits>

#include "sessions/record_schema.h"

namespace cl::sessions {

using trace::StepRecord;

namespace {

std::vector<int64_t> shape_of(Extent e, const StepRecord& r, size_t own_size) {
    switch (e) {
        case Extent::L:
            return {r.seq_len};
        case Extent::NxL:
            return {r.n_layers, r.seq_len};
        case Extent::LxK:
            return {r.seq_len, StepRecord::kTopK};
        case Extent::Own:
            break;
    }
    return {static_cast<int64_t>(own_size)};
}

template <typename T>
json element_json(T v) {
    if constexpr (std::is_floating_point_v<T>)
        return std::isfinite(v) ? json(v) : json(nullptr);
    else if constexpr (std::is_enum_v<T>)
        return json(static_cast<int>(v));
    else
        return json(v);
}

// Stored is the blob's element type; the record's element type may be an enum stored as its
// underlying integer, in which case values above `max_value` are rejected on the way in.
template <typename Stored, typename Elem>
Elem element_in(Stored v, int max_value) {
    if constexpr (std::is_enum_v<Elem>) {
        if (static_cast<int>(v) > max_value)
            throw SessionError("invalid value " + std::to_string(static_cast<int>(v)));
    }
    return static_cast<Elem>(v);
}

template <typename Stored, typename Access>
ArrayField array(std::string_view name, Extent extent, Presence presence, bool compress,
                 std::string_view meaning, Access access, int max_value = 0) {
    using Vec = std::decay_t<decltype(access(std::declval<StepRecord&>()))>;
    using Elem = typename Vec::value_type;
    static_assert(sizeof(Elem) == sizeof(Stored));
    ArrayField f{name, dtype_name<Stored>(), extent, presence, compress, meaning, {}, {}, {}, {},
                 {}};
    f.size = [access](const StepRecord& r) { return access(r).size(); };
    f.encode = [access, extent, compress](const StepRecord& r) {
        const auto& v = access(r);
        const auto shape = shape_of(extent, r, v.size());
        if constexpr (std::is_same_v<Elem, Stored>) {
            return encode_array(v, shape, compress);
        } else {
            std::vector<Stored> stored(v.size());
            for (size_t i = 0; i < v.size(); ++i) stored[i] = static_cast<Stored>(v[i]);
            return encode_array(stored, shape, compress);
        }
    };
    f.decode = [access, max_value](StepRecord& r, const std::string& dtype,
                                   const std::string& shape, const std::string& encoding,
                                   const uint8_t* data, size_t bytes) {
        auto stored = decode_array<Stored>(dtype, shape, encoding, data, bytes);
        auto& v = access(r);
        v.resize(stored.size());
        for (size_t i = 0; i < stored.size(); ++i)
            v[i] = element_in<Stored, Elem>(stored[i], max_value);
    };
    f.to_json = [access](const StepRecord& r) {
        json j = json::array();
        for (Elem e : access(r)) j.push_back(element_json(e));
        return j;
    };
    f.from_json = [access, max_value](StepRecord& r, const json& j) {
        auto& v = access(r);
        v.clear();
        for (const auto& e : j) {
            if constexpr (std::is_floating_point_v<Elem>)
                v.push_back(e.is_null() ? std::numeric_limits<Elem>::quiet_NaN() : e.get<Elem>());
            else
                v.push_back(element_in<Stored, Elem>(e.get<Stored>(), max_value));
        }
    };
    return f;
}

// `m` names a member, which cannot be parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define CL_MEMBER(m)       \
    [](auto& r) -> auto& { \
        return r.m;        \
    }
// NOLINTEND(bugprone-macro-parentheses)

}  // namespace

const std::vector<ArrayField>& step_arrays() {
    using E = Extent;
    using P = Presence;
    constexpr int kMaxState = static_cast<int>(trace::TokenState::DecodedEarlier);
    constexpr int kMaxAction = static_cast<int>(trace::RowAction::FeatureReused);
    static const std::vector<ArrayField> arrays{
        array<int32_t>("tokens", E::L, P::Always, true, "token ids after the step",
                       CL_MEMBER(tokens)),
        array<uint8_t>("states", E::L, P::Always, true,
                       "0 prompt, 1 masked, 2 decoded this step, 3 decoded earlier",
                       CL_MEMBER(states), kMaxState),
        array<int32_t>("predicted", E::L, P::Always, true,
                       "the step's candidate at rows it predicted, else -1", CL_MEMBER(predicted)),
        array<float>("confidence", E::L, P::Always, true, "its confidence (NaN where none)",
                     CL_MEMBER(confidence)),
        array<int32_t>("committed", E::Own, P::Always, false,
                       "positions committed this step, in commit order", CL_MEMBER(committed)),
        array<uint8_t>("actions", E::NxL, P::Always, true,
                       "per (layer, row): 0 skipped, 1 recomputed, 2 K/V reused, 3 probed only, "
                       "4 features reused",
                       CL_MEMBER(actions), kMaxAction),
        array<uint16_t>("cache_age", E::NxL, P::Always, true,
                        "steps since the row's K/V were last computed at that layer",
                        CL_MEMBER(cache_age)),
        array<float>("layer_ms", E::Own, P::Always, false, "wall time per layer (N)",
                     CL_MEMBER(layer_ms)),
        array<int32_t>("topk_ids", E::LxK, P::WithTopK, true,
                       "the 5 most likely tokens of each row predicted this step (-1 elsewhere)",
                       CL_MEMBER(topk_ids)),
        array<float>("topk_probs", E::LxK, P::WithTopK, true, "their probabilities (NaN elsewhere)",
                     CL_MEMBER(topk_probs)),
        array<float>("entropy", E::L, P::WithTopK, true,
                     "entropy (nats) of each predicted row (NaN elsewhere)", CL_MEMBER(entropy)),
        array<float>("margin", E::L, P::WithTopK, true, "p1 - p2 of each predicted row",
                     CL_MEMBER(margin)),
        array<float>("oracle_k_cos", E::NxL, P::WithOracle, true,
                     "oracle: cosine of reused vs fresh K (NaN where computed)",
                     CL_MEMBER(oracle.k_cos)),
        array<float>("oracle_v_cos", E::NxL, P::WithOracle, true, "oracle: the same for V",
                     CL_MEMBER(oracle.v_cos)),
        array<float>("oracle_k_rel_l2", E::NxL, P::WithOracle, true,
                     "oracle: |reused - fresh| / |fresh| of K", CL_MEMBER(oracle.k_rel_l2)),
        array<float>("oracle_v_rel_l2", E::NxL, P::WithOracle, true, "oracle: the same for V",
                     CL_MEMBER(oracle.v_rel_l2)),
        array<float>("drift_k_cos", E::NxL, P::WithDrift, true,
                     "drift: cosine of a computed row's new K against the K it had in use (NaN "
                     "where not computed)",
                     CL_MEMBER(drift.k_cos)),
        array<float>("drift_v_cos", E::NxL, P::WithDrift, true, "drift: the same for V",
                     CL_MEMBER(drift.v_cos)),
        array<float>("drift_k_rel_l2", E::NxL, P::WithDrift, true,
                     "drift: |new - in use| / |in use| of K", CL_MEMBER(drift.k_rel_l2)),
        array<float>("drift_v_rel_l2", E::NxL, P::WithDrift, true, "drift: the same for V",
                     CL_MEMBER(drift.v_rel_l2)),
    };
    return arrays;
}

#undef CL_MEMBER

const ArrayField* find_array(std::string_view name) {
    for (const auto& a : step_arrays())
        if (a.name == name) return &a;
    return nullptr;
}

bool array_expected(const ArrayField& field, const StepRecord& r) {
    switch (field.presence) {
        case Presence::Always:
            return true;
        case Presence::WithTopK:
            return !r.topk_ids.empty();
        case Presence::WithOracle:
            return r.has_oracle;
        case Presence::WithDrift:
            return r.has_drift;
    }
    return false;
}

void check_arrays(const StepRecord& r, const std::string& where) {
    const size_t L = static_cast<size_t>(r.seq_len), N = static_cast<size_t>(r.n_layers);
    for (const auto& a : step_arrays()) {
        if (!array_expected(a, r) || a.extent == Extent::Own) continue;
        const size_t want = a.extent == Extent::L     ? L
                            : a.extent == Extent::NxL ? N * L
                                                      : L * StepRecord::kTopK;
        const size_t got = a.size(r);
        if (got != want)
            throw SessionError(where + ": array '" + std::string(a.name) + "' has " +
                               std::to_string(got) + " values, expected " + std::to_string(want));
    }
    for (int32_t c : r.committed)
        if (c < 0 || static_cast<size_t>(c) >= L)
            throw SessionError(where + ": committed position " + std::to_string(c) +
                               " out of range");
}

}  // namespace cl::sessions
