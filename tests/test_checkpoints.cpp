// The real checkpoints' folders at full size (LLaDA-8B, Dream-7B: published config.json, the
// architecture's tensor names and shapes, bf16, four shards with an index; the weights are holes
// in sparse files): checked without reading a weight, described by inspect-model, and each way a
// downloaded folder goes wrong refused naming the file.
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "cli_util.h"
#include "engine/base/errors.h"
#include "engine/base/process_memory.h"
#include "engine/model/checkpoint_presets.h"
#include "engine/model/model.h"
#include "engine/model/model_folder.h"
#include "engine/model/safetensors.h"
#include "engine/model/weights_io.h"
#include "engine/tokenizer/tokenizer.h"
#include "test_util.h"

namespace cl {
namespace {

struct Published {
    const char* preset;
    const char* architecture;
    size_t tensors;
    int64_t parameters;
    std::string config() const { return find_checkpoint_preset(preset).config_json; }
};

// Every preset, with the tensor count and parameter count of the published checkpoint.
const std::vector<Published>& published() {
    static const std::vector<Published> p = {
        {"llada-8b-base", "llada", 32 * 9 + 3, 8'015'581'184},
        {"dream-7b-instruct", "dream", 28 * 12 + 3, 7'615'616'512},
        {"llada-8b-instruct", "llada", 32 * 9 + 3, 8'015'581'184},
        {"llada-1.5", "llada", 32 * 9 + 3, 8'015'581'184},
        {"dream-7b-base", "dream", 28 * 12 + 3, 7'615'616'512},
    };
    return p;
}

std::filesystem::path full_size_folder(const Published& p) {
    const auto dir = test::temp_dir(p.preset);
    write_preset_folder(dir, find_checkpoint_preset(p.preset), {});
    return dir;
}

std::string error_of(const std::filesystem::path& dir) {
    try {
        check_model_folder(dir);
    } catch (const InputError& e) {
        return e.what();
    }
    return "";
}

TEST(Checkpoints, FullSizeFoldersAreCheckedWithoutReadingTheirWeights) {
    for (const auto& p : published()) {
        SCOPED_TRACE(p.preset);
        const auto dir = full_size_folder(p);
        EXPECT_EQ(test::read_file(dir / "config.json"), p.config()) << "not as published";
        const double before = resident_bytes();
        const auto folder = check_model_folder(dir);
        EXPECT_LT(resident_bytes() - before, 64e6) << "weights were read";
        EXPECT_EQ(folder.tensors.size(), p.tensors);
        EXPECT_EQ(folder.config.parameter_count(), p.parameters);
        EXPECT_EQ(folder.stored_bytes, 2 * p.parameters);  // bf16
        EXPECT_EQ(folder.weight_files.size(), 4u);
        ASSERT_FALSE(folder.notes.empty());
        EXPECT_NE(folder.notes[0].find("auto_map"), std::string::npos) << folder.notes[0];
    }
}

TEST(Checkpoints, InspectModelDescribesAFullSizeFolderAndItsMemory) {
    for (const auto& p : published()) {
        SCOPED_TRACE(p.preset);
        const auto dir = full_size_folder(p);
        auto r = test::cli("inspect-model --model " + dir.string());
        ASSERT_EQ(r.code, 0) << r.out;
        EXPECT_NE(r.out.find(std::string("architecture    ") + p.architecture + ": "),
                  std::string::npos)
            << r.out;
        char params[64];
        std::snprintf(params, sizeof params, "parameters      %lld", (long long)p.parameters);
        EXPECT_NE(r.out.find(params), std::string::npos) << r.out;
        char cpu[64];
        std::snprintf(cpu, sizeof cpu, "cpu: %.2f GB (float32)", 4.0 * p.parameters / 1e9);
        EXPECT_NE(r.out.find(cpu), std::string::npos) << r.out;
        r = test::cli("inspect-model --json --model " + dir.string());
        ASSERT_EQ(r.code, 0) << r.out;
        const auto j = nlohmann::json::parse(r.out);
        EXPECT_EQ(j["parameters"].get<int64_t>(), p.parameters);
        EXPECT_EQ(j["tensors"].size(), p.tensors);
    }
}

// A checkpoint bigger than the memory left is refused with the figures before a weight is read
// (it was killed by the OOM killer). Only where the full-size model does not fit, so that a
// machine with more memory does not read 30 GB of holes.
TEST(Checkpoints, AModelTooBigForTheMemoryIsRefusedBeforeItLoads) {
    const auto& dream = published()[1];
    const double need = 4.0 * static_cast<double>(dream.parameters);
    if (need <= 0.9 * available_memory_bytes())
        GTEST_SKIP() << "this machine has room for the 30 GB model; nothing to refuse";
    const auto dir = full_size_folder(dream);
    const double before = resident_bytes();
    try {
        Model::load(dir);
        FAIL() << "loaded";
    } catch (const InputError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(dir.string()), std::string::npos) << msg;
        EXPECT_NE(msg.find("the weights need 30.46 GB in memory (float32)"), std::string::npos)
            << msg;
    }
    EXPECT_LT(resident_bytes() - before, 64e6);
    const auto r = test::cli("inspect-model --model " + dir.string());
    EXPECT_NE(r.out.find("does not fit here"), std::string::npos) << r.out;
}

TEST(Checkpoints, BrokenFoldersAreRefusedNamingTheFile) {
    const auto& dream = published()[1];
    {  // a shard the index lists is missing
        const auto dir = full_size_folder(dream);
        std::filesystem::remove(dir / "model-00003-of-00004.safetensors");
        const auto e = error_of(dir);
        EXPECT_NE(e.find("model-00003-of-00004.safetensors"), std::string::npos) << e;
        EXPECT_NE(e.find("missing"), std::string::npos) << e;
    }
    {  // the index names the wrong shard for a tensor
        const auto dir = full_size_folder(dream);
        auto index = nlohmann::json::parse(test::read_file(dir / "model.safetensors.index.json"));
        index["weight_map"]["model.embed_tokens.weight"] = "model-00002-of-00004.safetensors";
        test::write_file(dir / "model.safetensors.index.json", index.dump());
        const auto e = error_of(dir);
        EXPECT_NE(e.find("model.safetensors.index.json"), std::string::npos) << e;
        EXPECT_NE(e.find("model.embed_tokens.weight"), std::string::npos) << e;
    }
    {  // a dtype the loader cannot convert
        const auto dir = full_size_folder(dream);
        detail::write_sparse_weights(dir, load_model_config(dir), "I8", 4);
        const auto e = error_of(dir);
        EXPECT_NE(e.find("model-00001-of-00004.safetensors"), std::string::npos) << e;
        EXPECT_NE(e.find("dtype I8"), std::string::npos) << e;
    }
    {  // config.json that does not match the weights
        const auto dir = full_size_folder(dream);
        auto config = nlohmann::json::parse(dream.config());
        config["num_key_value_heads"] = 5;  // 28 query heads cannot share 5
        test::write_file(dir / "config.json", config.dump());
        const auto e = error_of(dir);
        EXPECT_NE(e.find("config.json"), std::string::npos) << e;
        EXPECT_NE(e.find("not divisible"), std::string::npos) << e;
        config["num_key_value_heads"] = 14;
        test::write_file(dir / "config.json", config.dump());
        const auto shapes = error_of(dir);
        EXPECT_NE(shapes.find("model-00001-of-00004.safetensors"), std::string::npos) << shapes;
        // k_proj's bias or weight, whichever the shard lists first: [512] or [512, 3584].
        EXPECT_NE(shapes.find("self_attn.k_proj."), std::string::npos) << shapes;
        EXPECT_NE(shapes.find("' has shape [512"), std::string::npos) << shapes;
        EXPECT_NE(shapes.find("but config.json implies [1792"), std::string::npos) << shapes;
    }
}

std::set<std::string> keys_of(const std::filesystem::path& file) {
    const auto j = nlohmann::json::parse(test::read_file(file));
    std::set<std::string> keys;
    for (auto it = j.begin(); it != j.end(); ++it) keys.insert(it.key());
    return keys;
}

// The tensor names with the layer index written as N ("model.layers.N.mlp.up_proj.weight").
std::set<std::string> tensor_kinds(const ModelFolder& f) {
    static const std::regex layer_index(R"(\.[0-9]+\.)");
    std::set<std::string> kinds;
    for (const auto& t : f.tensors) kinds.insert(std::regex_replace(t.name, layer_index, ".N."));
    return kinds;
}

// The shrunk variant keeps what a loader keys on (config.json's keys, the tensor names, the
// special tokens at their ids, the vocabulary) and generates.
TEST(Checkpoints, ShrunkPresetsKeepTheLayoutAndGenerate) {
    for (const auto& p : published()) {
        SCOPED_TRACE(p.preset);
        const auto& preset = find_checkpoint_preset(p.preset);
        const auto full = full_size_folder(p);
        const auto small = test::temp_dir(std::string(p.preset) + "-shrunk");
        auto r = test::cli("init-model --preset " + std::string(p.preset) + " --shrink --out " +
                           small.string());
        ASSERT_EQ(r.code, 0) << r.out;
        const auto big = check_model_folder(full), little = check_model_folder(small);
        EXPECT_EQ(keys_of(small / "config.json"), keys_of(full / "config.json"));
        EXPECT_EQ(tensor_kinds(little), tensor_kinds(big));
        EXPECT_EQ(little.tensors.size(), big.tensors.size() / big.config.n_layers * 2 +
                                             big.tensors.size() % big.config.n_layers)
            << "two layers of the same tensors, and the same tensors outside the layers";
        EXPECT_EQ(little.config.architecture, p.architecture);
        EXPECT_EQ(little.config.vocab_size, big.config.vocab_size);
        EXPECT_EQ(little.config.mask_token_id, big.config.mask_token_id);
        EXPECT_EQ(little.config.n_kv_heads < little.config.n_heads,
                  big.config.n_kv_heads < big.config.n_heads)
            << "grouped-query attention kept";
        EXPECT_LT(little.config.parameter_count(), 20'000'000);
        const auto tok = Tokenizer::load(small / "tokenizer.json");
        for (const auto& [content, id] : preset.special_tokens)
            EXPECT_EQ(tok->token_to_id(content), id) << content;
        r = test::cli("generate --model " + small.string() +
                      " --prompt \"Hello\" --gen-length 8 --block-length 8 --steps 4 --view quiet");
        EXPECT_EQ(r.code, 0) << r.out;
    }
}

// The full-size layout with random weights (init-model --preset P --random, for speed work on the
// real shapes) written here at a small config: the data is there (not holes), norms are 1, every
// matrix is bounded by sqrt(3 / fan_in) and not constant, the folder loads, and it generates.
TEST(Checkpoints, RandomFullSizeWeightsAreWrittenStreamedAndLoad) {
    const auto dir = test::make_tiny_model("random-layout", 64, 2, 4, 4, 5);
    for (const auto& f : std::filesystem::directory_iterator(dir))
        if (f.path().extension() == ".safetensors") std::filesystem::remove(f.path());
    std::filesystem::remove(dir / "model.safetensors.index.json");
    const auto config = load_model_config(dir);
    detail::write_sparse_weights(dir, config, "BF16", 2, /*random=*/true, /*seed=*/3);
    int matrices = 0;
    for (const auto& f : std::filesystem::directory_iterator(dir)) {
        if (f.path().extension() != ".safetensors") continue;
        const auto st = SafetensorsFile::open(f.path());
        for (const auto& info : st->tensors()) {
            SCOPED_TRACE(info.name);
            auto t = torch::from_blob(const_cast<std::byte*>(st->data(info)), info.shape,
                                      torch::kBFloat16)
                         .to(torch::kFloat);
            if (t.dim() < 2) {
                EXPECT_TRUE(t.eq(1).all().item<bool>()) << "norm weights are 1";
                continue;
            }
            ++matrices;
            const double bound = std::sqrt(3.0 / static_cast<double>(t.size(-1)));
            EXPECT_LE(t.abs().max().item<double>(), bound * 1.01);
            EXPECT_GT(t.std().item<double>(), bound / 3);  // uniform: bound / sqrt(3)
        }
    }
    EXPECT_GT(matrices, 0);
    EXPECT_NO_THROW(Model::load(dir));
    const auto r = test::cli("generate --model " + dir.string() +
                             " --prompt hi --gen-length 8 --block-length 8 --steps 4 --view quiet");
    EXPECT_EQ(r.code, 0) << r.out;
}

// The presets' tokenizers have their checkpoints' pipelines: LLaDA's adds its BOS through the
// post-processor's template, Dream's (Qwen2's) normalises to NFC and splits digits one by one.
TEST(Checkpoints, PresetTokenizersFollowTheirCheckpointsPipelines) {
    const auto llada = Tokenizer::from_json_text(
        preset_tokenizer_json(find_checkpoint_preset("llada-8b-instruct")), "llada");
    const auto ids = llada->encode("hi 2025");
    auto with_bos = llada->encode("hi 2025", true);
    ASSERT_EQ(with_bos.size(), ids.size() + 1);
    EXPECT_EQ(with_bos.front(), 126080);
    EXPECT_EQ(llada->decode(ids), "hi 2025");
    const auto llada_pieces = llada->pre_tokenize("2025");
    EXPECT_EQ(llada_pieces.size(), 2u) << "Llama-3 splits numbers into runs of up to three digits";

    const auto dream = Tokenizer::from_json_text(
        preset_tokenizer_json(find_checkpoint_preset("dream-7b-instruct")), "dream");
    EXPECT_EQ(dream->encode("hi", true), dream->encode("hi")) << "Qwen2 adds no BOS";
    EXPECT_EQ(dream->pre_tokenize("2025").size(), 4u) << "Qwen2 splits digits one by one";
    EXPECT_EQ(dream->encode("e\u0301"), dream->encode("\u00e9")) << "NFC";
    EXPECT_EQ(dream->encode("<|im_start|>user"),
              (std::vector<int32_t>{151644, *dream->token_to_id("u"), *dream->token_to_id("s"),
                                    *dream->token_to_id("e"), *dream->token_to_id("r")}));
}

TEST(Checkpoints, UnknownPresetsAndMisusedOptionsAreRefused) {
    const auto dir = test::temp_dir("bad-preset");
    auto r = test::cli("init-model --preset llama-70b --out " + dir.string());
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.out.find("'llama-70b' is not a known checkpoint (known: llada-8b-base"),
              std::string::npos)
        << r.out;
    r = test::cli("init-model --shrink --out " + dir.string());
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.out.find("needs --preset"), std::string::npos) << r.out;
    r = test::cli("init-model --preset dream-7b-base --layers 3 --out " + dir.string());
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.out.find("excludes"), std::string::npos) << r.out;
    r = test::cli("init-model --random --out " + dir.string());
    EXPECT_NE(r.out.find("--random: needs --preset"), std::string::npos) << r.out;
    r = test::cli("init-model --preset llada-8b-base --random --shrink --out " + dir.string());
    EXPECT_NE(r.out.find("--random excludes --shrink"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace cl
