// Policy `dkv-pd` (dKV-Cache-PD): prompt K/V computed once and never refreshed; the response is
// cached as in dkv-decode (one-step delay), with a refresh of every response row every N steps.
#include "engine/generation/policies/row_set_policy.h"

namespace cl::policies {
namespace {

class DkvPd final : public RowSetPolicy {
public:
    struct Params {
        int64_t refresh_interval = 4;
        static const ParamList<Params>& list() {
            static const ParamList<Params> l{{"refresh_interval", &Params::refresh_interval, 1,
                                              1024, 4,
                                              "N: recompute every response row every N steps"}};
            return l;
        }
    };
    static PolicyInfo static_info() {
        return {"dkv-pd",
                "dKV-Cache-PD: prompt cached forever; response with delayed caching, refreshed "
                "every N",
                Params::list().specs(),
                {}};
    }
    void set_params(const std::map<std::string, double>& resolved) override {
        m_p = Params::list().read(resolved);
    }

protected:
    RowChoice choose(const StepContext& ctx) override {
        if (ctx.step == 0) return full_choice("first-step");
        const int64_t n = m_p.refresh_interval;
        RowChoice c;
        if (ctx.step % n == 0) {  // steps N, 2N, ... of the run
            c.rows = range(ctx.prompt_len, ctx.seq_len);
            c.reason = "interval";
            c.detail = "response refresh (every " + std::to_string(n) + " steps), prompt reused";
            return c;
        }
        c.rows = masked_rows(ctx, ctx.prompt_len);
        append(c.rows, *ctx.decoded_last_step);
        c.reason = "delayed-cache";
        c.detail = "recompute masked + decoded last step, prompt reused";
        return c;
    }

private:
    Params m_p;
};

CL_REGISTER_POLICY(DkvPd);

}  // namespace
}  // namespace cl::policies
