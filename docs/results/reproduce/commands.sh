#!/bin/sh
# The plan of `lssar reproduce`, one job per line, each after the jobs it needs (the
# runner runs 2 at a time; this file runs them one after another).
set -e
# extrapolate/softmax (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/extrapolate --attn softmax --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32,64 --seeds 3 --max-windows 32 --quiet
# extrapolate/ssmax (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/extrapolate --attn ssmax --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32,64 --seeds 3 --max-windows 32 --quiet
# extrapolate/sigmoid (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/extrapolate --attn sigmoid --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32,64 --seeds 3 --max-windows 32 --quiet
# extrapolate/relu (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/extrapolate --attn relu --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32,64 --seeds 3 --max-windows 32 --quiet
# extrapolate/lssa (~504 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/extrapolate --attn lssa --lssar-p 15 --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32,64 --seeds 3 --max-windows 32 --quiet
# extrapolate/lssar-p3 (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/extrapolate --attn lssar --lssar-p 3 --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32,64 --seeds 3 --max-windows 32 --quiet
# extrapolate/lssar-p15 (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/extrapolate --attn lssar --lssar-p 15 --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32,64 --seeds 3 --max-windows 32 --quiet
# extrapolate/all (~10 s), after extrapolate/softmax extrapolate/ssmax extrapolate/sigmoid extrapolate/relu extrapolate/lssa extrapolate/lssar-p3 extrapolate/lssar-p15
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/extrapolate --attn softmax,ssmax,sigmoid,relu,lssa,lssar --lssar-p 15,3 --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32,64 --seeds 3 --max-windows 32 --quiet
# extrapolate-d16/softmax (~150 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/extrapolate-d16 --attn softmax --no-plot --layers 2 --heads 4 --dim 64 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# extrapolate-d16/ssmax (~150 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/extrapolate-d16 --attn ssmax --no-plot --layers 2 --heads 4 --dim 64 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# extrapolate-d16/sigmoid (~150 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/extrapolate-d16 --attn sigmoid --no-plot --layers 2 --heads 4 --dim 64 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# extrapolate-d16/relu (~150 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/extrapolate-d16 --attn relu --no-plot --layers 2 --heads 4 --dim 64 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# extrapolate-d16/lssa (~180 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/extrapolate-d16 --attn lssa --lssar-p 15 --no-plot --layers 2 --heads 4 --dim 64 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# extrapolate-d16/lssar-p3 (~150 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/extrapolate-d16 --attn lssar --lssar-p 3 --no-plot --layers 2 --heads 4 --dim 64 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# extrapolate-d16/lssar-p15 (~150 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/extrapolate-d16 --attn lssar --lssar-p 15 --no-plot --layers 2 --heads 4 --dim 64 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# extrapolate-d16/all (~10 s), after extrapolate-d16/softmax extrapolate-d16/ssmax extrapolate-d16/sigmoid extrapolate-d16/relu extrapolate-d16/lssa extrapolate-d16/lssar-p3 extrapolate-d16/lssar-p15
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/extrapolate-d16 --attn softmax,ssmax,sigmoid,relu,lssa,lssar --lssar-p 15,3 --layers 2 --heads 4 --dim 64 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# attnstats (~150 s), after extrapolate/all
lssar attnstats --model runs/reproduce/extrapolate/softmax,runs/reproduce/extrapolate/softmax-s1,runs/reproduce/extrapolate/softmax-s2,runs/reproduce/extrapolate/ssmax,runs/reproduce/extrapolate/ssmax-s1,runs/reproduce/extrapolate/ssmax-s2,runs/reproduce/extrapolate/sigmoid,runs/reproduce/extrapolate/sigmoid-s1,runs/reproduce/extrapolate/sigmoid-s2,runs/reproduce/extrapolate/relu,runs/reproduce/extrapolate/relu-s1,runs/reproduce/extrapolate/relu-s2,runs/reproduce/extrapolate/lssa,runs/reproduce/extrapolate/lssa-s1,runs/reproduce/extrapolate/lssa-s2,runs/reproduce/extrapolate/lssar-p3,runs/reproduce/extrapolate/lssar-p3-s1,runs/reproduce/extrapolate/lssar-p3-s2,runs/reproduce/extrapolate/lssar-p15,runs/reproduce/extrapolate/lssar-p15-s1,runs/reproduce/extrapolate/lssar-p15-s2 --data ./data/demo-sotu-byte/val.bin --seq 128,512,2048 --windows 4 --rows 64 --json runs/reproduce/attnstats.json --plot runs/reproduce/attnstats.png --threads 1
# attnstats_d16 (~150 s), after extrapolate-d16/all
lssar attnstats --model runs/reproduce/extrapolate-d16/softmax,runs/reproduce/extrapolate-d16/softmax-s1,runs/reproduce/extrapolate-d16/softmax-s2,runs/reproduce/extrapolate-d16/ssmax,runs/reproduce/extrapolate-d16/ssmax-s1,runs/reproduce/extrapolate-d16/ssmax-s2,runs/reproduce/extrapolate-d16/sigmoid,runs/reproduce/extrapolate-d16/sigmoid-s1,runs/reproduce/extrapolate-d16/sigmoid-s2,runs/reproduce/extrapolate-d16/relu,runs/reproduce/extrapolate-d16/relu-s1,runs/reproduce/extrapolate-d16/relu-s2,runs/reproduce/extrapolate-d16/lssa,runs/reproduce/extrapolate-d16/lssa-s1,runs/reproduce/extrapolate-d16/lssa-s2,runs/reproduce/extrapolate-d16/lssar-p3,runs/reproduce/extrapolate-d16/lssar-p3-s1,runs/reproduce/extrapolate-d16/lssar-p3-s2,runs/reproduce/extrapolate-d16/lssar-p15,runs/reproduce/extrapolate-d16/lssar-p15-s1,runs/reproduce/extrapolate-d16/lssar-p15-s2 --data ./data/demo-sotu-byte/val.bin --seq 128,512,2048 --windows 4 --rows 64 --json runs/reproduce/attnstats_d16.json --plot runs/reproduce/attnstats_d16.png --threads 1
# headsize/d16 (~840 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/headsize/d16 --attn softmax,lssar --lssar-p 15 --layers 2 --heads 8 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# headsize/d32 (~840 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/headsize/d32 --attn softmax,lssar --lssar-p 15 --layers 2 --heads 4 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# headsize/d128 (~840 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/headsize/d128 --attn softmax,lssar --lssar-p 15 --layers 2 --heads 1 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# causes/d64-rope38 (~840 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/causes/d64-rope38 --attn softmax,lssar --lssar-p 15 --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet --rope-base 38
# causes/d16-temp64 (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/causes/d16-temp64 --attn lssar --lssar-p 15 --layers 2 --heads 8 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet --temp-d 64
# causes/d64-temp16 (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/causes/d64-temp16 --attn lssar --lssar-p 15 --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet --temp-d 16
# causes/d16-temp8 (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/causes/d16-temp8 --attn lssar --lssar-p 15 --layers 2 --heads 8 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet --temp-d 8
# causes/d64-temp256 (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/causes/d64-temp256 --attn lssar --lssar-p 15 --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet --temp-d 256
# ablation/softmax (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/ablation --attn softmax --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# ablation/softmax+cos (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/ablation --attn softmax+cos --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# ablation/softmax+cos+rw-p15 (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/ablation --attn softmax+cos+rw-p15 --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# ablation/softmax+rw-p15 (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/ablation --attn softmax+rw-p15 --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# ablation/ssmax (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/ablation --attn ssmax --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# ablation/ssmax+rw-p15 (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/ablation --attn ssmax+rw-p15 --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# ablation/lssa (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/ablation --attn lssa --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# ablation/lssar-p1 (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/ablation --attn lssar-p1 --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# ablation/lssar-p3 (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/ablation --attn lssar-p3 --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# ablation/lssar-p7 (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/ablation --attn lssar-p7 --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# ablation/lssar-p15 (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/ablation --attn lssar-p15 --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# ablation/lssar-p31 (~420 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/ablation --attn lssar-p31 --no-plot --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# ablation/all (~10 s), after ablation/softmax ablation/softmax+cos ablation/softmax+cos+rw-p15 ablation/softmax+rw-p15 ablation/ssmax ablation/ssmax+rw-p15 ablation/lssa ablation/lssar-p1 ablation/lssar-p3 ablation/lssar-p7 ablation/lssar-p15 ablation/lssar-p31
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/ablation --attn softmax,softmax+cos,softmax+cos+rw-p15,softmax+rw-p15,ssmax,ssmax+rw-p15,lssa,lssar-p1,lssar-p3,lssar-p7,lssar-p15,lssar-p31 --lssar-p 15 --layers 2 --heads 2 --dim 128 --seq 128 --batch 16 --steps 1000 --warmup 50 --lr 0.003 --seed 1337 --threads 1 --factors 1,2,4,8,16,32 --seeds 3 --max-windows 32 --quiet
# passkey-train/softmax (~1100 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/passkey --attn softmax --no-plot --layers 2 --heads 2 --dim 128 --seq 320 --batch 16 --steps 4000 --warmup 100 --lr 0.003 --seed 1337 --threads 1 --passkey-mix 0.75 --passkey-short --factors 1 --seeds 1 --max-windows 32 --quiet
# passkey-train/ssmax (~1100 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/passkey --attn ssmax --no-plot --layers 2 --heads 2 --dim 128 --seq 320 --batch 16 --steps 4000 --warmup 100 --lr 0.003 --seed 1337 --threads 1 --passkey-mix 0.75 --passkey-short --factors 1 --seeds 1 --max-windows 32 --quiet
# passkey-train/sigmoid (~1100 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/passkey --attn sigmoid --no-plot --layers 2 --heads 2 --dim 128 --seq 320 --batch 16 --steps 4000 --warmup 100 --lr 0.003 --seed 1337 --threads 1 --passkey-mix 0.75 --passkey-short --factors 1 --seeds 1 --max-windows 32 --quiet
# passkey-train/relu (~1100 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/passkey --attn relu --no-plot --layers 2 --heads 2 --dim 128 --seq 320 --batch 16 --steps 4000 --warmup 100 --lr 0.003 --seed 1337 --threads 1 --passkey-mix 0.75 --passkey-short --factors 1 --seeds 1 --max-windows 32 --quiet
# passkey-train/lssa (~1320 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/passkey --attn lssa --lssar-p 15 --no-plot --layers 2 --heads 2 --dim 128 --seq 320 --batch 16 --steps 4000 --warmup 100 --lr 0.003 --seed 1337 --threads 1 --passkey-mix 0.75 --passkey-short --factors 1 --seeds 1 --max-windows 32 --quiet
# passkey-train/lssar-p3 (~1100 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/passkey --attn lssar --lssar-p 3 --no-plot --layers 2 --heads 2 --dim 128 --seq 320 --batch 16 --steps 4000 --warmup 100 --lr 0.003 --seed 1337 --threads 1 --passkey-mix 0.75 --passkey-short --factors 1 --seeds 1 --max-windows 32 --quiet
# passkey-train/lssar-p15 (~1100 s)
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/passkey --attn lssar --lssar-p 15 --no-plot --layers 2 --heads 2 --dim 128 --seq 320 --batch 16 --steps 4000 --warmup 100 --lr 0.003 --seed 1337 --threads 1 --passkey-mix 0.75 --passkey-short --factors 1 --seeds 1 --max-windows 32 --quiet
# passkey-train/all (~10 s), after passkey-train/softmax passkey-train/ssmax passkey-train/sigmoid passkey-train/relu passkey-train/lssa passkey-train/lssar-p3 passkey-train/lssar-p15
lssar extrapolate --data ./data/demo-sotu-byte --out runs/reproduce/passkey --attn softmax,ssmax,sigmoid,relu,lssa,lssar --lssar-p 15,3 --layers 2 --heads 2 --dim 128 --seq 320 --batch 16 --steps 4000 --warmup 100 --lr 0.003 --seed 1337 --threads 1 --passkey-mix 0.75 --passkey-short --factors 1 --seeds 1 --max-windows 32 --quiet
# passkey/softmax (~40 s), after passkey-train/softmax
lssar passkey --model runs/reproduce/passkey/softmax --lengths 320,640,1280,2560,5120 --depths 5 --trials 10 --json runs/reproduce/passkey/passkey-softmax.json --plot runs/reproduce/passkey/passkey-softmax.png --threads 1
# passkey/ssmax (~40 s), after passkey-train/ssmax
lssar passkey --model runs/reproduce/passkey/ssmax --lengths 320,640,1280,2560,5120 --depths 5 --trials 10 --json runs/reproduce/passkey/passkey-ssmax.json --plot runs/reproduce/passkey/passkey-ssmax.png --threads 1
# passkey/sigmoid (~40 s), after passkey-train/sigmoid
lssar passkey --model runs/reproduce/passkey/sigmoid --lengths 320,640,1280,2560,5120 --depths 5 --trials 10 --json runs/reproduce/passkey/passkey-sigmoid.json --plot runs/reproduce/passkey/passkey-sigmoid.png --threads 1
# passkey/relu (~40 s), after passkey-train/relu
lssar passkey --model runs/reproduce/passkey/relu --lengths 320,640,1280,2560,5120 --depths 5 --trials 10 --json runs/reproduce/passkey/passkey-relu.json --plot runs/reproduce/passkey/passkey-relu.png --threads 1
# passkey/lssa (~40 s), after passkey-train/lssa
lssar passkey --model runs/reproduce/passkey/lssa --lengths 320,640,1280,2560,5120 --depths 5 --trials 10 --json runs/reproduce/passkey/passkey-lssa.json --plot runs/reproduce/passkey/passkey-lssa.png --threads 1
# passkey/lssar-p3 (~40 s), after passkey-train/lssar-p3
lssar passkey --model runs/reproduce/passkey/lssar-p3 --lengths 320,640,1280,2560,5120 --depths 5 --trials 10 --json runs/reproduce/passkey/passkey-lssar-p3.json --plot runs/reproduce/passkey/passkey-lssar-p3.png --threads 1
# passkey/lssar-p15 (~40 s), after passkey-train/lssar-p15
lssar passkey --model runs/reproduce/passkey/lssar-p15 --lengths 320,640,1280,2560,5120 --depths 5 --trials 10 --json runs/reproduce/passkey/passkey-lssar-p15.json --plot runs/reproduce/passkey/passkey-lssar-p15.png --threads 1
# passkey/lssa+lssar-p15 (~40 s), after passkey-train/lssa
lssar passkey --model runs/reproduce/passkey/lssa --lengths 320,640,1280,2560,5120 --depths 5 --trials 10 --attn lssar --p 15 --json runs/reproduce/passkey/passkey-lssa+lssar-p15.json --plot runs/reproduce/passkey/passkey-lssa+lssar-p15.png --threads 1
# orbits (~3100 s)
lssar orbits run --scale laptop --attn softmax,lssar --heads 1 --out runs/reproduce/orbits --threads 1
