// Converting a model folder to another architecture (engine/model/arch_conversion.h), the start of
// the embedded Dream model's training: the forward is kept exactly when nothing has to be pooled,
// pooled key/value heads are the mean of their group, special tokens keep their ids under the
// target's names, impossible conversions are refused naming the setting; and the trainer's loss
// reads each position's prediction from the row the architecture says.
#include "engine/base/errors.h"
#include "engine/model/arch_conversion.h"
#include "engine/model/model.h"
#include "engine/model/transformer.h"
#include "engine/model/weights_io.h"
#include "engine/training/per_position_loss.h"
#include "engine/training/trainer.h"
#include "test_util.h"

namespace cl {
namespace {

torch::Tensor logits_of(const std::filesystem::path& dir, const torch::Tensor& ids) {
    torch::InferenceMode guard;
    return Model::load(dir)->net().forward_full(ids.unsqueeze(0))[0];  // (L, V)
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
    return (a - b).abs().max().item<double>();
}

TEST(ArchConversion, ALladaModelAsDreamKeepsItsForwardAndItsTokenIds) {
    const auto src = test::make_tiny_model("conv-src", 32, 2, 4, 4);
    const auto dst = test::temp_dir("conv-dst");
    const ModelConfig c = convert_model_folder(src, dst, "dream");
    EXPECT_EQ(c.architecture, "dream");
    EXPECT_EQ(c.logits_shift, 1);
    EXPECT_TRUE(c.qkv_bias);
    EXPECT_EQ(c.n_kv_heads, 4);
    const ModelConfig read = load_model_config(dst);
    EXPECT_EQ(read.architecture, "dream");
    const ModelConfig before = load_model_config(src);
    EXPECT_EQ(read.mask_token_id, before.mask_token_id);

    auto tok = Tokenizer::load(dst / "tokenizer.json");
    EXPECT_EQ(tok->token_to_id("<|mask|>"), before.mask_token_id);
    EXPECT_EQ(tok->token_to_id("<|beginoftext|>"), before.bos_token_id);
    EXPECT_FALSE(tok->token_to_id("<|mdm_mask|>").has_value());
    EXPECT_TRUE(tok->token_to_id("<|im_start|>").has_value());
    EXPECT_TRUE(tok->token_to_id("<|im_end|>").has_value());

    // Zero biases and the same heads: the same computation under Dream's names.
    auto ids = torch::randint(0, read.vocab_size, {20}, torch::kLong);
    EXPECT_LT(max_abs_diff(logits_of(src, ids), logits_of(dst, ids)), 1e-5);
}

TEST(ArchConversion, PooledKeyValueHeadsAreTheMeanOfTheirGroup) {
    const auto src = test::make_tiny_model("pool-src", 32, 2, 4, 4);
    const auto dst = test::temp_dir("pool-dst");
    convert_model_folder(src, dst, "dream", /*n_kv_heads=*/2);
    auto a = Model::load(src), b = Model::load(dst);
    EXPECT_EQ(b->config().n_kv_heads, 2);
    const int64_t Dh = a->config().head_dim(), D = a->config().d_model;
    const auto& k4 = a->net().weights().layers.at(1).k_proj;  // (4 * Dh, D)
    const auto& k2 = b->net().weights().layers.at(1).k_proj;  // (2 * Dh, D)
    auto expected = k4.reshape({2, 2, Dh, D}).mean(1).reshape({2 * Dh, D});
    EXPECT_LT(max_abs_diff(k2, expected), 1e-6);
    // Query heads 0-1 share pooled head 0 and 2-3 share head 1: the pooled model differs from
    // the source unless the heads of a group were equal.
    auto ids = torch::randint(0, a->config().vocab_size, {16}, torch::kLong);
    EXPECT_GT(max_abs_diff(logits_of(src, ids), logits_of(dst, ids)), 1e-4);
}

TEST(ArchConversion, ImpossibleConversionsAreRefusedNamingTheSetting) {
    const auto src = test::make_tiny_model("conv-bad", 32, 2, 4, 4);
    try {
        convert_model_folder(src, test::temp_dir("conv-bad-dst"), "dream", 3);
        ADD_FAILURE() << "3 key/value heads of 4 accepted";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("kv_heads"), std::string::npos) << e.what();
    }
    try {
        convert_model_folder(src, test::temp_dir("conv-bad-dst2"), "gpt2");
        ADD_FAILURE() << "an unknown architecture accepted";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("dream"), std::string::npos) << e.what();
    }
}

TEST(PerPositionLoss, ReadsEachPositionsPredictionFromTheRowTheArchitectureSays) {
    const int64_t L = 6, V = 11;
    auto ids = torch::tensor({3, 1, 4, 1, 5, 9}, torch::kLong).unsqueeze(0);  // (1, L)
    // Logits that are sure of token ids[i] at row i (LLaDA's alignment) ...
    auto same_row = torch::full({1, L, V}, -30.0);
    // ... and of token ids[i + 1] at row i (Dream's).
    auto previous_row = torch::full({1, L, V}, -30.0);
    for (int64_t i = 0; i < L; ++i) {
        same_row[0][i][ids[0][i].item<int64_t>()] = 30.0;
        if (i + 1 < L) previous_row[0][i][ids[0][i + 1].item<int64_t>()] = 30.0;
    }
    auto llada = detail::per_position_ce(same_row, ids, 0);      // (1, L)
    auto dream = detail::per_position_ce(previous_row, ids, 1);  // (1, L)
    EXPECT_LT(llada.max().item<double>(), 1e-6);
    EXPECT_LT(dream.max().item<double>(), 1e-6);
    EXPECT_EQ(dream[0][0].item<double>(), 0.0);  // no prediction for the first position
    // The wrong alignment is charged: each position's loss is about 60 nats.
    EXPECT_GT(detail::per_position_ce(same_row, ids, 1).slice(1, 1).min().item<double>(), 50.0);
}

TEST(Trainer, AWarmStartOfAnotherArchitectureIsConvertedFirst) {
    const auto src = test::make_tiny_model("train-conv-src", 32, 2, 4, 4);
    TrainOptions o;
    o.out_dir = test::temp_dir("train-conv");
    o.init_from = src;
    o.architecture = "dream";
    o.shape.n_kv_heads = 2;
    o.total_steps = 3;
    o.batch_size = 2;
    o.warmup_steps = 1;
    o.mixture = {{"reverse", 1.0}};
    o.response_pad = 8;
    const auto r = train_model(o);
    EXPECT_TRUE(r.finished);
    EXPECT_TRUE(std::isfinite(r.final_val_loss));
    const auto m = Model::load(o.out_dir);
    EXPECT_EQ(m->config().architecture, "dream");
    EXPECT_EQ(m->config().n_kv_heads, 2);
    EXPECT_TRUE(std::filesystem::exists(o.out_dir / "converted-start" / "config.json"));
    // Fewer key/value heads alone convert too (the warm start's architecture is kept).
    TrainOptions gqa = o;
    gqa.architecture.clear();
    gqa.out_dir = test::temp_dir("train-gqa");
    train_model(gqa);
    EXPECT_EQ(Model::load(gqa.out_dir)->config().architecture, "llada");
    EXPECT_EQ(Model::load(gqa.out_dir)->config().n_kv_heads, 2);
    // A new Dream model gets Dream's special-token names.
    TrainOptions fresh = o;
    fresh.init_from.clear();
    fresh.out_dir = test::temp_dir("train-dream-fresh");
    fresh.shape = tiny_config(32, 2, 4, 2);
    fresh.shape.mlp_hidden_size = 64;
    fresh.shape.max_sequence_length = 512;
    fresh.vocab_size = 300;
    train_model(fresh);
    const auto f = Model::load(fresh.out_dir);
    EXPECT_EQ(f->config().architecture, "dream");
    EXPECT_EQ(f->tokenizer().token_to_id("<|mask|>"), f->config().mask_token_id);
    EXPECT_TRUE(f->has_chat_template());
}

}  // namespace
}  // namespace cl
