# lssar orbits run --scale laptop --attn softmax,lssar --pos rope --device cpu
lssar orbits simulate --out runs/reproduce/orbits/data --split train --systems 50000 --seed 1 --two-body --quiet --threads 1
lssar orbits simulate --out runs/reproduce/orbits/data --split val --systems 1000 --seed 2 --two-body --quiet --threads 1
lssar orbits simulate --out runs/reproduce/orbits/data --split force --systems 2000 --seed 3 --two-body --state --quiet --threads 1
lssar train --data runs/reproduce/orbits/data/train_000000.bin --val runs/reproduce/orbits/data/val_000000.bin --out runs/reproduce/orbits/softmax --attn softmax --pos rope --vocab 7003 --ordinal 7000 --wd 0 --eps 0.0001 --align 1000 --layers 2 --heads 1 --dim 64 --seq 255 --batch 8 --steps 6000 --lr 0.003 --device cpu --quiet --threads 1
lssar orbits eval --model runs/reproduce/orbits/softmax --data runs/reproduce/orbits/data --split val --systems 1000 --seq 255 --json runs/reproduce/orbits/softmax/eval.json --device cpu --quiet
lssar orbits probe --model runs/reproduce/orbits/softmax --data runs/reproduce/orbits/data --out runs/reproduce/orbits/softmax --steps 200 --batch 4 --lr 0.001 --keep 5000 --device cpu --quiet --threads 1
lssar train --data runs/reproduce/orbits/data/train_000000.bin --val runs/reproduce/orbits/data/val_000000.bin --out runs/reproduce/orbits/lssar --attn lssar --pos rope --vocab 7003 --ordinal 7000 --wd 0 --eps 0.0001 --align 1000 --layers 2 --heads 1 --dim 64 --seq 255 --batch 8 --steps 6000 --lr 0.003 --device cpu --quiet --threads 1
lssar orbits eval --model runs/reproduce/orbits/lssar --data runs/reproduce/orbits/data --split val --systems 1000 --seq 255 --json runs/reproduce/orbits/lssar/eval.json --device cpu --quiet
lssar orbits probe --model runs/reproduce/orbits/lssar --data runs/reproduce/orbits/data --out runs/reproduce/orbits/lssar --steps 200 --batch 4 --lr 0.001 --keep 5000 --device cpu --quiet --threads 1
lssar orbits oracle --data runs/reproduce/orbits/data --out runs/reproduce/orbits/oracle --keep 5000 --threads 1
lssar orbits newton --forces runs/reproduce/orbits/softmax/forces.csv --galaxies 5 --rows 1000 --iterations 40 --restarts 1 --json runs/reproduce/orbits/softmax/newton.json --quiet --threads 1
lssar orbits newton --forces runs/reproduce/orbits/lssar/forces.csv --galaxies 5 --rows 1000 --iterations 40 --restarts 1 --json runs/reproduce/orbits/lssar/newton.json --quiet --threads 1
lssar orbits newton --forces runs/reproduce/orbits/oracle/forces.csv --galaxies 5 --rows 1000 --iterations 40 --restarts 1 --json runs/reproduce/orbits/oracle/newton.json --quiet --threads 1
