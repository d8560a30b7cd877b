// The real checkpoints' folders at full size (LLaDA-8B, Dream-7B: published config.json, the
// architecture's tensor names and shapes, bf16, four shards with an index; the weights are holes
// in sparse files): checked without reading a weight, described by inspect-model, and each way a
// downloaded folder goes wrong refused naming the file.
#include <nlohmann/json.hpp>

#include "checkpoint_layout.h"
#include "cli_util.h"
#include "engine/base/errors.h"
#include "engine/base/process_memory.h"
#include "engine/model/model.h"
#include "engine/model/model_folder.h"
#include "published_configs.h"
#include "test_util.h"

namespace cl {
namespace {

struct Published {
    const char* name;
    const char* architecture;
    const char* config;
    size_t tensors;
    int64_t parameters;
};

const std::vector<Published>& published() {
    static const std::vector<Published> p = {
        {"llada-8b", "llada", test::kLlada8BConfig, 32 * 9 + 3, 8'015'581'184},
        {"dream-7b", "dream", test::kDream7BConfig, 28 * 12 + 3, 7'615'616'512},
    };
    return p;
}

std::filesystem::path full_size_folder(const Published& p) {
    const auto dir = test::temp_dir(p.name);
    test::write_sparse_checkpoint(dir, p.config, 4);
    // The embedded model's tokenizer: inspect-model reads one; its ids fit either vocabulary.
    std::filesystem::copy_file(
        test::data_dir() / ".." / ".." / "assets" / "models" / "cachelens-tiny" / "tokenizer.json",
        dir / "tokenizer.json");
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
        SCOPED_TRACE(p.name);
        const auto dir = full_size_folder(p);
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
        SCOPED_TRACE(p.name);
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
        const auto dir = test::temp_dir("int8");
        test::write_sparse_checkpoint(dir, dream.config, 4, "I8");
        const auto e = error_of(dir);
        EXPECT_NE(e.find("model-00001-of-00004.safetensors"), std::string::npos) << e;
        EXPECT_NE(e.find("dtype I8"), std::string::npos) << e;
    }
    {  // config.json that does not match the weights
        const auto dir = full_size_folder(dream);
        auto config = nlohmann::json::parse(dream.config);
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

}  // namespace
}  // namespace cl
