// The published checkpoints CacheLens can lay out without a download (LLaDA-8B Base/Instruct,
// LLaDA-1.5, Dream-v0 Base/Instruct 7B): each one's config.json as published, its special tokens
// at their ids and its tokenizer.json's pipeline. `init-model --preset` writes such a folder at
// full size (bf16 shards whose weights are holes: inspect-model and the loader's checks run on it
// as on the download) or shrunk (the same keys, tensor names and special ids with small sizes and
// random weights, so that generation runs).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/model_config.h"

namespace cl {

struct CheckpointPreset {
    std::string name;         // "dream-7b-instruct"
    std::string repository;   // "Dream-org/Dream-v0-Instruct-7B"
    std::string config_json;  // config.json as published
    std::vector<std::pair<std::string, int32_t>> special_tokens;  // content, id
    // The tokenizer.json pipeline: "llama3" (LLaDA: Llama-3-style split regex, byte-level,
    // BOS template) or "qwen2" (Dream: NFC, Qwen2's split regex, byte-level).
    std::string tokenizer_pipeline;
};

const std::vector<CheckpointPreset>& checkpoint_presets();
// Throws InputError listing the known names.
const CheckpointPreset& find_checkpoint_preset(const std::string& name);
std::string checkpoint_preset_names();  // "a, b, c"

struct PresetFolderOptions {
    bool shrink = false;
    uint64_t seed = 0;  // the shrunk or random variant's weights
    int shards = 4;
    bool random = false;  // full size: random bf16 weights instead of holes (speed work)
};

// Writes config.json, the weights (sharded, with model.safetensors.index.json), tokenizer.json
// and generation_config.json; returns the config as the loader reads it back.
ModelConfig write_preset_folder(const std::filesystem::path& dir, const CheckpointPreset& preset,
                                const PresetFolderOptions& options);

// A byte-level BPE tokenizer.json with the preset's pipeline and special tokens (no merges: the
// presets prove the layout and the ids, not a vocabulary).
std::string preset_tokenizer_json(const CheckpointPreset& preset);

}  // namespace cl
