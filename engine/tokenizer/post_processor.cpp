// Post-processors of tokenizer.json: the special tokens added around one encoded sequence when
// the caller asks for them (HF's add_special_tokens). TemplateProcessing's "single" template,
// BertProcessing ([CLS] A [SEP]), RobertaProcessing (<s> A </s>), ByteLevel (offsets only: no
// ids change) and Sequence. Pair templates are not read: CacheLens encodes one sequence.
#include "engine/base/json_int.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_parts.h"

namespace cl::detail {
namespace {

// A [token, id] pair as Bert and Roberta processors declare "cls" and "sep".
int32_t pair_id(const json& j, const char* field, const std::string& src) {
    if (!j.contains(field) || !j[field].is_array() || j[field].size() != 2)
        throw InputError(src, std::string("post_processor ") + field + " is not [token, id]");
    return json_int<int32_t>(j[field][1]);
}

PostProcessor wrap_with(int32_t first, int32_t last) {
    return [first, last](std::vector<int32_t> ids) {
        ids.insert(ids.begin(), first);
        ids.push_back(last);
        return ids;
    };
}

// TemplateProcessing's "single" template: pieces {"SpecialToken": {"id": name}} expand to the
// ids the "special_tokens" map gives that name; {"Sequence": {"id": "A"}} is the input.
PostProcessor template_processing(const json& j, const std::string& src) {
    if (!j.contains("single") || !j["single"].is_array())
        throw InputError(src, "TemplateProcessing has no single template");
    std::vector<std::vector<int32_t>> pieces;  // empty vector: the sequence itself
    const json specials = j.value("special_tokens", json::object());
    for (const auto& piece : j["single"]) {
        if (piece.contains("Sequence")) {
            if (piece["Sequence"].value("id", std::string("A")) != "A")
                throw InputError(src, "TemplateProcessing single template names sequence B");
            pieces.emplace_back();
            continue;
        }
        const auto name = piece.at("SpecialToken").at("id").get<std::string>();
        if (!specials.contains(name))
            throw InputError(src, "TemplateProcessing names special token '" + name +
                                      "' that special_tokens does not define");
        std::vector<int32_t> ids;
        for (const auto& id : specials[name].at("ids")) ids.push_back(json_int<int32_t>(id));
        if (ids.empty())
            throw InputError(src, "TemplateProcessing special token '" + name + "' has no ids");
        pieces.push_back(std::move(ids));
    }
    return [pieces](std::vector<int32_t> sequence) {
        std::vector<int32_t> out;
        for (const auto& p : pieces)
            out.insert(out.end(), p.empty() ? sequence.begin() : p.begin(),
                       p.empty() ? sequence.end() : p.end());
        return out;
    };
}

}  // namespace

PostProcessor make_post_processor(const json& j, const std::string& src) {
    if (j.is_null()) return nullptr;
    const auto type = j.value("type", std::string());
    if (type == "TemplateProcessing") return template_processing(j, src);
    if (type == "BertProcessing" || type == "RobertaProcessing")
        return wrap_with(pair_id(j, "cls", src), pair_id(j, "sep", src));
    if (type == "ByteLevel") return nullptr;
    if (type == "Sequence") {
        std::vector<PostProcessor> stages;
        for (const auto& p : j.at("processors"))
            if (auto stage = make_post_processor(p, src)) stages.push_back(std::move(stage));
        return [stages](std::vector<int32_t> ids) {
            for (const auto& stage : stages) ids = stage(std::move(ids));
            return ids;
        };
    }
    throw InputError(src, "post_processor type '" + type + "' is not supported");
}

}  // namespace cl::detail
