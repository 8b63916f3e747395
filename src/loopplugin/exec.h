/*
 * exec: run a system tool (blkid, mkfs.ext4, e2fsck, ...) without a shell.
 *
 * The driver calls a handful of well-known programs with arguments built from CSI requests; a
 * shell would turn a crafted volume name or mount flag into a command. posix_spawn() starts the
 * program directly (safe from a multi-threaded gRPC server, unlike a bare fork()), with stdin
 * from /dev/null and stdout+stderr captured together, so a failure can quote the tool's words.
 *
 * Programs are looked up in /usr/sbin, /sbin, /usr/bin, /bin only: the driver runs with whatever
 * PATH its container has, and these tools live in the system directories.
 */
#ifndef KCSI_LOOPPLUGIN_EXEC_H
#define KCSI_LOOPPLUGIN_EXEC_H

#include <stdbool.h>

struct strbuf;

/*
 * Runs argv[0] (a bare program name) with argv (NULL-terminated), waits for it and returns its
 * exit status (0..255), or -1 when it could not be started or died from a signal (the reason is
 * in out). When out is not NULL the program's output is appended to it (at most 64 KiB kept).
 */
int lp_exec(const char *const argv[], struct strbuf *out);
/* True when the program is installed in one of the system directories. */
bool lp_have_program(const char *name);

#endif
