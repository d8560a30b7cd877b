#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "engine/base/errors.h"
#include "engine/generation/generator.h"
#include "engine/generation/memory_estimate.h"
#include "engine/model/model.h"
#include "engine/model/safetensors.h"
#include "test_util.h"

namespace cl {
namespace {

std::string load_error(const std::filesystem::path& dir) {
    try {
        Model::load(dir);
    } catch (const InputError& e) {
        return e.what();
    }
    return "";
}

TEST(ModelLoad, InitModelFolderLoads) {
    auto dir = test::make_tiny_model("m", 32, 2, 4, 4);
    auto m = Model::load(dir);
    EXPECT_EQ(m->config().n_layers, 2);
    EXPECT_EQ(m->tensors().size(), 2u * 9 + 3);
    EXPECT_EQ(m->parameter_count(), m->config().parameter_count());
    EXPECT_EQ(m->content_hash().size(), 16u);
    EXPECT_EQ(m->device(), "cpu");
    EXPECT_GE(m->eot_id(), 0);
}

TEST(ModelLoad, ShardedBf16CheckpointLikeLlada8b) {
    // Same layout as LLaDA-8B-Instruct: sharded safetensors + index, bf16, LLaDA tensor names.
    auto dir = test::make_tiny_model("m", 32, 3, 4, 4, 11, StorageDType::BF16, 4);
    EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors"));
    ASSERT_TRUE(std::filesystem::exists(dir / "model.safetensors.index.json"));
    auto index = nlohmann::json::parse(test::read_file(dir / "model.safetensors.index.json"));
    EXPECT_EQ(index["weight_map"].size(), 3u * 9 + 3);
    EXPECT_TRUE(index["weight_map"].contains("model.transformer.blocks.2.ff_proj.weight"));
    auto m = Model::load(dir);
    EXPECT_EQ(m->tensors().front().stored_dtype, "BF16");
    auto f32 = test::make_tiny_model("f", 32, 3, 4, 4, 11, StorageDType::F32, 1);
    EXPECT_NE(Model::load(f32)->content_hash(), m->content_hash());
}

// The app loads big folders on a worker thread with a progress bar and Cancel.
TEST(ModelLoad, ReportsProgressPerTensorAndStopsWhenAsked) {
    const auto dir = test::make_tiny_model("progress", 32, 2, 4, 4, 3);
    std::vector<std::pair<size_t, size_t>> calls;
    LoadOptions o;
    o.progress = [&](size_t done, size_t total) {
        calls.push_back({done, total});
        return true;
    };
    ASSERT_NE(Model::load(dir, o), nullptr);
    ASSERT_GT(calls.size(), 4u);
    EXPECT_EQ(calls.back().first, calls.back().second) << "the last call says all are done";
    for (size_t k = 1; k < calls.size(); ++k) EXPECT_EQ(calls[k].first, calls[k - 1].first + 1);
    size_t seen = 0;
    o.progress = [&](size_t done, size_t) { return (seen = done) < 3; };
    EXPECT_THROW(Model::load(dir, o), LoadCancelled);
    EXPECT_EQ(seen, 3u) << "stopped at the tensor that said stop";
}

TEST(ModelLoad, WrongShapeNamesFileAndTensor) {
    auto dir = test::make_tiny_model("m", 32, 2, 4, 4);
    auto cfg = nlohmann::json::parse(test::read_file(dir / "config.json"));
    cfg["mlp_hidden_size"] = 96;  // weights have 64
    test::write_file(dir / "config.json", cfg.dump());
    const auto msg = load_error(dir);
    EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("model.transformer.blocks.0.ff_"), std::string::npos) << msg;
    EXPECT_NE(msg.find("shape"), std::string::npos) << msg;
}

TEST(ModelLoad, MissingPiecesGiveClearErrors) {
    auto dir = test::make_tiny_model("m", 32, 2, 4, 4);
    std::filesystem::remove(dir / "tokenizer.json");
    EXPECT_NE(load_error(dir).find("tokenizer.json not found"), std::string::npos);
    auto dir2 = test::make_tiny_model("n", 32, 2, 4, 4);
    std::filesystem::remove(dir2 / "model.safetensors");
    EXPECT_NE(load_error(dir2).find("no model.safetensors"), std::string::npos);
    EXPECT_NE(load_error(dir2 / "nope").find("model folder not found"), std::string::npos);
}

TEST(ModelLoad, CorruptWeightsAndConfig) {
    auto dir = test::make_tiny_model("m", 32, 2, 4, 4);
    auto bytes = test::read_file(dir / "model.safetensors");
    test::write_file(dir / "model.safetensors", bytes.substr(0, bytes.size() / 2));  // truncated
    EXPECT_NE(load_error(dir).find("outside the data section"), std::string::npos)
        << load_error(dir);
    test::write_file(dir / "config.json", "{\"d_model\": 32,");
    EXPECT_NE(load_error(dir).find("config.json: invalid JSON"), std::string::npos)
        << load_error(dir);
    test::write_file(
        dir / "config.json",
        R"({"d_model": 30, "n_heads": 4, "n_layers": 1, "mlp_hidden_size": 8, "vocab_size": 300, "mask_token_id": 1})");
    EXPECT_NE(load_error(dir).find("not divisible"), std::string::npos);
    test::write_file(
        dir / "config.json",
        R"({"d_model": 32, "n_heads": 4, "n_layers": 1, "mlp_hidden_size": 8, "vocab_size": 300})");
    EXPECT_NE(load_error(dir).find("mask_token_id"), std::string::npos);
    test::write_file(
        dir / "config.json",
        R"({"d_model": 32, "n_heads": 4, "n_layers": 1, "mlp_hidden_size": 8, "vocab_size": 300, "mask_token_id": 1, "d_model": "big"})");
    EXPECT_NE(load_error(dir).find("wrong type"), std::string::npos);
}

// Structured mutation of config.json and generation_config.json (the JSON readers are
// torch-linked, so libFuzzer cannot build them; tests/fuzz/CMakeLists.txt): every field replaced
// by values of every type and by extremes, or removed. Each folder either loads or fails with an
// InputError naming the file; nothing else escapes, nothing allocates absurd sizes (the ASan build
// runs this too). Counts printed: how many of each.
TEST(ModelLoad, EveryConfigFieldMutatedLoadsOrNamesTheFile) {
    const auto dir = test::make_tiny_model("mutate", 16, 1, 2, 2);
    const auto read = [](const std::filesystem::path& f) {
        return nlohmann::json::parse(std::ifstream(f));
    };
    const std::vector<nlohmann::json> values = {nullptr,
                                                -1,
                                                0,
                                                1,
                                                3,
                                                7,
                                                1ll << 40,
                                                -(1ll << 40),
                                                1e308,
                                                -1e-308,
                                                0.5,
                                                "",
                                                "llada",
                                                "caf\xc3\xa9",
                                                true,
                                                false,
                                                nlohmann::json::array(),
                                                nlohmann::json::array({1, 2}),
                                                nlohmann::json::object(),
                                                nlohmann::json::object({{"type", "linear"}})};
    int loaded = 0, refused = 0;
    for (const char* file : {"config.json", "generation_config.json"}) {
        const auto path = dir / file;
        if (!std::filesystem::exists(path)) continue;
        const nlohmann::json original = read(path);
        for (const auto& [key, unused] : original.items()) {
            for (size_t v = 0; v <= values.size(); ++v) {
                nlohmann::json j = original;
                if (v == values.size())
                    j.erase(key);
                else
                    j[key] = values[v];
                std::ofstream(path) << j.dump();
                std::shared_ptr<Model> model;
                try {
                    model = Model::load(dir);
                    ++loaded;
                } catch (const InputError& e) {
                    ++refused;
                    EXPECT_NE(std::string(e.what()).find(file), std::string::npos)
                        << key << " = " << (v < values.size() ? values[v].dump() : "(removed)")
                        << ": " << e.what();
                } catch (const std::exception& e) {
                    ADD_FAILURE() << file << ": " << key << " = "
                                  << (v < values.size() ? values[v].dump() : "(removed)")
                                  << ": not an InputError: " << e.what();
                }
                if (!model) continue;
                // What loads must also generate, or refuse the request with an InputError (a
                // prompt longer than max_sequence_length, say).
                GenerationRequest r;
                r.prompt_text = "hi";
                r.config.gen_length = 4;
                r.config.block_length = 4;
                r.config.steps = 2;
                r.policy = "none";
                try {
                    Generator(model, r).run();
                } catch (const InputError&) {
                } catch (const std::exception& e) {
                    ADD_FAILURE() << file << ": " << key << ": generating: " << e.what();
                }
            }
        }
        std::ofstream(path) << original.dump(2);
    }
    std::printf("config mutations: %d loaded, %d refused with the file named\n", loaded, refused);
    EXPECT_GT(refused, 100);
    EXPECT_NO_THROW(Model::load(dir));
}

// A run that cannot fit is refused before it allocates, with the figures: G = 65536 (the most
// gen_length allows) needs 16 GiB of attention scores per head and layer, over 1 TiB with this
// model's 64 heads (the OOM killer, before; 2 heads fitted the GPU machine's 128 GiB). An
// ordinary run is estimated well under a gigabyte.
TEST(ModelLoad, ARunThatCannotFitInMemoryIsRefusedWithTheFigures) {
    const auto dir = test::make_tiny_model("huge-run", 128, 1, 64, 64);
    auto config = nlohmann::json::parse(std::ifstream(dir / "config.json"));
    config["max_sequence_length"] = 1 << 22;
    std::ofstream(dir / "config.json") << config.dump();
    const auto model = Model::load(dir);
    GenerationRequest r;
    r.prompt_text = "hi";
    r.config.gen_length = 1 << 16;
    r.config.block_length = 1 << 16;
    r.config.steps = 4;
    r.policy = "none";
    try {
        Generator g(model, r);
        FAIL() << "a run of 65536 tokens was accepted";
    } catch (const InputError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("gen_length"), std::string::npos) << m;
        EXPECT_NE(m.find("would need about"), std::string::npos) << m;
        EXPECT_NE(m.find("is available"), std::string::npos) << m;
        EXPECT_NE(m.find("--attention-budget"), std::string::npos) << m;
    }
    const auto ordinary =
        estimate_run_memory(model->config(), 300, 256, trace::kDefaultAttentionBudgetBytes, true);
    EXPECT_LT(ordinary.total(), 1e9) << ordinary.describe();
    EXPECT_GT(ordinary.trace_bytes, ordinary.cache_bytes) << "every layer's map at every step";
    // On a GPU the forward and caches are held against the device's free memory, named.
    try {
        check_memory_fits(ordinary, ordinary.total(), "cuda:1");
        FAIL() << "a run over 90% of the free memory was accepted";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("is free on cuda:1"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(check_memory_fits(ordinary, 2 * ordinary.total(), "cuda:1"));
}

TEST(ModelLoad, IntegerWeightsAreRejected) {
    auto dir = test::make_tiny_model("m", 32, 1, 4, 4);
    auto st = SafetensorsFile::open(dir / "model.safetensors");
    std::vector<TensorToWrite> out;
    std::vector<std::vector<int32_t>> keep;
    for (const auto& t : st->tensors()) {
        if (t.name == "model.transformer.ln_f.weight") {
            keep.emplace_back(static_cast<size_t>(t.numel()), 1);
            out.push_back(
                {t.name, DType::I32, t.shape, keep.back().data(), keep.back().size() * 4});
        } else {
            out.push_back({t.name, t.dtype, t.shape, st->data(t), t.nbytes});
        }
    }
    write_safetensors(dir / "model2.safetensors", out);
    st.reset();
    std::filesystem::rename(dir / "model2.safetensors", dir / "model.safetensors");
    EXPECT_NE(load_error(dir).find("dtype I32"), std::string::npos) << load_error(dir);
}

TEST(ModelLoad, CudaIsRefusedWithAReasonWhenUnavailable) {
    if (cuda_unavailable_reason().empty()) GTEST_SKIP() << "a CUDA device is present";
    auto dir = test::make_tiny_model("m", 32, 1, 4, 4);
    LoadOptions o;
    o.device = "cuda";
    try {
        Model::load(dir, o);
        FAIL();
    } catch (const InputError& e) {
        EXPECT_EQ(e.setting(), "device");  // engine terms; the CLI words it as --device
        EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos);
    }
    o.device = "tpu";
    EXPECT_THROW(Model::load(dir, o), InputError);
}

}  // namespace
}  // namespace cl
