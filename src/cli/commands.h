/*
 * commands.h - the lssar commands and orbits subcommands: one function per command, each in its
 * own src/cli/cmd_*.c file, `int cmd_NAME(int argc, char **argv)` with argv[0] = "NAME".
 * COMMANDS and ORBITS_SUBCOMMANDS are the tables main.c and cmd_orbits.c dispatch through; a new
 * command is a new file plus one line here.
 *
 * The second column says what a command does under `mpirun -np N` (docs/DISTRIBUTED.md): SHARED
 * commands split their work over the ranks (rank 0 alone writes files and prints); ALONE ones
 * refuse to start there, with a message (cli_alone_under_ranks, args.h); orbits leaves it to its
 * subcommands.
 */
#ifndef LSSAR_CLI_COMMANDS_H
#define LSSAR_CLI_COMMANDS_H

#define SHARED 1
#define ALONE 0

#define COMMANDS(X)                                                                         \
    X(train, SHARED, "train a GPT model (softmax, ssmax, lssa or lssar attention)")                 \
    X(eval, SHARED, "mean next-token loss of a model at several context lengths")                   \
    X(sample, ALONE, "generate tokens from a model")                                                \
    X(export, ALONE, "write a model as llm.c's GPT-2 file or a transformers GPT-2 folder")          \
    X(import, ALONE, "read an llm.c GPT-2 file or a transformers GPT-2 folder into a run")          \
    X(bench, ALONE, "time training steps, sgemm and attention kernels")                             \
    X(tokenize, ALONE, "GPT-2 or byte tokenizer: text <-> ids, or write a token shard")             \
    X(data, ALONE, "build token shards from the bundled corpora")                                   \
    X(symreg, SHARED, "symbolic regression on a CSV file")                                          \
    X(orbits, SHARED, "planetary-trajectory data, orbit world model and the Newton probe")           \
    X(extrapolate, SHARED, "train one model per attention kind and compare loss vs length")         \
    X(attnstats, ALONE, "attention entropy, sink weight and top-1 weight per layer and length")     \
    X(passkey, ALONE, "passkey retrieval at several lengths and depths")                            \
    X(downstream, ALONE, "zero-shot HellaSwag, PIQA, ARC, SciQ, Winogrande, LAMBADA accuracy")      \
    X(recipe, ALONE, "the paper's runs as one command: gpt2-124m, orbits-109m (GPU; --smoke on CPU)")  \
    X(reproduce, ALONE, "the whole comparison on 2 CPU cores: extrapolation, attnstats, passkey, orbits")

#define ORBITS_SUBCOMMANDS(X)                                                                  \
    X(simulate, SHARED, "sample systems and write 2-channel token shards, metadata, state, CSV")    \
    X(bench, ALONE, "simulation rows/s and the projected time for the published 10M systems")       \
    X(eval, ALONE, "next-token loss and accuracy of an orbit model")                                \
    X(probe, ALONE, "fine-tune a force regression head; write forces.csv for newton")               \
    X(oracle, ALONE, "k-NN oracle on the true state (the probe's control)")                         \
    X(newton, SHARED, "fit G m1 m2 / r^2 and m1 / r^2 to forces, per galaxy")                       \
    X(run, ALONE, "the whole pipeline: data, training, probe")

#define LSSAR_DECLARE_CMD(name, ranks, about) int cmd_##name(int argc, char **argv);
#define LSSAR_DECLARE_ORBITS_CMD(name, ranks, about) int cmd_orbits_##name(int argc, char **argv);
COMMANDS(LSSAR_DECLARE_CMD)
ORBITS_SUBCOMMANDS(LSSAR_DECLARE_ORBITS_CMD)
int cmd_data_synth(int argc, char **argv);  // `lssar data synth` (cmd_data_synth.c)
/* `lssar ARGV` in this process (argv[0] the command; main.c): how recipe and orbits run run the
   steps of their plans (src/exp/plan.h). */
int cli_run(int argc, char **argv);
#undef LSSAR_DECLARE_CMD
#undef LSSAR_DECLARE_ORBITS_CMD

#endif
