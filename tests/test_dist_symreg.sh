#!/usr/bin/env bash
# test_dist_symreg.sh - `lssar symreg` and `lssar orbits newton` under mpirun spread the restarts
# (newton: galaxies x restarts) over the ranks and give exactly the result of one process:
#   1. symreg --restarts 3 on 2 ranks and on 3 ranks (2 OpenMP threads each): stdout, the --json
#      file and the iteration/evaluation counts equal one process's (times aside);
#   2. the same on an exact law, where an early stop drops the restarts after the exact fit;
#   3. orbits newton, 3 galaxies x 2 restarts, on 2 and 3 ranks: the report and the JSON equal
#      one process's (times aside);
#   4. the comparison can fail: another seed gives another front;
#   5. rank 0 alone writes --json (each rank run in its own folder, the path relative);
#   6. a CSV that only rank 0 can read: one error naming rank 1 and the file, no hang
#      (symreg and orbits newton).
# Binary: $LSSAR_BIN, else build/lssar. Ends with "test_dist_symreg: N passed, M failed".
suite=test_dist_symreg
source "$(dirname "$0")/dist_lib.sh"
MPI3=${MPI/-np 2/-np 3}
t_start=$SECONDS

# a law with noise (no exact fit: every restart runs) and an exact one (early stop)
awk 'BEGIN{srand(3); print "x,y,F"; for(i=0;i<200;i++){x=0.5+2*rand(); y=0.5+2*rand();
  printf "%.12g,%.12g,%.12g\n", x, y, 2.5*x*x/y + 0.3*sin(3*x)}}' > "$tmp/law.csv"
awk 'BEGIN{srand(4); print "x,y,F"; for(i=0;i<200;i++){x=0.5+2*rand(); y=0.5+2*rand();
  printf "%.12g,%.12g,%.12g\n", x, y, 2.5*x*x/y}}' > "$tmp/exact.csv"
awk 'BEGIN{srand(1); print "r,m1,m2,F_pred,F_true"; G=39.4784176044;
  for(i=0;i<300;i++){r=0.5+29.5*rand(); m1=exp(log(1e-7)+rand()*log(1e4)); m2=0.5+4.5*rand(); F=G*m1*m2/(r*r);
  printf "%.12g,%.12g,%.12g,%.12g,%.12g\n", r, m1, m2, F*(1+0.05*(rand()-0.5)), F}}' > "$tmp/forces.csv"
S="--iterations 4 --populations 3 --population-size 20 --cycles 40 --threads 1 --quiet"

# JSON files equal but for the listed keys (times), at any depth
json_same() {
  python3 - "$@" <<'EOF'
import json, sys
drop = set(sys.argv[3].split(","))
def clean(v):
    if isinstance(v, dict): return {k: clean(x) for k, x in v.items() if k not in drop}
    if isinstance(v, list): return [clean(x) for x in v]
    return v
a, b = (clean(json.load(open(f))) for f in sys.argv[1:3])
sys.exit(0 if a == b and a else 1)
EOF
}
counts() { grep -oE '^symreg: [0-9]+ iterations in|, [0-9.e+]+ evaluations' "$1" | tr '\n' ' '; }
untimed() { sed -E 's/[0-9.]+ s\)/T s)/g' "$1"; }   # newton's "(..., 0.1 s)" and "law audit (0.3 s)"

# ---- 1. symreg, every restart run
F="symreg --csv $tmp/law.csv --target F --restarts 3 --seed 5 $S"
"$LSSAR" $F --json "$tmp/s1.json" > "$tmp/s1.out" 2> "$tmp/s1.err"
check $? "symreg --restarts 3, one process" "$(cat "$tmp/s1.err")"
out=$($MPI "$LSSAR" $F --json "$tmp/s2.json" 2> "$tmp/s2.err" > "$tmp/s2.out"); rc=$?
cmp -s "$tmp/s1.out" "$tmp/s2.out" && json_same "$tmp/s1.json" "$tmp/s2.json" seconds,node_evals_per_s
check $((rc || $?)) "2 ranks: the same front, selection and JSON as one process" "$(cat "$tmp/s2.err" "$tmp/s2.out")"
[ -n "$(counts "$tmp/s1.err")" ] && [ "$(counts "$tmp/s1.err")" = "$(counts "$tmp/s2.err")" ]
check $? "2 ranks: the same iterations and evaluations ($(counts "$tmp/s2.err"))" "$(cat "$tmp/s1.err" "$tmp/s2.err")"
F3=${F/--threads 1/--threads 2}
$MPI3 "$LSSAR" $F3 --json "$tmp/s3.json" > "$tmp/s3.out" 2> "$tmp/s3.err"; rc=$?
cmp -s "$tmp/s1.out" "$tmp/s3.out" && json_same "$tmp/s1.json" "$tmp/s3.json" seconds,node_evals_per_s &&
  [ "$(counts "$tmp/s1.err")" = "$(counts "$tmp/s3.err")" ]
check $((rc || $?)) "3 ranks of 2 threads: the same as one process" "$(cat "$tmp/s3.err" "$tmp/s3.out")"

# ---- 2. an exact law: the restarts after the exact fit are dropped as one process skips them
F="symreg --csv $tmp/exact.csv --target F --restarts 4 --seed 2 ${S/--iterations 4/--iterations 8}"
"$LSSAR" $F > "$tmp/e1.out" 2> "$tmp/e1.err"; r1=$?
$MPI3 "$LSSAR" $F > "$tmp/e3.out" 2> "$tmp/e3.err"; rc=$?
cmp -s "$tmp/e1.out" "$tmp/e3.out" && [ "$(counts "$tmp/e1.err")" = "$(counts "$tmp/e3.err")" ] &&
  grep -q 'e-[12][0-9] .*selected' "$tmp/e1.out"
check $((r1 || rc || $?)) "early stop on an exact law: 3 ranks = one process ($(counts "$tmp/e3.err"))" "$(cat "$tmp/e1.out" "$tmp/e3.err" "$tmp/e3.out")"

# ---- 3. orbits newton: galaxies x restarts over the ranks
N="orbits newton --forces $tmp/forces.csv --galaxies 3 --rows 100 --iterations 3 --restarts 2 --populations 3 --cycles 30 --threads 1 --seed 3 --quiet"
"$LSSAR" $N --json "$tmp/n1.json" > "$tmp/n1.out" 2> "$tmp/n1.err"
check $? "orbits newton, 3 galaxies x 2 restarts, one process" "$(cat "$tmp/n1.err")"
for np in 2 3; do
  M=$MPI; [ $np = 3 ] && M=$MPI3
  $M "$LSSAR" $N --json "$tmp/n$np.json" > "$tmp/n$np.out" 2> "$tmp/n$np.err"; rc=$?
  [ "$(untimed "$tmp/n1.out")" = "$(untimed "$tmp/n$np.out")" ] && grep -q 'law audit' "$tmp/n1.out" &&
    json_same "$tmp/n1.json" "$tmp/n$np.json" seconds
  check $((rc || $?)) "orbits newton on $np ranks: the same laws, audit and JSON as one process" "$(cat "$tmp/n$np.err"; diff "$tmp/n1.out" "$tmp/n$np.out")"
done

# ---- 4. the comparison can fail
"$LSSAR" symreg --csv "$tmp/law.csv" --target F --restarts 3 --seed 6 $S > "$tmp/s6.out" 2>/dev/null
! cmp -s "$tmp/s1.out" "$tmp/s6.out"
check $? "(the comparison can fail: seed 6 gives another front than seed 5)"

# ---- 5. rank 0 alone writes the JSON (each rank in its own folder, the same relative path)
mkdir -p "$tmp/d0" "$tmp/d1"
out=$($MPI bash -c "cd $tmp/d\$OMPI_COMM_WORLD_RANK && exec $LSSAR symreg --csv $tmp/law.csv --target F --restarts 2 --seed 5 $S --json j.json" 2>&1); rc=$?
[ $rc -eq 0 ] && [ -s "$tmp/d0/j.json" ] && [ ! -e "$tmp/d1/j.json" ]
check $? "rank 0 alone writes --json" "$out"

# ---- 6. a file only rank 0 can read: one clear error naming rank 1, no hang
cp "$tmp/law.csv" "$tmp/d0/only0.csv"
cp "$tmp/forces.csv" "$tmp/d0/forces0.csv"
t0=$SECONDS
out=$($MPI bash -c "cd $tmp/d\$OMPI_COMM_WORLD_RANK && exec $LSSAR symreg --csv only0.csv --target F --restarts 2 $S" 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(grep -c 'rank 1: .*only0.csv' <<<"$out")" = 1 ]
check $? "symreg: a CSV rank 1 cannot read: every rank stops, one error naming rank 1 ($((SECONDS - t0)) s)" "$out"
t0=$SECONDS
out=$($MPI bash -c "cd $tmp/d\$OMPI_COMM_WORLD_RANK && exec $LSSAR orbits newton --forces forces0.csv --galaxies 2 --rows 50 --iterations 1 --restarts 2 --populations 2 --cycles 10 --threads 1 --quiet" 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(grep -c 'rank 1: .*forces0.csv' <<<"$out")" = 1 ]
check $? "orbits newton: forces.csv rank 1 cannot read: one error naming rank 1 ($((SECONDS - t0)) s)" "$out"

echo "($suite took $((SECONDS - t_start)) s)"
finish
