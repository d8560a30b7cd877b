#include <cstring>

#include "engine/base/errors.h"
#include "engine/model/safetensors.h"
#include "test_util.h"

namespace cl {
namespace {

std::string header_file(const std::string& json, size_t data_bytes, uint64_t claimed_len = 0) {
    std::string s;
    uint64_t len = claimed_len ? claimed_len : json.size();
    s.append(reinterpret_cast<const char*>(&len), 8);
    s += json;
    s.append(data_bytes, '\0');
    return s;
}

void expect_input_error(const std::filesystem::path& file, const std::string& fragment) {
    try {
        SafetensorsFile::open(file);
        FAIL() << "expected an InputError mentioning '" << fragment << "'";
    } catch (const InputError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(file.string()), std::string::npos) << msg;
        EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << "errors are one line";
    }
}

TEST(Safetensors, RoundTripAllFloatDtypes) {
    auto dir = test::temp_dir("st");
    std::vector<float> a{1.f, -2.5f, 3.25f, 0.f, 0.0009765625f, 65504.f};
    std::vector<uint16_t> h, b;
    for (float v : a) {
        h.push_back(float_to_half(v));
        b.push_back(float_to_bf16(v));
    }
    std::vector<int64_t> ints{1, -2, 3};
    write_safetensors(dir / "x.safetensors",
                      {{"a", DType::F32, {2, 3}, a.data(), a.size() * 4},
                       {"h", DType::F16, {6}, h.data(), h.size() * 2},
                       {"b", DType::BF16, {3, 2}, b.data(), b.size() * 2},
                       {"i", DType::I64, {3}, ints.data(), 24}},
                      {{"format", "pt"}});
    auto f = SafetensorsFile::open(dir / "x.safetensors");
    ASSERT_EQ(f->tensors().size(), 4u);
    EXPECT_EQ(f->metadata().at("format"), "pt");
    const auto* ta = f->find("a");
    ASSERT_NE(ta, nullptr);
    EXPECT_EQ(ta->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(std::memcmp(f->data(*ta), a.data(), 24), 0);
    const auto* th = f->find("h");
    for (size_t i = 0; i < a.size(); ++i) {
        uint16_t v;
        std::memcpy(&v, f->data(*th) + 2 * i, 2);
        EXPECT_FLOAT_EQ(half_to_float(v), a[i]) << i;  // all values are exactly representable
    }
    EXPECT_EQ(f->find("missing"), nullptr);
}

TEST(Safetensors, HalfAndBf16ConversionsRoundToNearestEven) {
    EXPECT_EQ(float_to_half(1.0f), 0x3c00);
    EXPECT_EQ(float_to_half(-2.0f), 0xc000);
    EXPECT_EQ(float_to_half(65520.f), 0x7c00);               // overflows to infinity
    EXPECT_FLOAT_EQ(half_to_float(0x0001), 5.9604645e-08f);  // smallest subnormal
    EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
    EXPECT_FLOAT_EQ(bf16_to_float(float_to_bf16(3.140625f)), 3.140625f);
    // 1 + 2^-8 is a tie between bf16 neighbours 1 and 1 + 2^-7: ties go to even (1.0).
    EXPECT_FLOAT_EQ(bf16_to_float(float_to_bf16(1.00390625f)), 1.0f);
    for (float v : {0.1f, -7.75f, 1234.5f, 0.001f})
        EXPECT_NEAR(half_to_float(float_to_half(v)), v, std::abs(v) * 1e-3);
}

TEST(Safetensors, RejectsTruncatedFile) {
    auto dir = test::temp_dir("st");
    test::write_file(dir / "t.safetensors", "abc");
    expect_input_error(dir / "t.safetensors", "truncated");
}

TEST(Safetensors, RejectsBadHeaderLength) {
    auto dir = test::temp_dir("st");
    test::write_file(dir / "t.safetensors", header_file("{}", 0, 1ull << 40));
    expect_input_error(dir / "t.safetensors", "bad header length");
}

TEST(Safetensors, RejectsBadJson) {
    auto dir = test::temp_dir("st");
    test::write_file(dir / "t.safetensors", header_file("{\"a\": [1, 2", 0));
    expect_input_error(dir / "t.safetensors", "not valid JSON");
}

TEST(Safetensors, RejectsOverlappingOffsets) {
    auto dir = test::temp_dir("st");
    const std::string j =
        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
    test::write_file(dir / "t.safetensors", header_file(j, 12));
    expect_input_error(dir / "t.safetensors", "overlap");
}

TEST(Safetensors, RejectsOutOfRangeOffsets) {
    auto dir = test::temp_dir("st");
    const std::string j = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
    test::write_file(dir / "t.safetensors", header_file(j, 8));
    expect_input_error(dir / "t.safetensors", "outside the data section");
}

TEST(Safetensors, RejectsShapeDtypeMismatch) {
    auto dir = test::temp_dir("st");
    const std::string j = R"({"a":{"dtype":"F16","shape":[3],"data_offsets":[0,8]}})";
    test::write_file(dir / "t.safetensors", header_file(j, 8));
    expect_input_error(dir / "t.safetensors", "does not match its shape and dtype");
}

TEST(Safetensors, RejectsUnknownDtypeAndNegativeDims) {
    auto dir = test::temp_dir("st");
    test::write_file(dir / "a.safetensors",
                     header_file(R"({"a":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}})", 1));
    expect_input_error(dir / "a.safetensors", "unknown dtype");
    test::write_file(dir / "b.safetensors",
                     header_file(R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", 1));
    expect_input_error(dir / "b.safetensors", "negative");
}

TEST(Safetensors, MissingFileNamesThePath) {
    auto dir = test::temp_dir("st");
    expect_input_error(dir / "nope.safetensors", "cannot open");
}

}  // namespace
}  // namespace cl
