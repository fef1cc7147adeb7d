#!/usr/bin/env bash
# test_dist_netns.sh - data-parallel training across two "hosts" on one machine: two network
# namespaces A and B joined by a veth pair (10.213.X.1 in A, 10.213.X.2 in B, loopback up in both),
# mpirun started in A with one slot on each address, so that Open MPI launches rank 0 in A and,
# through a generated stand-in for ssh (--mca plm_rsh_agent), its daemon and rank 1 in B; MPI
# traffic (the BTL and the runtime's OOB channel) only over TCP on the veth:
#   1. rank 0 runs in namespace A and rank 1 in namespace B;
#   2. a 2-rank `lssar train` across the veth gives bit for bit the model.safetensors (and
#      trainer.safetensors) of one process with --accum 2, and its traffic crossed the veth;
#   3. --zero 1 across the veth gives the same checkpoint;
#   4. rank 1 (in B) killed with SIGKILL: mpirun exits non-zero within a bounded time, naming rank 1.
# The two namespaces share the file system (and the hostname), so --data and --out need no copying:
# like several machines with a shared file system (docs/DISTRIBUTED.md).
# Needs root, `ip` (iproute2) and a kernel that allows network namespaces and veth pairs; where the
# namespaces or the veth pair cannot be made it prints "test_dist_netns: SKIP (reason)" and exits 0.
# Every other failure (no mpirun, a build without MPI, a failed run) fails.
# Binary: $LSSAR_BIN, else build/lssar; the killed rank: its test build with the hooks of
# tests/hooks.c ($LSSAR_HOOKS_BIN, else tests/lssar-hooks beside it). Ends with
# "test_dist_netns: N passed, M failed".
cd "$(dirname "$0")/.."
LSSAR=$(realpath "${LSSAR_BIN:-build/lssar}")
HOOKS=$(realpath -m "${LSSAR_HOOKS_BIN:-$(dirname "$LSSAR")/tests/lssar-hooks}")
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "$2" ] && printf '%s\n' "$2" | tail -8 | sed 's/^/    /'; }
check() { if [ "$1" -eq 0 ]; then ok "$2"; else bad "$2" "$3"; fi; }
skip() { echo "test_dist_netns: SKIP ($1)"; echo "test_dist_netns: 0 passed, 0 failed"; exit 0; }
for b in "$LSSAR" "$HOOKS"; do
  if [ ! -x "$b" ]; then echo "test_dist_netns: $b is not built"; echo "test_dist_netns: 0 passed, 1 failed"; exit 1; fi
done

# ---- the namespaces: only here may the test skip
[ "$(id -u)" -eq 0 ] || skip "not root: network namespaces need CAP_SYS_ADMIN"
command -v ip >/dev/null || skip "no ip command (iproute2)"
nsA=lssar_dnA_$$; nsB=lssar_dnB_$$
vA=lsdA$$; vB=lsdB$$                            # interface names: at most 15 characters
X=$(( $$ % 250 + 1 ))
net=10.213.$X.0/24; ipA=10.213.$X.1; ipB=10.213.$X.2
tmp=
cleanup() {
  local ns p
  for ns in "$nsA" "$nsB"; do
    [ -e "/run/netns/$ns" ] || continue
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done   # only ours live there
    ip netns del "$ns" 2>/dev/null                # takes its end of the veth pair with it
  done
  ip link del "$vA" 2>/dev/null                   # if the pair never reached a namespace
  [ -n "$tmp" ] && rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
err=$(ip netns add "$nsA" 2>&1 && ip netns add "$nsB" 2>&1) || skip "cannot create a network namespace: $(head -1 <<<"$err")"
err=$(ip link add "$vA" type veth peer name "$vB" 2>&1) || skip "cannot create a veth pair: $(head -1 <<<"$err")"
err=$(ip link set "$vA" netns "$nsA" 2>&1 && ip link set "$vB" netns "$nsB" 2>&1) || skip "cannot move a veth end into a namespace: $(head -1 <<<"$err")"
# from here on, a failure is a failure
out=$(ip -n "$nsA" addr add "$ipA/24" dev "$vA" 2>&1 && ip -n "$nsB" addr add "$ipB/24" dev "$vB" 2>&1 \
      && ip -n "$nsA" link set lo up 2>&1 && ip -n "$nsB" link set lo up 2>&1 \
      && ip -n "$nsA" link set "$vA" up 2>&1 && ip -n "$nsB" link set "$vB" up 2>&1); rc=$?
check $rc "namespaces $nsA ($ipA) and $nsB ($ipB) joined by the veth pair $vA - $vB" "$out"

if ! command -v mpirun >/dev/null || ! grep -q 'mpi=1' "$(dirname "$LSSAR")/build-flags" 2>/dev/null; then
  echo "test_dist_netns: mpirun or an MPI build is missing (scripts/deps.sh installs Open MPI; make MPI=1)"
  echo "test_dist_netns: $pass passed, $((fail + 1)) failed"; exit 1
fi
tmp=$(mktemp -d /tmp/lssar_dist_netns_XXXXXX)

# The stand-in for ssh: Open MPI runs `AGENT [options] HOST orted ...` (the command as words of one
# shell line, as ssh would send them); B's address runs it in namespace B, A's locally (mpirun
# normally starts A's rank itself, seeing that address is one of its own).
cat > "$tmp/netns-ssh" <<EOF
#!/bin/sh
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host=\$1; shift
case "\$host" in
  $ipB) exec ip netns exec $nsB sh -c "\$*" ;;
  $ipA) exec sh -c "\$*" ;;
  *) echo "netns-ssh: unknown host \$host" >&2; exit 255 ;;
esac
EOF
chmod +x "$tmp/netns-ssh"

# Open MPI as root (CI containers); a launcher's environment (this test run inside srun or mpirun)
# would make mpirun use that launcher instead of the agent
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
for v in $(compgen -e | grep -E '^(SLURM_|PMIX_|PMI_|OMPI_COMM_WORLD_|OMPI_UNIVERSE_)'); do unset "$v"; done
# each "host" believes it has the machine's cores to itself: --bind-to none, or both ranks would be
# pinned to core 0
MPI=(timeout 120 ip netns exec "$nsA" mpirun -np 2 --host "$ipA:1,$ipB:1" --bind-to none
     --mca plm rsh --mca plm_rsh_agent "$tmp/netns-ssh"
     --mca btl tcp,self --mca btl_tcp_if_include "$net" --mca oob_tcp_if_include "$net"
     -x OMPI_MCA_btl_vader_single_copy_mechanism -x ASAN_OPTIONS)
vstat() { ip netns exec "$nsA" cat "/sys/class/net/$vA/statistics/$1_bytes"; }

# ---- 1. where the ranks run
out=$("${MPI[@]}" sh -c 'echo "rank $OMPI_COMM_WORLD_RANK in $(ip netns identify $$)"' 2>&1); rc=$?
[ $rc -eq 0 ] && grep -qx "rank 0 in $nsA" <<<"$out" && grep -qx "rank 1 in $nsB" <<<"$out"
check $? "mpirun in $nsA starts rank 0 in $nsA and rank 1 in $nsB" "$out"

# ---- 2. the same weights as one process with --accum 2
# a model of about 7 blocks of GPT_NORM_BLOCK floats, so that each rank owns a real part
"$LSSAR" data synth --tokens 20000 --alphabet 15 --out "$tmp/train.bin" >/dev/null 2>&1
F="--data $tmp/train.bin --layers 2 --heads 2 --dim 128 --vocab 16 --seq 32 --batch 4 --steps 8 --lr 3e-3 --seed 7 --threads 1 --quiet"
same() { cmp "$1/model.safetensors" "$2/model.safetensors" && cmp "$1/trainer.safetensors" "$2/trainer.safetensors"; }
out=$("$LSSAR" train $F --accum 2 --out "$tmp/one" 2>&1)
check $? "reference: 1 process, --accum 2" "$out"
tx0=$(vstat tx); rx0=$(vstat rx)
out=$("${MPI[@]}" "$LSSAR" train $F --out "$tmp/two" 2>&1); rc=$?
tx=$(( $(vstat tx) - tx0 )); rx=$(( $(vstat rx) - rx0 ))
out2=$(same "$tmp/one" "$tmp/two" 2>&1); r2=$?
check $((rc || r2)) "2 ranks across the veth (exit $rc) = 1 process x accum 2, bit for bit (model.safetensors, trainer.safetensors)" "$out$out2"
wbytes=$(stat -c %s "$tmp/one/model.safetensors" 2>/dev/null || echo 0)
[ "$wbytes" -gt 0 ] && [ $tx -gt "$wbytes" ] && [ $rx -gt "$wbytes" ]
check $? "the gradients crossed the veth: $tx bytes out of $nsA, $rx in (the weights: $wbytes bytes)"

# ---- 3. ZeRO-1 across the veth
out=$("${MPI[@]}" "$LSSAR" train $F --zero 1 --out "$tmp/z" 2>&1); rc=$?
out2=$(same "$tmp/one" "$tmp/z" 2>&1); r2=$?
check $((rc || r2)) "--zero 1 across the veth = 1 process x accum 2, bit for bit" "$out$out2"

# ---- 4. rank 1, in the other namespace, killed
t0=$SECONDS
out=$("${MPI[@]}" -x LSSAR_TEST_KILL_RANK=1 -x LSSAR_TEST_KILL_AT_STEP=4 "$HOOKS" train $F --save-every 2 --out "$tmp/k" 2>&1); rc=$?
dt=$((SECONDS - t0))
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $dt -lt 60 ] && grep -q 'rank 1' <<<"$out"
check $? "rank 1 in $nsB killed at step 4: mpirun exits ($rc) in ${dt} s, naming rank 1" "$out"

echo "test_dist_netns: $pass passed, $fail failed"
[ $fail -eq 0 ]
