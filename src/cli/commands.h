/*
 * commands.h - the lssar commands and orbits subcommands: one function per command, each in its
 * own src/cli/cmd_*.c file, `int cmd_NAME(int argc, char **argv)` with argv[0] = "NAME".
 * COMMANDS and ORBITS_SUBCOMMANDS are the tables main.c and cmd_orbits.c dispatch through; a new
 * command is a new file plus one line here.
 */
#ifndef LSSAR_CLI_COMMANDS_H
#define LSSAR_CLI_COMMANDS_H

#define COMMANDS(X)                                                                         \
    X(train, "train a GPT model (softmax, ssmax, lssa or lssar attention)")                \
    X(eval, "mean next-token loss of a model at several context lengths")                  \
    X(sample, "generate tokens from a model")                                              \
    X(bench, "time training steps, sgemm and attention kernels")                           \
    X(tokenize, "GPT-2 or byte tokenizer: text <-> ids, or write a token shard")           \
    X(data, "build token shards from the bundled corpora")                                 \
    X(symreg, "symbolic regression on a CSV file")                                         \
    X(orbits, "planetary-trajectory data, orbit world model and the Newton probe")         \
    X(extrapolate, "train one model per attention kind and compare loss vs length")        \
    X(attnstats, "attention entropy, sink weight and top-1 weight per layer and length")   \
    X(passkey, "passkey retrieval at several lengths and depths")                          \
    X(downstream, "zero-shot HellaSwag, PIQA, ARC, SciQ, Winogrande, LAMBADA accuracy")

#define ORBITS_SUBCOMMANDS(X)                                                                  \
    X(simulate, "sample systems and write 2-channel token shards, metadata, state, CSV")     \
    X(bench, "simulation rows/s and the projected time for the published 10M systems")       \
    X(eval, "next-token loss and accuracy of an orbit model")                                 \
    X(probe, "fine-tune a force regression head; write forces.csv for newton")                \
    X(oracle, "k-NN oracle on the true state (the probe's control)")                          \
    X(newton, "fit G m1 m2 / r^2 and m1 / r^2 to forces, per galaxy")                         \
    X(run, "the whole pipeline: data, training, probe")

#define LSSAR_DECLARE_CMD(name, about) int cmd_##name(int argc, char **argv);
#define LSSAR_DECLARE_ORBITS_CMD(name, about) int cmd_orbits_##name(int argc, char **argv);
COMMANDS(LSSAR_DECLARE_CMD)
ORBITS_SUBCOMMANDS(LSSAR_DECLARE_ORBITS_CMD)
int cmd_data_synth(int argc, char **argv);  // `lssar data synth` (cmd_data_synth.c)
#undef LSSAR_DECLARE_CMD
#undef LSSAR_DECLARE_ORBITS_CMD

#endif
