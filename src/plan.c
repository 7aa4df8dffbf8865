/* A call's configuration resolved once (internal.h, falcon_plan). */
#include "internal.h"
#include "backends.h"

void falcon_plan_resolve(const falcon_config *cfg, const falcon_inputs *in, falcon_plan *plan)
{
    plan->cfg0 = *cfg;
    plan->cfg = *cfg;
    plan->cfg.threads = falcon_threads(cfg);
    /* The widths may be bad yet (the shapes are checked after): the chunk
     * model takes any, and a bad call never runs. */
    if (in) plan->cfg.chunk = falcon_chunk_of(cfg->chunk, in->n, in->m, cfg->window);
    plan->backend = falcon_backend_resolve(cfg->backend);
    plan->row = falcon_backend_info_of(plan->backend);
    plan->available = falcon_backend_available(plan->backend);
    plan->variant = falcon_variant_name(cfg->variant);
    plan->form = falcon_form_name(cfg->form);
    plan->precision = falcon_precision_name(cfg->precision);
    plan->backend_asked = falcon_backend_name(cfg->backend);
    plan->backend_name = falcon_backend_name(plan->backend);
}
