#!/bin/bash
# The input rules table (docs/rules.md) as a test: every row is run.
#
#   verify/test_rules.sh build/falcon [docs/rules.md]
#
# Each row names a case and the text its error must contain. A case here is a
# recipe (a function case_<name> below) that makes the files it needs and sets
# the arguments of one `falcon` invocation; the row passes when that
# invocation exits with status 2, prints exactly one line on stderr,
# "falcon: error: ...", that contains the row's error text, prints nothing on
# stdout, and leaves no output (out*, state*, ck*, nor a temporary *.tmp-*).
# A row whose case is `api:SUITE/TEST` is a rule no file or option can break
# (only the library API can): the Criterion test must exist and a string
# literal in its body must contain the error text. The table and the recipes must match one to one: a row without a
# recipe, a recipe without a row, a row without error text all fail.
# Ends with "N passed, M failed"; exits non-zero if any failed.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TABLE=${2:-$ROOT/docs/rules.md}
TABLE=$(cd "$(dirname "$TABLE")" && pwd)/$(basename "$TABLE")
. "$(dirname "$0")/lib.sh"
test_begin "${1:-}" "verify/test_rules.sh path/to/falcon [docs/rules.md]"

# ---- data: one sequence T = 24, n = 5, m = 3; a batch B = 2, H = 3 ----
T=24 N=5 M=3 B=2 H=3
make_set() { # make_set PREFIX LEAD
    local p=$1 lead=$2
    $G rand "${p}q.npy" f8 "$lead,$N" 11
    $G rand "${p}k.npy" f8 "$lead,$N" 12
    $G rand "${p}v.npy" f8 "$lead,$M" 13
    $G rand "${p}gain.npy" f8 "$lead,$N" 14 --range 0.5 1.5
    $G rand "${p}beta.npy" f8 "$lead" 15 --range 0.2 1.2
    $G rand "${p}alpha.npy" f8 "$lead" 16 --range 0.7 1
}
make_set "" "$T"
make_set "b_" "$B,$T,$H"

batch_args() { # the batch, falcon1
    ARGS=(run --variant falcon1 --form recurrent --precision fp64 --q b_q.npy --k b_k.npy --v b_v.npy
          --beta b_beta.npy --alpha b_alpha.npy --out out.npy "$@")
}

# ---- recipes: case_<name> sets ARGS (and STDIN, a file piped to stdin) ----
# Files
case_missing_file() { run_args q=missing.npy; }
case_path_through_file() { echo plain >plain.txt; run_args k=plain.txt/x.npy; }
case_dangling_symlink() { ln -sf nowhere.npy dangling.npy; run_args v=dangling.npy; }
case_directory() { mkdir -p adir; run_args k=adir; }
case_empty_file() { : >empty.npy; run_args q=empty.npy; }
case_bad_magic() { printf 'NOTNUMPY but some text' >notnpy.npy; run_args q=notnpy.npy; }
case_truncated_prelude() { printf '\x93NUMPY\x01\x00\x40' >prelude.npy; run_args q=prelude.npy; }
case_version_4() { $G rand v4.npy f8 "$T,$N" 11 --version 4; run_args q=v4.npy; }
case_header_longer_than_file() { printf '\x93NUMPY\x01\x00\x00\x10{}' >hdrlen.npy; run_args q=hdrlen.npy; }
case_header_over_limit() {
    printf '\x93NUMPY\x02\x00\x00\x00\x00\x01' >hugehdr.npy
    head -c 4096 /dev/zero >>hugehdr.npy
    STDIN=hugehdr.npy
    run_args q=/dev/stdin
}
case_malformed_header() { raw_npy badhdr.npy 1 "{'descr': '<f8' 'fortran_order': False, 'shape': (24, 5), }"; run_args q=badhdr.npy; }
case_not_a_tuple() { raw_npy tuple.npy 1 "{'descr': '<f8', 'fortran_order': False, 'shape': (24), }" 192; run_args beta=tuple.npy; }
case_missing_key() { raw_npy nokey.npy 1 "{'descr': '<f8', 'shape': (24, 5), }" 960; run_args q=nokey.npy; }
case_unexpected_key() { raw_npy extra.npy 1 "{'descr': '<f8', 'fortran_order': False, 'shape': (24, 5), 'extra': 1}" 960; run_args q=extra.npy; }
case_repeated_key() { raw_npy twice.npy 1 "{'descr': '<f8', 'fortran_order': False, 'shape': (24, 5), 'shape': (24, 5)}" 960; run_args q=twice.npy; }
case_big_endian() { $G rand be_v.npy f8 "$T,$M" 13 --descr '>f8'; run_args v=be_v.npy; }
case_integer() { $G rand i4_beta.npy f8 "$T" 15 --descr '<i4'; run_args beta=i4_beta.npy; }
case_structured_dtype() { raw_npy rec.npy 1 "{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (24,), }" 192; run_args alpha=rec.npy; }
case_fortran_order() { $G rand fo_q.npy f8 "$T,$N" 11 --fortran; run_args q=fo_q.npy; }
case_too_many_dims() { raw_npy dims9.npy 1 "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }" 8; run_args q=dims9.npy; }
case_dim_overflow() { raw_npy dimbig.npy 1 "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999, 5), }"; run_args q=dimbig.npy; }
case_count_overflow() { raw_npy countbig.npy 1 "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"; run_args q=countbig.npy; }
case_truncated_data() { head -c -8 q.npy >trunc_q.npy; run_args q=trunc_q.npy; }
case_truncated_stream() { head -c -8 q.npy >trunc_q.npy; STDIN=trunc_q.npy; run_args q=/dev/stdin; }
case_trailing_bytes() { cp k.npy trail_k.npy; printf 'garbage' >>trail_k.npy; run_args k=trail_k.npy; }
case_f32_overflow() { $G rand huge_v.npy f8 "$T,$M" 13 --set 22=1e300; run_args v=huge_v.npy precision=fp32; }
# Shapes
case_q_ndim() { $G rand q3.npy f8 "$T,$N,1" 11; run_args q=q3.npy; }
case_shape_mismatch() { $G rand short_v.npy f8 "$((T - 1)),$M" 13; run_args v=short_v.npy; }
case_key_width() { $G rand k6.npy f8 "$T,6" 12; run_args k=k6.npy; }
case_batch_shape_mismatch() { $G rand bad_beta.npy f8 "$B,$T,2" 15 --range 0.2 1.2; batch_args; ARGS[14]=bad_beta.npy; }
case_n_zero() { $G rand q0.npy f8 "$T,0" 11; run_args q=q0.npy k=q0.npy; }
case_too_many_heads() { # T = 0: no data, only the sizes
    local h="{'descr': '<f8', 'fortran_order': False, 'shape': (100000, 0, 100000"
    raw_npy bh_q.npy 1 "$h, $N), }"; raw_npy bh_v.npy 1 "$h, $M), }"; raw_npy bh_s.npy 1 "$h), }"
    run_args q=bh_q.npy k=bh_q.npy v=bh_v.npy beta=bh_s.npy alpha=bh_s.npy
}
case_m_too_large() {
    $G rand q1.npy f8 "1,$N" 11; $G rand v1.npy f8 "1,16385" 13; $G rand b1.npy f8 1 15 --range 0.2 1
    run_args q=q1.npy k=q1.npy v=v1.npy beta=b1.npy alpha=b1.npy
}
# Values
case_nan() { $G rand nan_q.npy f8 "$T,$N" 11 --set 7=nan; run_args q=nan_q.npy; }
case_inf() { $G rand inf_k.npy f8 "$T,$N" 12 --set 15=-inf; run_args k=inf_k.npy; }
case_beta_range() { $G rand big_beta.npy f8 "$T" 15 --range 0.2 1.2 --set 4=3; run_args beta=big_beta.npy; }
case_beta_negative_ip() { $G rand neg_beta.npy f8 "$T" 15 --range 0.2 1.2 --set 2=-0.5; run_args beta=neg_beta.npy variant=falcon1a; }
case_alpha_zero() { $G rand zero_alpha.npy f8 "$T" 16 --range 0.7 1 --set 5=0; run_args alpha=zero_alpha.npy; }
case_alpha_above_one() { $G rand a15.npy f8 "$T" 16 --range 0.7 1 --set 6=1.5; run_args alpha=a15.npy; }
case_operand_range() { $G rand big_q.npy f8 "$T,$N" 11 --set 7=3.4e38; run_args q=big_q.npy precision=bf16 form=chunk; }
case_alpha_fp32_underflow() { $G rand ua.npy f8 "$T" 16 --range 0.7 1 --set 5=1e-50; run_args alpha=ua.npy precision=fp32; }
case_alpha_negative() { $G rand aneg.npy f8 "$T" 16 --range 0.7 1 --set 9=-0.25; run_args alpha=aneg.npy; }
case_gain_negative() { $G rand neg_gain.npy f8 "$T,$N" 14 --range 0.5 1.5 --set 1=-1; run_args variant=falcon2 --gain neg_gain.npy; }
case_batched_index() { $G rand bb.npy f8 "$B,$T,$H" 15 --range 0.2 1.2 --set $(((1 * T + 3) * H + 2))=5; batch_args; ARGS[14]=bb.npy; }
case_late_segment() { $G rand late_q.npy f8 "$T,$N" 11 --set $((22 * N))=nan; run_args q=late_q.npy --segment 4; }
case_step_size_underflow() { $G rand tiny_k.npy f8 "$T,$N" 17 --range 1e-13 2e-13; run_args k=tiny_k.npy precision=fp32 --eps 1e30; }
case_overflow() {
    $G rand ov_v.npy f8 "$T,$M" 13 --range 1e38 3e38; $G rand ov_b.npy f8 "$T" 15 --range 1e30 2e30
    run_args v=ov_v.npy beta=ov_b.npy variant=falcon1a precision=fp32
}
# Gradients (falcon grad)
grad_args() { # grad_args [args...]: falcon grad on the single sequence with dO.npy
    $G rand dO.npy f8 "$T,$M" 17
    ARGS=(grad --variant falcon1 --form recurrent --q q.npy --k k.npy --v v.npy --beta beta.npy --dO dO.npy
          --out outg "$@")
}
case_grad_missing_do() { ARGS=(grad --variant falcon1 --form recurrent --q q.npy --k k.npy --v v.npy --beta beta.npy --out outg); }
case_grad_do_shape() { grad_args; $G rand dOs.npy f8 "$((T - 1)),$M" 17; ARGS[14]=dOs.npy; }
case_grad_ds_shape() { $G rand dSw.npy f8 "$N,$M" 18; grad_args --dS dSw.npy; }
case_grad_do_nan() { grad_args; $G rand nan_dO.npy f8 "$T,$M" 17 --set 7=nan; ARGS[14]=nan_dO.npy; }
case_grad_ds_f32_fit() { $G rand dSb.npy f8 "$M,$N" 18 --set 4=1e300; grad_args --dS dSb.npy --precision fp32; }
case_grad_no_segment() { grad_args --segment 4; }
# Configuration and options
case_eps_negative() { run_args --eps -1; }
case_eps_nan() { run_args --eps nan; }
case_eps_fp32_underflow() { run_args precision=fp32 --eps 1e-50; }
case_window_range() { run_args variant=falcon3 --window 0; }
case_window_falcon1() { run_args --window 3; }
case_format_form() { run_args precision=tf32 form=recurrent; }
case_format_backend() { run_args precision=bf16 form=chunk --backend mpfr; }
case_chunk_range() { run_args form=chunk --chunk 5000; }
case_threads_range() { run_args --threads 2000; }
case_mpfr_bits_any_backend() { run_args --mpfr-bits 1000000000; }
case_mpfr_bits() { run_args --backend mpfr --mpfr-bits 10; }
case_segment_zero() { run_args --segment 0; }
case_not_an_integer() { run_args --window abc; }
case_number_junk() { run_args --chunk 12x; }
case_number_range() { run_args --threads 99999999999; }
case_unknown_value() { run_args --backend foo; }
case_unknown_option() { run_args --frobnicate 1; }
case_missing_value() { run_args --eps; }
case_repeated_option() { run_args --q q.npy; }
case_missing_required() { ARGS=(run --variant falcon1 --form recurrent --k k.npy --v v.npy --beta beta.npy --out out.npy); }
case_positional() { run_args extra; }
case_flag_with_value() { run_args --verbose=yes; }
case_empty_path() { run_args q=; }
case_gain_required() { run_args variant=falcon2; }
case_gain_unexpected() { run_args --gain gain.npy; }
case_unknown_command() { ARGS=(frobnicate); }
case_no_command() { ARGS=(); }
case_unavailable_backend() { # a backend this machine lacks (cuda without a GPU, ...), or skip
    local b
    for b in cuda avx512 avx2; do
        if ! "$FALCON" run --variant falcon1 --form recurrent --precision fp32 --backend "$b" --q q.npy \
            --k k.npy --v v.npy --beta beta.npy --out probe_out.npy >/dev/null 2>&1; then
            run_args precision=fp32 --backend "$b"
            EXPECT="backend $b is not available here"
            return 0
        fi
        rm -f probe_out.npy
    done
    return 1
}
# Outputs
case_out_missing_dir() { run_args out=nodir/out.npy; }
case_out_is_directory() { mkdir -p xdir; run_args out=xdir; }
case_out_is_device() { run_args out=/dev/null; }
case_out_symlink_to_device() { ln -sfn /dev/null nulllink.npy; run_args out=nulllink.npy; }
case_out_is_input() { cp q.npy qcopy.npy; run_args q=qcopy.npy out=qcopy.npy; }
case_outputs_alias() { run_args --state-out out.npy; }
case_checkpoint_out_foreign() { mkdir -p foreign_dir; echo mine >foreign_dir/notes.txt; run_args --checkpoint-out foreign_dir; }
case_checkpoint_out_dir_inside() { mkdir -p dirin_ck/S.npy; echo mine >dirin_ck/S.npy/notes.txt; run_args --checkpoint-out dirin_ck; }
case_checkpoint_out_no_manifest() { mkdir -p mine_ck; echo mine >mine_ck/S.npy; run_args --checkpoint-out mine_ck; }
case_checkpoint_out_in_input() { make_ck in_ck; run_args --checkpoint-in in_ck --checkpoint-out in_ck/sub; }
case_checkpoint_out_file() { : >plain_ck; run_args --state-out state.npy --checkpoint-out plain_ck; }
# Checkpoints
case_checkpoint_missing() { run_args --checkpoint-in nock; }
case_checkpoint_no_manifest() { mkdir -p empty_ck; run_args --checkpoint-in empty_ck; }
make_ck() { # make_ck DIR [SLOT=VALUE...] [OPTIONS...]: a checkpoint of the single sequence
    rm -rf "$1"
    local dir=$1
    shift
    run_args out=ckmade_out.npy "$@" --checkpoint-out "$dir"
    "$FALCON" "${ARGS[@]}" >/dev/null
    rm -f ckmade_out.npy
}
case_checkpoint_version() { make_ck v3_ck; printf 'format falcon-checkpoint 3\n' >v3_ck/falcon-checkpoint.txt; run_args --checkpoint-in v3_ck; }
case_checkpoint_other_heads() {
    rm -rf heads_ck; batch_args --checkpoint-out heads_ck; "$FALCON" "${ARGS[@]}" >/dev/null; rm -f out.npy
    run_args --checkpoint-in heads_ck
}
case_checkpoint_nan() { make_ck nan_ck; $G rand nan_ck/S.npy f8 "1,$M,$N" 1 --set 4=nan; run_args --checkpoint-in nan_ck; }
case_checkpoint_f32_range() { make_ck big_ck; $G rand big_ck/S.npy f8 "1,$M,$N" 1 --set 0=1e300; run_args precision=fp32 --checkpoint-in big_ck; }
case_checkpoint_hist_len() {
    make_ck hl_ck variant=falcon3 --window 3; $G rand hl_ck/hist_len.npy f8 1 1 --set 0=7
    run_args variant=falcon3 --window 3 --checkpoint-in hl_ck
}
case_checkpoint_scale() { make_ck sc_ck; $G rand sc_ck/scale.npy f8 1 1 --set 0=2; run_args --checkpoint-in sc_ck; }
case_checkpoint_missing_array() { make_ck miss_ck; rm miss_ck/hist_len.npy; run_args --checkpoint-in miss_ck; }
case_checkpoint_bad_array() { make_ck trunc_ck; head -c 200 trunc_ck/S.npy >trunc_ck/S.tmp; mv trunc_ck/S.tmp trunc_ck/S.npy; run_args --checkpoint-in trunc_ck; }
case_checkpoint_shape() { make_ck shape_ck; $G rand shape_ck/S.npy f8 "1,$M,4" 1; run_args --checkpoint-in shape_ck; }

# ---- the table ----
[ -f "$TABLE" ] || { echo "no table: $TABLE"; exit 1; }
# Rows: "| rule | `case` | `error text` |"; the header and separator rows have no backticked case.
mapfile -t ROWS < <(grep -E '^\| .* \| `[^`]+` \| ' "$TABLE")
[ "${#ROWS[@]}" -gt 0 ] || { echo "no rows in $TABLE"; exit 1; }

declare -A SEEN=()
for row in "${ROWS[@]}"; do
    IFS='|' read -r _ rule case text _ <<<"$row"
    rule=$(echo "$rule" | sed 's/^ *//; s/ *$//')
    case=$(echo "$case" | sed 's/^ *`//; s/` *$//')
    text=$(echo "$text" | sed 's/^ *`//; s/` *$//')
    name="$case: $rule"
    if [ -z "$text" ] || [[ $text == *'`'* ]]; then bad "$name" "no error text in the row"; continue; fi
    if [[ $case != api:* ]] && [ -n "${SEEN[$case]:-}" ]; then bad "$name" "case listed twice"; continue; fi
    SEEN[$case]=1

    if [[ $case == api:* ]]; then # api:SUITE/TEST: the Criterion test exists and checks the text
        suite=${case#api:}; suite=${suite%%/*}; test=${case##*/}
        file=$(grep -lE "^Test\\($suite, $test[,)]" "$ROOT"/verify/test-*.c | head -1 || true)
        if [ -z "$file" ]; then bad "$name" "no Criterion test $suite/$test"; continue; fi
        # Only the string literals of the body, after the Test( line: the text
        # must be one the test checks, not a word of its name or its code.
        body=$(awk -v s="Test($suite, $test" 'on && /^}/ { exit } on { print } index($0, s) == 1 { on = 1 }' "$file")
        literals=$(grep -o '"\([^"\\]\|\\.\)*"' <<<"$body" || true)
        if grep -qF -- "$text" <<<"$literals"; then ok "$name (checked by $suite/$test)"
        else bad "$name" "test $suite/$test does not check '$text'"; fi
        continue
    fi

    fn=case_${case//-/_}
    if ! declare -F "$fn" >/dev/null; then bad "$name" "no recipe $fn in $0"; continue; fi
    rm -rf out* state* ck*
    ARGS=() STDIN=/dev/null EXPECT=$text
    if ! "$fn"; then echo "skip $name (cannot be made on this machine)"; SEEN[$case]=skip; continue; fi
    rc=0
    if [ "$STDIN" = /dev/null ]; then
        "$FALCON" "${ARGS[@]}" </dev/null >stdout.txt 2>stderr.txt || rc=$?
    else # through a pipe: a stream, not a regular file
        cat "$STDIN" | "$FALCON" "${ARGS[@]}" >stdout.txt 2>stderr.txt || rc=$?
    fi
    lines=$(wc -l <stderr.txt)
    left=$(leftovers)
    if [ $rc -ne 2 ]; then bad "$name" "status $rc, expected 2 ($(cat stderr.txt))"
    elif [ "$lines" -ne 1 ] || ! grep -q '^falcon: error: ' stderr.txt; then
        bad "$name" "expected one 'falcon: error:' line, got: $(cat stderr.txt)"
    elif ! grep -qF -- "$EXPECT" stderr.txt; then bad "$name" "message lacks '$EXPECT': $(cat stderr.txt)"
    elif [ -s stdout.txt ]; then bad "$name" "printed on stdout: $(cat stdout.txt)"
    elif [ -n "$left" ]; then bad "$name" "left behind: $left"
    else ok "$name -> $(cat stderr.txt)"
    fi
done

# Every recipe is a row of the table.
for fn in $(declare -F | awk '{ print $3 }' | grep '^case_'); do
    case=${fn#case_}
    case=${case//_/-}
    if [ -z "${SEEN[$case]:-}" ]; then bad "$case" "recipe $fn has no row in the table"; fi
done

test_end
