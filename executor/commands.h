/*
 * commands - egress-exec subcommands; main.c dispatches to these.
 * Each returns an exit code from enum exec_exit (executor/sandbox.h).
 */
#ifndef EGRESS_COMMANDS_H
#define EGRESS_COMMANDS_H

int cmd_run(int argc, char **argv);      /* executor/cmd_run.c: simple command or WorkUnit */
int cmd_check(int argc, char **argv);    /* executor/cmd_check.c: admission only */
int cmd_doctor(int argc, char **argv);   /* executor/doctor.c */
int cmd_cleanup(int argc, char **argv);  /* executor/cleanup.c: leftovers of killed runs */

#endif
