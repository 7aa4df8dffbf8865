/*
 * `falcon check DIR --results RDIR`: judge what an implementation wrote for
 * each exported case against the MPFR reference, with the case's thresholds
 * in units of roundoff of the precision it is judged in.
 *
 * Everything is read and validated before anything is judged: a missing or
 * extra result, a wrong shape, a non-finite value or a malformed manifest
 * is bad input (exit 2, one line naming the case and the file), never a
 * failed case. A case the manifest declares skipped is reported as skipped,
 * never as passed. Nor is nothing ever a pass: a manifest that skips every
 * case, a case without steps whose final state is not given, and a result
 * that is a link to the reference are bad input too.
 */
#include <dirent.h>
#include <errno.h>
#include <unistd.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "grade.h"
#include "../util/paths.h"
#include "../util/signals.h"
#include "../util/files.h"
#include "gate.h"
#include "report.h"
#include "check-grad.h"
#include "grad-gate.h"
#include "set.h"
#include "where.h"

typedef struct check_opts {
    const char *cases, *results, *json, *junit;
    int unit; /* -1: the set's own precision */
    int verbose;
    int require_state;  /* --require-state: a judged case without state.npy is bad input */
    int require_grad;   /* --require-grad: a judged case without its gradients is bad input */
    int require_inv;    /* --require-batch-invariance: a batch-variant group fails */
    double max_skipped; /* --max-skipped: the largest fraction of cases skipped that passes; -1: any */
    int trust_set;      /* judge the set as it is, without re-deriving it */
    int format;         /* --format: a check_format */
} check_opts;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: falcon check DIR --results RDIR [--precision fp64|fp32|tf32|bf16|fp16]\n"
            "                    [--json FILE] [--junit FILE] [--verbose] [--require-state]\n"
            "                    [--require-grad] [--require-batch-invariance]\n"
            "                    [--max-skipped FRACTION] [--trust-set]\n"
            "                    [--format table|lines]\n"
            "Judges an implementation's results against a case set made by `falcon cases\n"
            "export`: RDIR/<case>/out.npy (and, optionally, state.npy) for every case,\n"
            "float16, float32 or float64. RDIR/manifest.json may declare cases skipped:\n"
            "{\"skip\": {\"<case>\": \"reason\"}}. Prints the errors in units of roundoff of\n"
            "--precision (default: the precision the set's inputs are exact in) against\n"
            "each case's thresholds, per case and per variant and form. A case whose\n"
            "threshold in that unit allows more than 2^-4 relative error is not judgeable:\n"
            "neither passed nor failed. --require-state: a missing state.npy is bad input;\n"
            "--max-skipped F: more than the fraction F (0..1) of the cases skipped fails.\n"
            "Exit status: 0 every case judged passed (the others skipped or not judgeable),\n"
            "1 a case failed or too many were skipped, 2 bad input (a missing or extra\n"
            "result, a wrong shape, NaN, every case skipped, no case judgeable; one line\n"
            "names it).\n"
            "The set is verified first: it is re-derived in memory from the export its\n"
            "index.json records, and any file that differs (a raised threshold, a replaced\n"
            "reference, an edited case, a set of another version) is refused (status 2).\n"
            "  --trust-set  judge the set as it is, unverified (the table says so)\n"
            "A failing case's line names its first bad step t (the first step at which the\n"
            "outputs of steps 0..t exceed the threshold) and its batch row and head, or says\n"
            "the state alone failed.\n"
            "A set exported with --grad also judges the gradients a case's folder holds\n"
            "(dq.npy ... dS0.npy, falcon grad's names; each against its own threshold; a\n"
            "NaN fails); a case without any is judged on its forward results and says so.\n"
            "--require-grad: a judged case without every gradient it has is bad input.\n"
            "Batch invariance: cases that hold one sequence at different batch rows or\n"
            "packed among others are compared bit for bit; a group whose results differ\n"
            "is reported BATCH-VARIANT, apart from the verdict, and fails the run with\n"
            "--require-batch-invariance.\n"
            "  --format table  (default) the failing cases, a table per variant and form\n"
            "  --format lines  one line per case (<case>: OK|FAIL|SKIP|NOT JUDGEABLE ...) and\n"
            "                  the summary line, nothing else\n");
}

/* A number from 0 to 1, the whole text. 0, or -1. */
static int parse_fraction(const char *s, double *x)
{
    char *end;
    errno = 0;
    *x = strtod(s, &end);
    return end != s && !*end && !errno && *x >= 0 && *x <= 1 ? 0 : -1;
}

static int parse_args(int argc, char **argv, check_opts *o, int *help)
{
    static const opt_def defs[] = {
        {"results", 'r', 1}, {"precision", 'u', 1}, {"json", 'j', 1}, {"junit", 'x', 1}, {"verbose", 'v', 0},
        {"help", 'h', 0}, {"require-state", 's', 0}, {"require-grad", 'G', 0}, {"max-skipped", 'k', 1}, {"trust-set", 'T', 0},
        {"format", 'f', 1}, {"require-batch-invariance", 'I', 0}, {NULL, 0, 0}};
    *o = (check_opts){.unit = -1, .max_skipped = -1};
    *help = 0;
    opt_scan sc;
    opt_begin(&sc, argc, argv, "falcon check", defs, OPT_POSITIONALS | OPT_ONCE); /* a second --results must not win in silence */
    int ch, nset = 0;
    while ((ch = opt_next(&sc)) != OPT_END) {
        switch (ch) {
        case 'r': o->results = sc.value; break;
        case 'u':
            if ((o->unit = grade_unit_parse(sc.value)) < 0)
                return cli_error("check: --precision %s: must be one of fp64, fp32, tf32, bf16, fp16", sc.value);
            break;
        case 'j': o->json = sc.value; break;
        case 'x': o->junit = sc.value; break;
        case 'v': o->verbose = 1; break;
        case 'h': *help = 1; return 0;
        case 's': o->require_state = 1; break;
        case 'G': o->require_grad = 1; break;
        case 'I': o->require_inv = 1; break;
        case 'k':
            if (parse_fraction(sc.value, &o->max_skipped))
                return cli_error("check: --max-skipped %s: a fraction of the cases, from 0 to 1", sc.value);
            break;
        case 'T': o->trust_set = 1; break;
        case 'f':
            if (strcmp(sc.value, "table") && strcmp(sc.value, "lines"))
                return cli_error("check: --format %s: must be table or lines", sc.value);
            o->format = !strcmp(sc.value, "lines") ? CHECK_FORMAT_LINES : CHECK_FORMAT_TABLE;
            break;
        case OPT_POSITIONAL: o->cases = sc.value, nset++; break;
        default: return CLI_FAIL; /* OPT_ERROR: reported */
        }
    }
    if (nset != 1)
        return cli_error("check: %s", !nset ? "no case set given (falcon check DIR --results RDIR)"
                                            : "give one case set directory");
    if (!o->results) return cli_error("check: --results RDIR is required (the implementation's outputs)");
    return 0;
}

/* ---- reading ---- */

/* A JSON object from a file; NULL after one error line: the file's own
 * problem (a directory, unreadable: its strerror) or the parser's, with
 * the line it points at. */
static json_t *load_json(const char *path, const char *what)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        cli_error("%s: '%s' is a directory, not a JSON file", what, path);
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_error("%s: '%s': cannot read it: %s", what, path, strerror(errno));
        return NULL;
    }
    json_error_t e;
    json_t *j = json_loadf(f, JSON_REJECT_DUPLICATES, &e);
    fclose(f);
    if (!j && e.line > 0) cli_error("%s: '%s': %s (line %d)", what, path, e.text, e.line);
    else if (!j) cli_error("%s: '%s': %s", what, path, e.text);
    else if (!json_is_object(j)) {
        cli_error("%s: '%s': not a JSON object", what, path);
        json_decref(j);
        j = NULL;
    }
    return j;
}

static const char *get_str(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* An array of `count` values read from an .npy file whose shape must be
 * `want` (checked from the header, before any data is read). 0, or 2 after
 * one error line naming the case and the file. */
int check_read_array(const char *casename, const char *path, const char *label, json_t *want, int finite,
                     double **out, int64_t *count, falcon_dtype *dtype)
{
    falcon_npy_reader *r;
    falcon_array info;
    if (falcon_npy_open(path, &r, &info)) { /* a failure about the file names it already */
        const falcon_error_info *e = falcon_last_error_info();
        const int names_file = !strcmp(e->input, path);
        return names_file ? cli_error("%s: %s", casename, e->message)
                          : cli_error("%s: %s: %s", casename, label, e->message);
    }
    int ok = json_is_array(want) && (size_t)info.ndim == json_array_size(want);
    for (int i = 0; ok && i < info.ndim; i++) ok = info.shape[i] == json_integer_value(json_array_get(want, (size_t)i));
    if (!ok) {
        char got[160] = "", exp[160] = "";
        for (int i = 0; i < info.ndim; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? "," : "", (long long)info.shape[i]);
        for (size_t i = 0; i < json_array_size(want); i++)
            snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%s%lld", i ? "," : "",
                     (long long)json_integer_value(json_array_get(want, i)));
        falcon_npy_close(r);
        return cli_error("%s: %s: shape [%s], expected [%s]", casename, label, got, exp);
    }
    double *x = malloc(sizeof(double) * (size_t)(info.count + 1));
    falcon_status s = x ? falcon_npy_read_range(r, 0, info.count, FALCON_DTYPE_F64, x) : FALCON_E_NOMEM;
    falcon_npy_close(r);
    if (s) {
        free(x);
        return cli_error("%s: %s: %s", casename, label, s == FALCON_E_NOMEM ? "out of memory" : falcon_last_error());
    }
    for (int64_t i = 0; finite && i < info.count; i++)
        if (!isfinite(x[i])) {
            const double bad = x[i];
            char at[32 * FALCON_NPY_MAX_NDIM]; /* the index in the array's shape too: [t, h, i] */
            falcon_npy_unravel(i, info.shape, info.ndim, at, sizeof at);
            free(x);
            return cli_error("%s: %s: element %lld%s%s is %g: an implementation's result must be finite "
                               "(or the case declared skipped)", casename, label, (long long)i,
                               info.ndim > 1 ? " " : "", info.ndim > 1 ? at : "", bad);
        }
    *out = x;
    *count = info.count;
    *dtype = info.dtype;
    return 0;
}

/* The index's names and dirs as hash sets (JSON objects: name -> row). */
typedef struct case_sets {
    json_t *names, *dirs;
} case_sets;

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* The first folder in `dir` (one holding `marker`, when given) whose name
 * is not a key of `listed` (a set of the cases' names or dirs, made by
 * check_case_list): 1 and its name in `name`; 0 when every one is listed;
 * -1 when dir cannot be read. One look-up per folder. */
static int unlisted_folder(const char *dir, const char *marker, json_t *listed, char *name, size_t len)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d));) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s%s%s", dir, e->d_name, marker ? "/" : "", marker ? marker : "");
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !(marker ? exists(path) : is_dir(path)))
            continue;
        found = json_object_get(listed, e->d_name) == NULL;
        if (found) snprintf(name, len, "%s", e->d_name);
    }
    closedir(d);
    return found;
}

/* Every directory in RDIR that holds a result's file (out.npy or
 * state.npy) must be a case of the set: a misspelt case is an extra
 * result. Other folders beside the cases (logs/, .git/) are not read. */
static int no_extra_results(const check_opts *o, const case_sets *sets)
{
    if (falcon_same_file(o->results, o->cases))
        return cli_error("check: --results '%s' is the case set '%s' itself: an implementation's results go in "
                         "a folder of their own", o->results, o->cases);
    char name[256];
    int r = unlisted_folder(o->results, "out.npy", sets->names, name, sizeof name);
    if (r == 0) r = unlisted_folder(o->results, "state.npy", sets->names, name, sizeof name);
    if (r < 0) return cli_error("check: --results '%s': cannot open it as a directory", o->results);
    return r ? cli_error("%s: '%s/%s': a result for a case that is not in '%s' (extra result)", name, o->results, name,
                         o->cases)
             : 0;
}

/* Every case folder in the set (a folder with a case.json) must be listed:
 * a case taken out of the index, rather than declared skipped in the
 * manifest, would go unjudged without a word. */
static int no_unlisted_cases(const check_opts *o, const case_sets *sets)
{
    char name[256];
    const int r = unlisted_folder(o->cases, "case.json", sets->dirs, name, sizeof name);
    if (r < 0) return cli_error("check: '%s': cannot open it as a directory", o->cases);
    return r ? cli_error("check: '%s/index.json' does not list the case folder '%s': a set is judged whole "
                         "(declare a case skipped in RDIR/manifest.json instead)", o->cases, name)
             : 0;
}

/* The index's list of cases: at least one, each with a plain name and dir,
 * no name or dir twice (a case listed twice would count twice), as many as
 * its "count" says. A gate that judged nothing, or the same case again,
 * must not report a pass. Fills `sets` (name -> row, dir -> row: one
 * hashed look-up each, so that a long list is checked in linear time). */
static int check_case_list(const char *path, json_t *index, json_t *cases, case_sets *sets)
{
    const size_t n = json_array_size(cases);
    if (n == 0) return cli_error("check: '%s': the set lists no cases: there is nothing to judge", path);
    json_t *count = json_object_get(index, "count");
    if (count && (!json_is_integer(count) || json_integer_value(count) != (json_int_t)n))
        return cli_error("check: '%s': \"count\" says %lld, but %zu cases are listed", path,
                         (long long)json_integer_value(count), n);
    for (size_t i = 0; i < n; i++) { /* name and dir: one folder name each, nothing outside the set */
        json_t *row = json_array_get(cases, i);
        const char *name = get_str(row, "name"), *dir = get_str(row, "dir");
        if (!falcon_plain_name(name) || !falcon_plain_name(dir))
            return cli_error("check: '%s': case %zu: \"name\" and \"dir\" must each be one folder name "
                             "(no '/', not '.' or '..'): '%s', '%s'", path, i, name, dir);
        json_t *other = json_object_get(sets->names, name);
        if (!other) other = json_object_get(sets->dirs, dir);
        if (other)
            return cli_error("check: '%s': cases %lld and %zu share a name or dir ('%s'): each case is "
                             "listed once", path, (long long)json_integer_value(other), i, name);
        if (json_object_set_new(sets->names, name, json_integer((json_int_t)i)) ||
            json_object_set_new(sets->dirs, dir, json_integer((json_int_t)i)))
            return cli_error("check: out of memory");
    }
    return 0;
}

/* Nothing but white space (or nothing at all): ASCII's and Unicode's
 * spaces (no-break, ideographic, zero-width ...), in UTF-8. */
static int blank(const char *s)
{
    static const char *const spaces[] = {
        " ", "\t", "\n", "\r", "\f", "\v", "\xc2\x85", "\u00a0", "\u1680", "\u2000", "\u2001", "\u2002", "\u2003",
        "\u2004", "\u2005", "\u2006", "\u2007", "\u2008", "\u2009", "\u200a", "\u200b", "\u2028", "\u2029",
        "\u202f", "\u205f", "\u2060", "\u3000", "\ufeff"};
    for (size_t i = 0; *s && i < sizeof spaces / sizeof spaces[0];)
        if (!strncmp(s, spaces[i], strlen(spaces[i]))) s += strlen(spaces[i]), i = 0;
        else i++;
    return !*s;
}

/* RDIR/manifest.json, when there is one: *skip maps cases of the set to
 * their reasons (non-empty strings). A manifest that skips every case is
 * refused: nothing would be judged, and a gate must not pass on nothing.
 * 0, or 2; *manifest is freed by the caller. */
static int read_manifest(const check_opts *o, const case_sets *sets, json_t **manifest, json_t **skip)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/manifest.json", o->results);
    *manifest = *skip = NULL;
    if (!exists(path)) return 0;
    if (!(*manifest = load_json(path, "manifest"))) return 2;
    *skip = json_object_get(*manifest, "skip");
    if (*skip && !json_is_object(*skip))
        return cli_error("manifest: '%s': \"skip\" must map case names to reasons", path);
    const char *key;
    json_t *val;
    json_object_foreach(*skip, key, val) {
        if (!json_object_get(sets->names, key)) return cli_error("%s: '%s': declared skipped, but the set has no such case", key, path);
        if (!json_is_string(val) || blank(json_string_value(val)))
            return cli_error("%s: '%s': a skipped case needs its reason (a string that is not empty or only "
                             "white space)", key, path);
    }
    /* The keys are distinct (duplicates are refused) known cases, whose names are distinct. */
    if (*skip && json_object_size(*skip) == json_object_size(sets->names))
        return cli_error("manifest: '%s': every case of the set is declared skipped: nothing was judged", path);
    return 0;
}

/* The unit the set's inputs are exact in, the default of --precision: fp32
 * when the index does not say; one it says but the checker does not know is
 * refused, not taken for fp32. 0, or 2. */
static int set_precision(const char *path, json_t *index, int *unit)
{
    json_t *p = json_object_get(index, "precision");
    *unit = p ? grade_unit_parse(json_string_value(p)) : GRADE_FP32;
    if (*unit < 0)
        return cli_error("check: '%s': \"precision\" '%s' is not one of fp64, fp32, tf32, bf16, fp16", path,
                         get_str(index, "precision"));
    return 0;
}

/* ---- judging ---- */

/* Elements of an expected shape; -1 when it is not an array of sizes. */
static int64_t shape_count(json_t *shape)
{
    if (!json_is_array(shape)) return -1;
    int64_t count = 1;
    for (size_t i = 0; i < json_array_size(shape); i++) count *= json_integer_value(json_array_get(shape, i));
    return count;
}

/* A regular file, a symbolic link followed: opening a FIFO would block the
 * gate, and a device is no one's result. 0, or 2. */
static int regular_file(const char *name, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return cli_error("%s: '%s': not a regular file (a result or reference is a .npy file)", name, path);
    return 0; /* a missing file is named by the reader */
}

/* Where outputs of shape `want` ([B,T,H,m]) beyond their threshold `thr`
 * went wrong (grade/where.h); *w stays all -1 otherwise. */
static void locate(const double *x, const double *r, json_t *want, double u, double err, double thr,
                   check_where *w)
{
    int64_t dim[4];
    for (size_t i = 0; i < 4; i++) dim[i] = json_integer_value(json_array_get(want, i));
    if (!(err <= thr) && json_array_size(want) == 4 && check_where_first_bad(x, r, dim, u, thr, w) && dim[1] > 0)
        *w = (check_where){.step = dim[1] - 1, .batch = 0, .head = 0, .seq = -1, .seq_step = -1}; /* summed in another order, the whole array is over: the last step */
}

/* The error of the result `file` (out.npy or state.npy in rdir) against the
 * reference `ref` (in cdir), in units u; both of shape `want`. *identical:
 * whether the two are equal bit for bit; *dtype: the result's format. A
 * result that is the reference file itself computed nothing and is refused.
 * With `w` (the outputs), an error above `thr` is located there. 0, or 2. */
static int error_of(const char *name, const char *rdir, const char *file, const char *cdir, const char *ref,
                    json_t *want, double u, double *err, int *identical, falcon_dtype *dtype, double thr,
                    check_where *w)
{
    char path[4600], refpath[4600];
    snprintf(path, sizeof path, "%s/%s", rdir, file);
    snprintf(refpath, sizeof refpath, "%s/%s", cdir, ref);
    if (falcon_same_file(path, refpath)) /* a symbolic or hard link to it */
        return cli_error("%s: '%s': is the reference '%s' itself (a link to it): a result is what the "
                         "implementation computed", name, path, refpath);
    double *x = NULL, *r = NULL;
    int64_t nx = 0, nr = 0;
    int rc = regular_file(name, path) || regular_file(name, refpath) ? 2 : 0;
    falcon_dtype ref_dtype;
    if (!rc) rc = check_read_array(name, path, path, want, 1, &x, &nx, dtype);
    if (!rc) rc = check_read_array(name, refpath, refpath, want, 1, &r, &nr, &ref_dtype);
    if (!rc) *err = gate_relerr(x, r, nx) / u;
    if (!rc) *identical = nx == nr && !memcmp(x, r, sizeof(double) * (size_t)nx);
    if (!rc && w) locate(x, r, want, u, *err, thr, w);
    free(x), free(r);
    return rc;
}

/* A case's results are out.npy, state.npy and the gradients (dq.npy, ...):
 * any other entry is a result under a name that is not read
 * ("state.npy.npy", "S.npy") or a leftover, and ignoring it could judge a
 * case without its state. 0, or 2. */
static int only_result_files(const char *name, const char *rdir)
{
    DIR *d = opendir(rdir);
    if (!d) return cli_error("%s: '%s': cannot open it as a directory: %s", name, rdir, strerror(errno));
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        const char *f = e->d_name;
        if (strcmp(f, ".") && strcmp(f, "..") && strcmp(f, "out.npy") && strcmp(f, "state.npy") &&
            !check_is_grad_file(f))
            rc = cli_error("%s: '%s/%s': not a result file (a case's results are out.npy, state.npy and the "
                           "gradients dq.npy ... dhist_v.npy): rename or remove it", name, rdir, f);
    }
    closedir(d);
    return rc;
}

/* The folder of a case's results, when it is there but cannot hold them:
 * not a directory, a symbolic link loop, unreadable, or the case's own
 * folder in the set (--results aliasing the set). A missing one is left to
 * the caller (a missing result). 0, or 2. */
static int result_folder(const char *name, const char *rdir, const char *cdir)
{
    struct stat st;
    if (stat(rdir, &st) != 0) {
        if (errno == ELOOP)
            return cli_error("%s: '%s': a symbolic link loop (it leads back to itself): a case's results are a "
                             "folder", name, rdir);
        if (errno == ENOENT && lstat(rdir, &st) == 0)
            return cli_error("%s: '%s': a symbolic link to nothing (what it names does not exist)", name, rdir);
        return errno == ENOENT ? 0 : cli_error("%s: '%s': cannot read it: %s", name, rdir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return cli_error("%s: '%s': not a directory (a case's results are a folder holding out.npy and, "
                         "optionally, state.npy)", name, rdir);
    if (falcon_same_file(rdir, cdir))
        return cli_error("%s: '%s' is the case's own folder '%s' in the set: results go in a folder of their own",
                         name, rdir, cdir);
    if (access(rdir, R_OK | X_OK) != 0)
        return cli_error("%s: '%s': cannot read it: %s", name, rdir, strerror(errno));
    return 0;
}

/* Whether the result `path` is there: 1, 0 when it does not exist, -1
 * after an error line when it cannot be looked at (its folder unreadable). */
static int result_there(const char *name, const char *path)
{
    struct stat st;
    if (lstat(path, &st) == 0) return 1;
    if (errno == ENOENT) return 0;
    cli_error("%s: '%s': cannot read it: %s", name, path, strerror(errno));
    return -1;
}

/* The errors of a case that is judged: out.npy is required; state.npy is
 * judged when present, and required when the case has no outputs (T = 0:
 * its only result is the final state, and an empty comparison is no
 * verdict) or with --require-state. A case within its thresholds passes
 * when they allow at most CHECK_MAX_RELERR, and is not judgeable
 * otherwise; one beyond them fails either way. 0, or 2. */
static int judge_results(const char *name, const char *rdir, const char *cdir, json_t *expected, double u,
                         int require_state, check_case *out)
{
    char path[4600];
    const char *missing = NULL;
    int rc = result_folder(name, rdir, cdir), there = 0;
    if (rc) return rc;
    snprintf(path, sizeof path, "%s/out.npy", rdir);
    if ((there = result_there(name, path)) < 0) return 2;
    if (!there) missing = "write it, or declare the case skipped in manifest.json";
    const int no_outputs = shape_count(json_object_get(expected, "out")) == 0;
    out->no_steps = json_integer_value(json_array_get(json_object_get(expected, "out"), 1)) == 0;
    if (!missing) {
        snprintf(path, sizeof path, "%s/state.npy", rdir);
        if ((there = result_there(name, path)) < 0) return 2;
        if (no_outputs && !there)
            missing = "the case has no steps (T = 0), so its result is the final state: write it, or declare "
                      "the case skipped in manifest.json";
        else if (require_state && !there)
            missing = "--require-state: every judged case's final state is judged: write it, or declare the case "
                      "skipped in manifest.json";
    }
    if (missing) return cli_error("%s: '%s': missing result (%s)", name, path, missing);
    rc = only_result_files(name, rdir);
    int same_out = 0, same_state = 1;
    falcon_dtype dtype = FALCON_DTYPE_F64, state_dtype;
    if (!rc)
        rc = error_of(name, rdir, "out.npy", cdir, "ref_out.npy", json_object_get(expected, "out"), u, &out->out_u,
                      &same_out, &dtype, out->thr_out_u, &out->where);
    if (!rc && there)
        rc = error_of(name, rdir, "state.npy", cdir, "ref_state.npy", json_object_get(expected, "state"), u,
                      &out->state_u, &same_state, &state_dtype, 0, NULL);
    if (rc) return rc;
    out->identical = same_out && same_state;
    out->dtype = dtype == FALCON_DTYPE_F16 ? "float16" : dtype == FALCON_DTYPE_F32 ? "float32" : "float64";
    /* Written so that a NaN error (none is expected) fails rather than passes. */
    const double ro = out->out_u / out->thr_out_u;
    const double rs = isnan(out->state_u) ? 0 : out->state_u / out->thr_state_u;
    out->ratio = ro > rs || isnan(ro) ? ro : rs;
    const int judgeable = out->thr_out_u * u <= CHECK_MAX_RELERR && out->thr_state_u * u <= CHECK_MAX_RELERR;
    out->status = !(ro <= 1 && rs <= 1) ? CHECK_FAIL : judgeable ? CHECK_PASS : CHECK_UNJUDGEABLE;
    return 0;
}

/* --require-grad: every gradient the case has is in its results (a CI run
 * of a backward pass must not pass on its forward results alone). 0, or 2. */
static int required_grads(const char *name, const char *rdir, const char *set, const check_case *out)
{
    if (!out->grad_ref)
        return cli_error("%s: --require-grad: '%s' has no reference gradients (export it with --grad)", name, set);
    for (int t = 0; t < CHECK_NGRAD; t++)
        if (out->grad[t].has && !out->grad[t].given)
            return cli_error("%s: '%s': missing gradient %s (--require-grad: write it, or declare the case skipped "
                             "in manifest.json)", name, rdir, gate_grad_name(t));
    return 0;
}

/* A packed case's first bad step as its sequence and the step there
 * (cu: case.json's offsets, [seqs + 1]). */
static void locate_sequence(json_t *cu, check_where *w)
{
    const size_t count = json_array_size(cu);
    for (size_t i = 0; w->step >= 0 && i + 1 < count; i++) {
        const int64_t t0 = json_integer_value(json_array_get(cu, i)), t1 = json_integer_value(json_array_get(cu, i + 1));
        if (w->step >= t0 && w->step < t1) w->seq = (int64_t)i, w->seq_step = w->step - t0;
    }
}

static int judge_case(const check_opts *o, json_t *row, json_t *skip, double u, check_case *out)
{
    const char *name = get_str(row, "name"), *dirname = get_str(row, "dir");
    memset(out, 0, sizeof *out);
    out->where = (check_where){.step = -1, .batch = -1, .head = -1, .seq = -1, .seq_step = -1};
    check_copy_text(out->name, sizeof out->name, name);
    check_copy_text(out->variant, sizeof out->variant, get_str(row, "variant"));
    check_copy_text(out->form, sizeof out->form, get_str(row, "form"));
    if (!falcon_plain_name(name) || !falcon_plain_name(dirname)) /* check_case_list refused it already */
        return cli_error("check: '%s/index.json': a case without a valid name or dir", o->cases);
    char cdir[4400], path[4600], rdir[4400];
    snprintf(cdir, sizeof cdir, "%s/%s", o->cases, dirname);
    snprintf(rdir, sizeof rdir, "%s/%s", o->results, name);
    snprintf(path, sizeof path, "%s/case.json", cdir);
    json_t *c = load_json(path, name);
    if (!c) return 2;
    /* The row groups the case in the report, case.json sets its thresholds:
     * they must describe one case. */
    static const char *const same[] = {"name", "variant", "form", "align", "phi", "decay"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        json_t *a = json_object_get(row, same[i]), *b = json_object_get(c, same[i]);
        if (a && !json_equal(a, b)) {
            json_decref(c);
            return cli_error("%s: '%s/index.json' and '%s' disagree on \"%s\" ('%s' and '%s')", name, o->cases,
                             path, same[i], get_str(row, same[i]), get_str(c, same[i]));
        }
    }
    check_copy_text(out->align, sizeof out->align, get_str(c, "align"));
    check_copy_text(out->decay, sizeof out->decay, get_str(c, "decay"));
    json_t *thr = json_object_get(c, "thresholds"), *expected = json_object_get(c, "expected");
    out->thr_out_u = json_number_value(json_object_get(thr, "out_u"));
    out->thr_state_u = json_number_value(json_object_get(thr, "state_u"));
    out->state_u = NAN;
    int rc = 0;
    const char *why = json_string_value(json_object_get(skip, name));
    if (why && exists(rdir)) {
        rc = cli_error("%s: '%s': declared skipped in manifest.json, but the results hold this case: "
                       "remove one of the two", name, rdir);
    } else if (why) {
        out->status = CHECK_SKIP;
        out->reason = why; /* the manifest outlives the report */
    } else if (!(out->thr_out_u > 0) || !(out->thr_state_u > 0) || !json_is_object(expected)) {
        rc = cli_error("%s: '%s': no thresholds or expected shapes", name, path);
    } else {
        rc = judge_results(name, rdir, cdir, expected, u, o->require_state, out);
        if (!rc) locate_sequence(json_object_get(c, "cu_seqlens"), &out->where);
        if (!rc) rc = check_grads(name, rdir, cdir, c, u, out);
        if (!rc && o->require_grad) rc = required_grads(name, rdir, o->cases, out);
        for (int t = 0; !rc && t < CHECK_NGRAD; t++) { /* a gradient beyond its threshold fails the case */
            const check_grad *g = &out->grad[t];
            const double ratio = g->given ? g->err_u / g->thr_u : 0;
            if (ratio > out->ratio || isnan(ratio)) out->ratio = ratio;
            if (g->given && g->status == CHECK_FAIL) out->status = CHECK_FAIL;
        }
    }
    json_decref(c);
    return rc;
}

/* A verdict needs a case judged: a run where every case read is not
 * judgeable in the unit (the rest skipped) passed nothing. 0, or 2. */
static int something_judged(const check_report *r)
{
    const check_tally t = check_count(r);
    if (t.judged) return 0;
    return cli_error("check: no case is judgeable in %s units: %d of %d cases have a threshold above 2^-4 "
                     "relative error there (%d skipped): nothing was judged; judge in a smaller unit "
                     "(--precision fp32)", r->unit, t.unjudgeable, r->count, t.skip);
}

/* Text into a report's temporary (the transaction commits it). */
static int write_report(falcon_outputs *tx, int slot, const char *what, char *text)
{
    if (!text) return cli_error("check: %s: out of memory", what);
    const int fd = falcon_outputs_fd(tx, slot);
    size_t done = 0, len = strlen(text);
    while (done < len) {
        const ssize_t n = write(fd, text + done, len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += (size_t)n;
    }
    free(text);
    return done == len ? 0 : cli_error("check: %s: cannot write '%s': %s", what, falcon_outputs_path(tx, slot),
                                         strerror(errno));
}

int falcon_grade_check_main(int argc, char **argv)
{
    check_opts o;
    int help, rc = parse_args(argc, argv, &o, &help);
    if (rc) return rc;
    if (help) {
        usage(stdout);
        return 0;
    }
    if (!is_dir(o.cases)) return cli_error("check: '%s': not a directory (a case set from falcon cases export)", o.cases);
    if (!is_dir(o.results)) return cli_error("check: --results '%s': not a directory", o.results);
    /* The reports are outputs of one transaction, checked before anything is
     * read: never a directory, a device, the case set, the results or each
     * other (src/outputs.c). */
    falcon_outputs *tx = NULL;
    int json_slot = -1, junit_slot = -1;
    const char *what = "";
    if ((o.json || o.junit) &&
        (falcon_outputs_begin(&tx) || falcon_outputs_input_tree(tx, "(the case set)", o.cases) ||
         falcon_outputs_input_tree(tx, "--results", o.results) ||
         (o.json && (what = "--json", falcon_outputs_file(tx, "--json", o.json, &json_slot))) ||
         (o.junit && (what = "--junit", falcon_outputs_file(tx, "--junit", o.junit, &junit_slot))))) {
        rc = cli_error("check: %s%s%s", what, *what ? ": " : "", falcon_last_error());
        falcon_outputs_abort(tx);
        return rc;
    }
    char path[4400];
    snprintf(path, sizeof path, "%s/index.json", o.cases);
    json_t *index = load_json(path, "check");
    if (!index) {
        falcon_outputs_abort(tx);
        return 2;
    }
    json_t *cases = json_object_get(index, "cases");
    if (strcmp(get_str(index, "format"), "falcon-cases") || json_integer_value(json_object_get(index, "version")) != 1 ||
        !json_is_array(cases)) {
        json_decref(index);
        falcon_outputs_abort(tx);
        return cli_error("check: '%s': not a falcon case set index (format falcon-cases, version 1)", path);
    }
    int set_unit;
    case_sets sets = {json_object(), json_object()};
    if (!sets.names || !sets.dirs) rc = cli_error("check: out of memory");
    if (rc || (rc = check_case_list(path, index, cases, &sets)) || (rc = set_precision(path, index, &set_unit)) ||
        (!o.trust_set && (rc = grade_verify_set(o.cases, index)))) {
        json_decref(sets.names), json_decref(sets.dirs);
        json_decref(index);
        falcon_outputs_abort(tx);
        return rc;
    }
    const grade_unit unit = (grade_unit)(o.unit >= 0 ? o.unit : set_unit);
    const double u = grade_unit_roundoff(unit);

    json_t *manifest = NULL, *skip = NULL;
    rc = read_manifest(&o, &sets, &manifest, &skip);
    if (!rc) rc = no_unlisted_cases(&o, &sets);
    if (!rc) rc = no_extra_results(&o, &sets);
    const size_t ncase = json_array_size(cases);
    check_case *results = calloc(ncase + 1, sizeof *results);
    if (!rc && !results) rc = cli_error("out of memory");
    for (size_t i = 0; i < ncase && !rc; i++) rc = judge_case(&o, json_array_get(cases, i), skip, u, &results[i]);
    check_invariance *inv = NULL;
    int ninv = 0;
    if (!rc) rc = check_invariance_groups(o.cases, o.results, index, skip, &inv, &ninv);
    check_report rep = {.cases_dir = o.cases, .results_dir = o.results, .unit = grade_unit_name(unit), .u = u,
                        .cases = results, .count = (int)ncase, .max_skipped = o.max_skipped, .inv = inv,
                        .ninv = ninv, .require_inv = o.require_inv};
    if (!rc) rc = something_judged(&rep);
    if (!rc && o.format == CHECK_FORMAT_LINES) check_print_lines(stdout, &rep, o.trust_set);
    if (!rc) {
        if (o.format == CHECK_FORMAT_TABLE) {
            printf("set %s: %s\n", o.cases,
                   o.trust_set ? "NOT verified (--trust-set): its thresholds and references are taken as they are"
                               : "verified: every file is what this version's export writes");
            check_print(stdout, &rep, o.verbose);
        }
        if (o.json) rc = write_report(tx, json_slot, "--json", check_json_text(&rep));
        if (!rc && o.junit) rc = write_report(tx, junit_slot, "--junit", check_junit_text(&rep));
        if (!rc && tx && falcon_outputs_commit(tx)) rc = cli_error("check: %s", falcon_last_error());
        tx = NULL; /* committed (or freed by the failed commit) */
        if (!rc) rc = check_failed(&rep) ? 1 : 0;
    }
    falcon_outputs_abort(tx);
    free(results);
    free(inv);
    json_decref(manifest);
    json_decref(sets.names), json_decref(sets.dirs);
    json_decref(index);
    return rc;
}
