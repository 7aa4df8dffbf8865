/* Defaults, names of the enums, variant properties and error reporting. */
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "internal.h"
#include "../kernels/common/falcon_math.h"

void falcon_config_default(falcon_config *cfg)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->variant = FALCON_1;
    cfg->align = FALCON_ALIGN_PREFIX;
    cfg->phi = FALCON_PHI_IDENTITY;
    cfg->form = FALCON_FORM_RECURRENT;
    cfg->backend = FALCON_BACKEND_AUTO;
    cfg->precision = FALCON_FP32;
    cfg->eps = 1e-6;
    cfg->window = 1;
    cfg->chunk = FALCON_CHUNK_AUTO;
    cfg->mpfr_bits = 256;
    cfg->threads = 0;
}

falcon_inputs falcon_inputs_sequence(int64_t T, int64_t n, int64_t m, const void *q, const void *k,
                                     const void *v, const void *beta, const void *alpha,
                                     const void *gain)
{
    falcon_inputs in = {.B = 1, .T = T, .H = 1, .n = n, .m = m, .q = q, .k = k, .v = v,
                        .beta = beta, .alpha = alpha, .gain = gain};
    return in;
}

int64_t falcon_inputs_state_heads(const falcon_inputs *in)
{
    if (!in) return -1;
    const int64_t rows = in->cu_seqlens ? in->seqs : in->B;
    if (rows < 0 || rows > (1 << 24) || in->H < 0 || in->H > (1 << 24)) return -1; /* no product overflows */
    return rows * in->H;
}

static const char *const variant_names[] = {"falcon1", "falcon2", "falcon3",
                                            "falcon1a", "falcon2a", "falcon3a"};
static const char *const align_names[] = {"prefix", "same"};
static const char *const phi_names[] = {"identity", "relu", "elu1", "l2norm"};
static const char *const form_names[] = {"recurrent", "chunk", "parallel"};
/* (The backends' names are in their registry, src/backends.c.) */
static const char *const precision_names[] = {"fp32", "fp64", "tf32", "bf16"};
static const char *const status_names[] = {
    "ok", "invalid argument", "shape error", "value out of range", "non-finite input",
    "backend unavailable", "out of memory", "result overflowed", "i/o error", "malformed file"};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const char *name_of(const char *const *names, int count, int i)
{
    return i >= 0 && i < count ? names[i] : "unknown";
}

static int parse(const char *const *names, int count, const char *s)
{
    for (int i = 0; s && i < count; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

const char *falcon_version(void) { return FALCON_VERSION; }

const char *falcon_variant_name(falcon_variant v) { return name_of(variant_names, COUNT(variant_names), (int)v); }
const char *falcon_align_name(falcon_align a) { return name_of(align_names, COUNT(align_names), (int)a); }
const char *falcon_phi_name(falcon_phi p) { return name_of(phi_names, COUNT(phi_names), (int)p); }
const char *falcon_form_name(falcon_form f) { return name_of(form_names, COUNT(form_names), (int)f); }
const char *falcon_precision_name(falcon_precision p) { return name_of(precision_names, COUNT(precision_names), (int)p); }
const char *falcon_status_name(falcon_status s) { return name_of(status_names, COUNT(status_names), (int)s); }
int falcon_variant_parse(const char *s) { return parse(variant_names, COUNT(variant_names), s); }
int falcon_align_parse(const char *s) { return parse(align_names, COUNT(align_names), s); }
int falcon_phi_parse(const char *s) { return parse(phi_names, COUNT(phi_names), s); }
int falcon_form_parse(const char *s) { return parse(form_names, COUNT(form_names), s); }
int falcon_precision_parse(const char *s) { return parse(precision_names, COUNT(precision_names), s); }

int falcon_operand_format(falcon_precision p)
{
    return p == FALCON_TF32 ? FALCON_TF32_DROP : p == FALCON_BF16 ? FALCON_BF16_DROP : 0;
}

double falcon_operand_max(falcon_precision p)
{
    return p == FALCON_FP64 ? DBL_MAX : (double)falcon_operand_format_max(falcon_operand_format(p));
}

int falcon_variant_is_regression(falcon_variant v) { return v == FALCON_1 || v == FALCON_2 || v == FALCON_3; }
int falcon_variant_has_gain(falcon_variant v) { return v == FALCON_2 || v == FALCON_2A; }
int falcon_variant_has_window(falcon_variant v) { return v == FALCON_3 || v == FALCON_3A; }

static _Thread_local char last_error[512];
/* The fields of the last failure. Input and rule are copies: a path's
 * owner may free it before the caller reads the error. */
static _Thread_local char last_input[4096], last_rule[32];
static _Thread_local falcon_error_info last_info = {FALCON_OK, "", "", -1, -1, -1, ""};

/* A new failure: its message, and fields that name nothing yet. */
static falcon_status record(falcon_status s, const char *fmt, va_list ap)
{
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    last_input[0] = last_rule[0] = '\0';
    const falcon_error_info fresh = {s, last_input, last_rule, -1, -1, -1, last_error};
    last_info = fresh;
    return s;
}

falcon_status falcon_fail(falcon_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(s, fmt, ap);
    va_end(ap);
    return s;
}

falcon_status falcon_fail_in(const char *input, const char *rule, falcon_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(s, fmt, ap);
    va_end(ap);
    return falcon_blame_at(s, input, rule, -1, -1, -1);
}

falcon_status falcon_blame_at(falcon_status s, const char *input, const char *rule, int64_t index, int64_t t,
                              int64_t head)
{
    snprintf(last_input, sizeof last_input, "%s", input ? input : "");
    snprintf(last_rule, sizeof last_rule, "%s", rule ? rule : "");
    last_info.index = index;
    last_info.t = t;
    last_info.head = head;
    return s;
}

const char *falcon_last_error(void) { return last_error; }

const falcon_error_info *falcon_last_error_info(void) { return &last_info; }
