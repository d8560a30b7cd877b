// The one switch between the fast kernels and the plain LibTorch reference (kernel_choice.h): its
// names, its environment variable, that the reference closes every CPU fast path's gate, and that
// both sets give the same tokens on the shipped model under the policies whose cached steps run
// the fused layers. The whole suite also runs at CACHELENS_KERNELS=reference (scripts/test).
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/base/errors.h"
#include "engine/generation/generator.h"
#include "engine/kernels/kernel_choice.h"
#include "engine/model/blocks.h"
#include "engine/model/model.h"
#include "scoped_kernel_set.h"
#include "scoped_threads.h"
#include "test_requests.h"

namespace cl {
namespace {

using test::ScopedKernelSet;

TEST(KernelChoice, NamesRoundTripAndOthersAreRefusedByName) {
    for (const auto set : {KernelSet::Fast, KernelSet::Reference})
        EXPECT_EQ(kernel_set_named(kernel_set_name(set)), set);
    EXPECT_FALSE(kernel_set_named("Fast"));
    EXPECT_FALSE(kernel_set_named(""));
    try {
        (void)parse_kernel_set("ref");
        FAIL() << "'ref' was taken as a kernel set";
    } catch (const InputError& e) {
        EXPECT_EQ(e.setting(), "kernels");
        EXPECT_NE(std::string(e.what()).find("'ref'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("fast or reference"), std::string::npos) << e.what();
    }
}

TEST(KernelChoice, TheReferenceClosesTheRowKernelsGate) {
    const auto x = torch::ones({4, 8});
    {
        const ScopedKernelSet fast(KernelSet::Fast);
        EXPECT_TRUE(detail::uses_row_kernels(x));
    }
    const ScopedKernelSet reference(KernelSet::Reference);
    EXPECT_FALSE(detail::uses_row_kernels(x));
    EXPECT_FALSE(fast_kernels());
}

// The same request at each set gives the same tokens, at 1 thread and at 2 (where the fused
// regions split the rows or the kv heads).
TEST(KernelChoice, BothSetsGiveTheSameTokensUnderEveryCachedLayerVariant) {
    auto model = Model::load(default_model_dir());
    for (const int threads : {1, 2}) {
        const test::ScopedThreads pool(threads);
        // fast-dual: few rows through the whole layer in one region; d2cache: the fused layer with
        // head means; elastic: kept scores and window sums; dllm-cache: the feature layers and
        // probe.
        for (const std::string policy : {"fast-dual", "d2cache", "elastic", "dllm-cache", "none"}) {
            GenerationRequest request = test::request(64, 32, 64);
            request.policy = policy;
            std::vector<int32_t> tokens[2];
            for (const auto set : {KernelSet::Fast, KernelSet::Reference}) {
                const ScopedKernelSet chosen(set);
                Generator g(model, request);
                tokens[static_cast<int>(set)] = g.run().final_tokens;
                EXPECT_EQ(g.info().kernels, kernel_set_name(set)) << "the run names its kernel set";
            }
            EXPECT_EQ(tokens[0], tokens[1]) << policy << " at " << threads << " thread(s)";
        }
    }
}

}  // namespace
}  // namespace cl
