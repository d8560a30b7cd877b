// libFuzzer harness: a model folder with one of its files replaced by the input. The first byte
// picks the file: config.json, model.safetensors.index.json, a weight shard, tokenizer.json or
// generation_config.json; the rest is its content. The other files are those of a valid tiny
// two-shard model, so every check of Model::load is reachable. A bad folder must end in an
// InputError; a folder that loads must generate.
#include <cstdint>
#include <filesystem>

#include "engine/base/errors.h"
#include "engine/generation/generator.h"
#include "engine/model/model.h"
#include "engine/model/model_writer.h"
#include "fuzz_util.h"

namespace fs = std::filesystem;

namespace {

const char* const kFiles[] = {"config.json", "model.safetensors.index.json",
                              "model-00001-of-00002.safetensors", "tokenizer.json",
                              "generation_config.json"};

// The valid folder every input starts from, written once per process.
const fs::path& template_dir() {
    static const fs::path dir = [] {
        const auto d = cl::fuzz::scratch_dir() / "template";
        cl::init_random_model(d, cl::tiny_config(16, 1, 2, 1), 3, cl::StorageDType::F32, 2);
        return d;
    }();
    return dir;
}

// A fresh copy of the template. libFuzzer's timeout alarm (SIGALRM) can interrupt the copy's
// system calls, and std::filesystem::copy does not retry on EINTR: its 1M run stopped there once
// after 391,704 executions ("cannot copy: Interrupted system call"). That is the harness's
// problem, not the loader's, so the copy is retried.
void copy_template(const fs::path& work) {
    for (int attempt = 0;; ++attempt) {
        fs::remove_all(work);
        std::error_code ec;
        fs::copy(template_dir(), work, ec);
        if (!ec) return;
        if (ec != std::errc::interrupted || attempt == 100)
            throw fs::filesystem_error("copying the template folder", template_dir(), work, ec);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const fs::path work = cl::fuzz::scratch_dir() / "model";
    copy_template(work);
    const char* file = kFiles[data[0] % (sizeof kFiles / sizeof kFiles[0])];
    cl::fuzz::write_file(work / file, data + 1, size - 1);
    std::shared_ptr<cl::Model> model;
    try {
        model = cl::Model::load(work);
    } catch (const cl::InputError&) {
        return 0;
    }
    cl::GenerationRequest r;
    r.prompt_text = "hi";
    r.config.gen_length = 4;
    r.config.block_length = 4;
    r.config.steps = 2;
    try {
        cl::Generator(model, r).run();
    } catch (const cl::InputError&) {  // a request the model cannot serve, with a reason
    }
    return 0;
}
