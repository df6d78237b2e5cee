/* proc: run a program with stdin bytes, a timeout and an output cap, in its
 * own process group, and collect its output. Used by the command model
 * provider and by the process tools. */
#ifndef SKILLFS_PROC_H
#define SKILLFS_PROC_H

#include <stdbool.h>
#include <stddef.h>

#include <sys/types.h>

#include "buf.h"

/* Limits applied in the child when proc_spec.rlimits is set. RLIMIT_CPU is
 * the timeout rounded up to seconds, plus one. RLIMIT_NPROC is not set: it
 * counts every process of the user (and is not enforced for root), so it
 * cannot bound one command. */
#define PROC_RLIMIT_FSIZE (64L * 1024 * 1024)
#define PROC_RLIMIT_AS (2048L * 1024 * 1024)
#define PROC_RLIMIT_NOFILE 1024L

/* A detached copy of a directory tree (open_tree(2) with OPEN_TREE_CLONE)
 * that the child attaches at target, in a private mount namespace of its
 * own, before it drops to spec->uid: how a program run as another user
 * reaches a directory whose path that user could not traverse. */
struct proc_mount {
	int tree_fd;
	const char *target; /* made (mode 0755) on the tmpfs at spec->mount_stage */
};

struct proc_spec {
	const char *const *argv; /* argv[0] is looked up in PATH when it has no '/' */
	const char *cwd;         /* NULL = inherit */
	const char *const *envp; /* NULL = inherit the daemon's environment */
	const char *stdin_data;  /* may be NULL (stdin is then /dev/null) */
	size_t stdin_len;
	int timeout_ms;          /* > 0; the whole process group is killed after it */
	size_t output_max;       /* cap for stdout and for stderr, each; > 0 */
	bool merge_stderr;       /* stderr goes into out (tools), not err */
	bool rlimits;            /* apply CPU/file-size/memory/fd rlimits, no core */
	/* Descriptors (>= 3) the program inherits at the same numbers. */
	const int *keep_fds;
	size_t nkeep_fds;
	/* Attached in the child's own mount namespace, on a fresh tmpfs
	 * mounted at mount_stage (root only; none when nmounts is 0). */
	const struct proc_mount *mounts;
	size_t nmounts;
	const char *mount_stage;
	/* Run as this uid and gid with no supplementary groups (the daemon
	 * must be root). */
	bool set_ids;
	uid_t uid;
	gid_t gid;
	/* Optional: polled about every 100 ms while the program runs; when it
	 * returns true the group is killed and res->cancelled is set. */
	bool (*cancel)(void *arg);
	void *cancel_arg;
};

struct proc_result {
	struct buf out;
	struct buf err;
	int exit_code;      /* exit status, or -1 when killed by a signal */
	int signal;         /* the signal that ended it, or 0 */
	bool timed_out;
	bool cancelled;     /* spec->cancel asked for it to stop */
	bool out_truncated; /* output over output_max: the rest was discarded */
	bool err_truncated;
};

/* Runs the program to completion (or timeout). Returns 0 when it ran (look
 * at exit_code/timed_out), or -1 with errno when it could not be started
 * (res->err then holds a one-line reason such as "cannot execute foo: No
 * such file or directory"); *res is filled in either case and must be
 * released with proc_result_free.
 * The program gets its own process group; when the leader exits, times out
 * or is cancelled, the whole group is killed with SIGKILL and the leader is
 * reaped with waitpid on its pid (no SIGCHLD handler is needed, but SIGCHLD
 * must not be set to SIG_IGN). Signal dispositions and the signal mask are
 * reset to defaults in the child, and it inherits no descriptor other than
 * 0, 1, 2 and spec->keep_fds. Thread-safe: SIGPIPE is blocked only in the calling thread
 * while it runs. */
int proc_run(const struct proc_spec *spec, struct proc_result *res);

/* A program started ahead of its input. */
struct proc;

/* Starts spec's program as proc_run does, with its stdin a pipe that stays
 * empty until proc_finish: the program loads while the caller gets its
 * input ready (spec->stdin_data is not used here). Returns the started
 * program, or NULL with errno and res->err holding the reason; *res must
 * be released with proc_result_free either way. */
struct proc *proc_start(const struct proc_spec *spec, struct proc_result *res);

/* Feeds spec->stdin_data to p and runs it to completion as proc_run does
 * (the timeout counts from now; spec->argv is only used in messages).
 * Frees p. Returns 0 when it ran, -1 with errno for an invalid spec. */
int proc_finish(struct proc *p, const struct proc_spec *spec, struct proc_result *res);

/* Kills a started program's process group and reaps it; frees p (NULL is
 * a no-op). */
void proc_discard(struct proc *p);

/* Releases the buffers of a result; it is then empty and reusable. */
void proc_result_free(struct proc_result *res);

/* Resolves a program name like execvp would (a name with '/' is taken as
 * is; else each directory of PATH from envp, or the daemon's PATH when
 * envp is NULL). Returns a malloc'd path, or NULL with errno (ENOENT,
 * EACCES, ENOMEM). */
char *proc_find_program(const char *name, const char *const *envp);

#endif
