#!/bin/bash
# The stability study as a Slurm job array, for clusters that run array jobs
# but not MPI jobs: each array task runs one shard of the streams into its own
# directory, then one dependent job merges them.
#
#   sbatch --array=0-15 study/slurm-stability.sh huge report/huge
#   (prints the array's job id, e.g. 1234; then, to merge when all are done:)
#   sbatch --dependency=afterok:1234 --wrap \
#     'build/falcon-study merge --out report/huge/merged report/huge/shard-*'
#
# Arguments: PROFILE (quick, full, huge, deep) and DIR; further arguments go
# to `falcon-study stability` as they are. Shard K of N is
# --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT (an array 0..N-1); the
# streams are dealt by estimated cost, so that shards finish together. A task
# that is requeued or rerun (sbatch --array=K ...) continues where it stopped
# (--resume: each stream's state is saved every 10 minutes). The huge profile
# has 30 streams: more than 30 tasks leave some empty. Its estimated cost is
# in `falcon-study stability --help`.
#SBATCH --job-name=falcon-stability
#SBATCH --cpus-per-task=2
#SBATCH --time=7-00:00:00
#SBATCH --requeue
#SBATCH --output=falcon-stability-%A_%a.out
set -eu
PROFILE=${1:?usage: sbatch --array=0-N-1 slurm-stability.sh PROFILE DIR [options]}
DIR=${2:?usage: sbatch --array=0-N-1 slurm-stability.sh PROFILE DIR [options]}
shift 2
K=${SLURM_ARRAY_TASK_ID:?not in a Slurm job array}
N=${SLURM_ARRAY_TASK_COUNT:?not in a Slurm job array}
STUDY=${FALCON_STUDY:-build/falcon-study}
exec "$STUDY" stability --profile "$PROFILE" --shard "$K/$N" --out "$DIR/shard-$K" \
    --threads "${SLURM_CPUS_PER_TASK:-1}" --checkpoint-every 600 --resume "$@"
