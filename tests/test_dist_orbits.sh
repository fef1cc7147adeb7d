#!/usr/bin/env bash
# test_dist_orbits.sh - `mpirun -np N lssar orbits simulate` splits the systems over the ranks and
# rank 0 alone writes: 2 ranks and 3 (an uneven split), over several rounds, write the files of one
# process byte for byte (shards, systems, state, CSV, NAME.json: none holds a time or a host), and
# only rank 0 prints; a different --seed differs (the comparison can fail); rank 0 failing (an
# --out it cannot create; a disk full in the middle of the run) ends every rank with one error
# naming the file, and no hang.
suite=test_dist_orbits
source "$(dirname "$0")/dist_lib.sh"
MPI3="timeout 120 mpirun -np 3 --oversubscribe -x ASAN_OPTIONS -x UBSAN_OPTIONS"

# same A B: A and B hold the same file names, and every file is byte-identical
same() {
  local d1 d2 f
  d1=$(cd "$1" && ls) d2=$(cd "$2" && ls)
  [ -n "$d1" ] && [ "$d1" = "$d2" ] || { echo "files differ: [$d1] vs [$d2]"; return 1; }
  for f in $d1; do cmp "$1/$f" "$2/$f" || return 1; done
}

# With --state a round is 256 systems a rank: 800 systems are 512 + 288 on 2 ranks and 768 + 32
# (10, 11, 11) on 3; shards of 150 systems cross the rounds and the ranks' shares. The CSV run is
# one round: 12 + 13 systems on 2 ranks, 8 + 8 + 9 on 3.
sim() {   # sim LAUNCHER DIR: both runs into DIR
  $1 "$LSSAR" orbits simulate --out "$2" --systems 800 --seed 11 --state --shard-systems 150 --threads 1 --quiet &&
  $1 "$LSSAR" orbits simulate --out "$2" --split val --systems 25 --seed 4 --csv "$2/val.csv" --threads 1 --quiet
}
out=$(sim "" $tmp/one 2>&1); check $? "one process writes the reference files" "$out"
out=$(sim "$MPI" $tmp/two 2>&1); rc=$?
check $rc "2 ranks run" "$out"
out=$(same $tmp/one $tmp/two 2>&1); check $? "2 ranks: the files of one process, byte for byte ($(ls $tmp/one | wc -l) files)" "$out"
out=$(sim "$MPI3" $tmp/three 2>&1); rc=$?
check $rc "3 ranks run" "$out"
out=$(same $tmp/one $tmp/three 2>&1); check $? "3 ranks (uneven shares): the files of one process, byte for byte" "$out"

# the negative control: another seed, the same comparison fails
"$LSSAR" orbits simulate --out $tmp/seed12 --systems 800 --seed 12 --state --shard-systems 150 --threads 1 --quiet 2>/dev/null
mkdir -p $tmp/seed11 && cp $tmp/one/train* $tmp/seed11/
same $tmp/seed11 $tmp/seed12 >/dev/null 2>&1; check $((! $?)) "negative control: --seed 12 gives other files than --seed 11"

# rank 0 alone speaks: with every rank's stderr kept, one progress line at 100% and one report
out=$($MPI -x LSSAR_RANK_STDERR=1 "$LSSAR" orbits simulate --out $tmp/talk --systems 30 --seed 2 --threads 1 2>&1); rc=$?
n_prog=$(grep -c '^orbits simulate 30/30 (100.0%)' <<<"$out"); n_rep=$(grep -c '^lssar orbits simulate: 30 systems' <<<"$out")
[ $rc -eq 0 ] && [ "$n_prog" -eq 1 ] && [ "$n_rep" -eq 1 ]
check $? "only rank 0 prints progress and the report (got $n_prog and $n_rep lines)" "$out"

# rank 0 cannot create --out: one error from rank 0, every rank ends (no hang: timeout is rc 124)
touch $tmp/afile
out=$($MPI "$LSSAR" orbits simulate --out $tmp/afile/sub --systems 10 --quiet 2>&1); rc=$?
[ $rc -eq 1 ] && [ "$(grep -c 'lssar orbits simulate: rank 0: cannot create directory' <<<"$out")" -eq 1 ]
check $? "an --out rank 0 cannot create: one clear error (rc $rc)" "$out"

# disk full in the middle of the run (--csv /dev/full): rank 0's writer thread fails on round 1
# (CSV rounds are 512 systems on 2 ranks) and the ranks learn it at round 2's agreement
if [ -w /dev/full ]; then
  out=$("$LSSAR" orbits simulate --out $tmp/full1 --systems 20 --csv /dev/full --quiet 2>&1); rc=$?
  [ $rc -eq 1 ] && grep -q 'writing /dev/full failed' <<<"$out"
  check $? "one process, disk full: the writer thread's error names the file" "$out"
  out=$($MPI "$LSSAR" orbits simulate --out $tmp/full --systems 600 --csv /dev/full --threads 1 --quiet 2>&1); rc=$?
  [ $rc -eq 1 ] && [ "$(grep -c 'lssar orbits simulate: rank 0: writing /dev/full failed' <<<"$out")" -eq 1 ] &&
    [ ! -e $tmp/full/train.json ] && [ ! -e $tmp/full/train_systems.bin ]
  check $? "2 ranks, disk full mid-run: one clear error, no hang, no finished-looking output (rc $rc)" "$out"
else
  ok "# skip: disk-full checks (no writable /dev/full)"
fi
finish
