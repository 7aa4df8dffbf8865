/*
 * A trusted case set (docs/cases.md): index.json records the arguments of
 * the export that wrote it ("export"), and `falcon check` re-derives the
 * whole set from them, in memory, through the export's own code, and
 * compares every file byte for byte before it judges anything. A raised
 * threshold, a replaced reference, an edited index or case.json, a file
 * added to or taken from a case, or a set of another version is refused:
 * what judges an implementation is what this version's export writes.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "set.h"
#include "gate.h"

static const char *const filter_keys[] = {"variant", "form", "align", "phi", "decay"};
enum { NFILTER = 5 };

static const char *filter_name(int which, int value)
{
    switch (which) {
    case 0: return falcon_variant_name((falcon_variant)value);
    case 1: return falcon_form_name((falcon_form)value);
    case 2: return falcon_align_name((falcon_align)value);
    case 3: return falcon_phi_name((falcon_phi)value);
    default: return gate_decay_name((gate_decay)value);
    }
}

static int filter_parse(int which, const char *s)
{
    switch (which) {
    case 0: return falcon_variant_parse(s);
    case 1: return falcon_form_parse(s);
    case 2: return falcon_align_parse(s);
    case 3: return falcon_phi_parse(s);
    default:
        for (int d = 0; d < GATE_DECAY_COUNT; d++)
            if (!strcmp(s, gate_decay_name((gate_decay)d))) return d;
        return -1;
    }
}

static int *filter_field(export_opts *o, int which)
{
    int *const f[NFILTER] = {&o->variant, &o->form, &o->align, &o->phi, &o->decay};
    return f[which];
}

static int filter_value(const export_opts *o, int which)
{
    const int f[NFILTER] = {o->variant, o->form, o->align, o->phi, o->decay};
    return f[which];
}

json_t *grade_export_record(const export_opts *o)
{
    json_t *j = json_object();
    json_object_set_new(j, "profile", json_string(o->profile ? "full" : "quick"));
    json_object_set_new(j, "layout", json_string(grade_layout_name(o->layout)));
    json_object_set_new(j, "precision", json_string(grade_unit_name(o->precision)));
    json_object_set_new(j, "scale", o->scale ? json_real(o->scale) : json_null()); /* null: the layout's */
    for (int i = 0; i < NFILTER; i++) {
        const int v = filter_value(o, i);
        json_object_set_new(j, filter_keys[i], v < 0 ? json_null() : json_string(filter_name(i, v)));
    }
    if (o->grad) json_object_set_new(j, "grad", json_true()); /* absent: a set without gradients, as before */
    return j;
}

void grade_export_command(const export_opts *o, char *buf, size_t size)
{
    size_t at = (size_t)snprintf(buf, size, "DIR --profile %s --precision %s --layout %s",
                                 o->profile ? "full" : "quick", grade_unit_name(o->precision),
                                 grade_layout_name(o->layout));
    for (int i = 0; i < NFILTER && at < size; i++) {
        const int v = filter_value(o, i);
        if (v >= 0) at += (size_t)snprintf(buf + at, size - at, " --%s %s", filter_keys[i], filter_name(i, v));
    }
    if (o->scale && at < size) at += (size_t)snprintf(buf + at, size - at, " --scale %.17g", o->scale);
    if (o->grad && at < size) snprintf(buf + at, size - at, " --grad");
}

/* The export's arguments from the record; 0, or -1 when one is missing or
 * not a value the export takes. */
static int from_record(json_t *r, export_opts *o)
{
    *o = (export_opts){NULL, 0, -1, -1, -1, -1, -1, GRADE_FP32, GRADE_LAYOUT_FALCON, 0, 1, 0, 0};
    const char *profile = json_string_value(json_object_get(r, "profile"));
    const char *precision = json_string_value(json_object_get(r, "precision"));
    const char *layout_name = json_string_value(json_object_get(r, "layout"));
    const int unit = precision ? grade_unit_parse(precision) : -1;
    const int layout = layout_name ? grade_layout_parse(layout_name) : -1;
    json_t *scale = json_object_get(r, "scale");
    if (!json_is_object(r) || !profile || (strcmp(profile, "quick") && strcmp(profile, "full")) || unit < 0 ||
        unit == GRADE_TF32 || layout < 0 || !scale || (!json_is_null(scale) && !json_is_real(scale)))
        return -1;
    o->profile = !strcmp(profile, "full");
    o->precision = (grade_unit)unit;
    o->layout = (grade_layout)layout;
    o->scale = json_is_null(scale) ? 0 : json_real_value(scale);
    if (json_is_real(scale) && (!(o->scale > 0) || !isfinite(o->scale) || o->layout != GRADE_LAYOUT_FLA)) return -1;
    json_t *grad = json_object_get(r, "grad"); /* only ever true: a set without gradients has no key */
    if (grad && (!json_is_true(grad) || o->layout != GRADE_LAYOUT_FALCON)) return -1;
    o->grad = grad != NULL;
    for (int i = 0; i < NFILTER; i++) {
        json_t *v = json_object_get(r, filter_keys[i]);
        if (!v) return -1;
        if (json_is_null(v)) continue;
        if (!json_is_string(v) || (*filter_field(o, i) = filter_parse(i, json_string_value(v))) < 0) return -1;
    }
    return 0;
}

int grade_verify_set(const char *dir, json_t *index)
{
    const char *version = json_string_value(json_object_get(index, "falcon_version"));
    if (!version || strcmp(version, FALCON_VERSION))
        return cli_error("check: '%s/index.json': a set written by falcon %s, and this is falcon %s: another "
                         "version's thresholds and references are not this one's: re-export it with this "
                         "version, or pass --trust-set to judge it as it is", dir, version ? version : "(unknown)",
                         FALCON_VERSION);
    export_opts o;
    if (from_record(json_object_get(index, "export"), &o))
        return cli_error("check: '%s/index.json': \"export\" does not record the arguments of the export that "
                         "wrote it (an edited index, or an older set): re-export it, or pass --trust-set to "
                         "judge it as it is", dir);
    o.dir = dir;
    char args[512];
    grade_export_command(&o, args, sizeof args);
    set_sink *sink = sink_open(dir, 1, args);
    if (!sink) return cli_error("out of memory");
    int written, skipped;
    const int rc = grade_export_write(&o, sink, &written, &skipped);
    sink_close(sink);
    return rc;
}
