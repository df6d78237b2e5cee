/* sandbox: the confinement of every process a tool starts (DESIGN.md
 * section 7). A call runs under bubblewrap with new user, pid, ipc, uts and
 * cgroup namespaces and, unless tools.network, a new network namespace; the
 * host's /usr (and the /bin, /lib... links or directories beside it) and a
 * short list of /etc files read-only; a private /proc, a read-only /dev
 * with a size-capped /dev/shm, a size-capped /tmp, and a read-only root;
 * the run's workspace (SANDBOX_WORKSPACE, also HOME) and, when the run has
 * one, its project directory (TOOLS_WORKDIR, then the working directory),
 * bound from descriptors, as the only writable places; the directories of
 * the run's skills read-only at TOOLS_SKILLS/<name>, on a read-only tmpfs
 * of their own; no capabilities,
 * no new privileges, no further user namespaces, a new session, and a
 * process limit counted inside the call's own user namespace. When the
 * daemon is root, the call runs as tools.user (default nobody), so that
 * the process limit binds (the kernel does not count uid 0). Every process
 * of the call dies with it: the pid namespace ends when its first process
 * does. Nothing of the state directory, the skill sources, the mount,
 * /root or /home is visible.
 *
 * The probe decides once per configuration whether process tools can run
 * at all: it finds the program (tools.sandbox_program, else "bwrap" on
 * PATH) and starts one sandboxed shell that checks it is in user, pid and
 * (without network) net namespaces other than the daemon's, so that a
 * program that is not a sandbox is refused. Without a working sandbox the
 * process tools are not available (fail closed), unless the configuration
 * says tools.sandbox: none. */
#ifndef SKILLFS_SANDBOX_H
#define SKILLFS_SANDBOX_H

#include <stdbool.h>
#include <sys/types.h>

#include "config.h"
#include "proc.h"
#include "strlist.h"
#include "tools.h"

/* Where the workspace is inside the sandbox. */
#define SANDBOX_WORKSPACE "/workspace"
/* The PATH inside (and with mode none): programs are looked up there. */
#define SANDBOX_PATH "/usr/local/bin:/usr/bin:/bin"
/* A call given its own programs (sandbox_call.bin_names) finds them here,
 * and only here: a directory made for the call holding one link each. */
#define SANDBOX_BIN "/run/skillfs/bin"
/* Processes one call may have at once (its own user namespace's count). */
#define SANDBOX_NPROC 128
/* Size of the call's private /tmp. */
#define SANDBOX_TMP_BYTES (256L << 20)
/* Size of the call's /dev/shm (its own tmpfs). */
#define SANDBOX_SHM_BYTES (64L << 20)

struct sandbox {
	enum sandbox_mode mode;
	char *program;     /* the bwrap binary; NULL when mode none or unusable */
	char *prlimit;     /* sets the process limit inside; NULL likewise */
	bool network;
	bool switch_user;  /* the daemon is root: calls run as uid/gid */
	uid_t uid;
	gid_t gid;
	char *user;        /* tools.user as given, for messages */
	struct strlist env; /* tools.env, "NAME=value" */
	char *why;         /* NULL: usable; else why process tools cannot run */
	/* The programs the probe found on SANDBOX_PATH, as host paths that
	 * the sandbox shows at the same place (sandbox_find): */
	char *python;              /* python3, or NULL */
	struct strlist commands;   /* tools.terminal.commands found, in order */
	struct strlist command_paths; /* their paths, at the same index */
	struct strlist commands_missing; /* the ones not found */
};

/* Probes the machine for the configuration's tools settings and fills *out
 * (always, even when the sandbox is unusable: out->why then says why, in
 * words a user can act on, e.g. "bubblewrap (bwrap) not found on PATH:
 * install the bubblewrap package, or set tools.sandbox: none"), including
 * the programs found on SANDBOX_PATH (python3, tc->terminal_commands).
 * Returns 0, or -1 on ENOMEM (*out is then empty). */
int sandbox_probe(const struct tools_config *tc, struct sandbox *out);

/* Looks name up on the colon-separated directory list path (normally
 * SANDBOX_PATH) as execvp would, keeping only a program that the sandbox
 * shows at the same path: with mode bwrap, its real path must lie in /usr
 * or in one of the system directories bound beside it (a link out to
 * /opt does not count). Returns the malloc'd path found (the link, not
 * its target), or NULL with errno (ENOENT, EACCES, ENOMEM). */
char *sandbox_find(const char *name, const char *path, enum sandbox_mode mode);

/* Whether process tools may run: a working sandbox, or mode none. */
bool sandbox_usable(const struct sandbox *sb);

/* Deep copy; returns 0 or -1 on ENOMEM (dst empty). */
int sandbox_copy(struct sandbox *dst, const struct sandbox *src);

void sandbox_free(struct sandbox *sb);

/* A directory bound into the sandbox beside the workspace. */
struct sandbox_dir {
	int fd;           /* an open directory (O_PATH will do) */
	const char *path; /* its host path (mode none: the working directory) */
	const char *name; /* a skill's: its name, one path component */
};

/* One process of a tool call. */
struct sandbox_call {
	const char *const *argv;  /* the program inside (argv[0] looked up on
	                             the sandbox's PATH when it has no '/') */
	int workspace_fd;         /* an open directory: bound read-write at
	                             SANDBOX_WORKSPACE, the working directory
	                             unless there is a workdir; HOME */
	const char *workspace;    /* its host path: the working directory and
	                             HOME with mode none */
	bool pristine_home;       /* HOME an empty read-only directory and no
	                             user or system git config: what a
	                             patterned grant runs must not be steered
	                             by files the call itself could write */
	/* Optional (NULL-terminated, same length): the call's own programs,
	 * bare names (no '/').
	 * With mode bwrap, PATH is then SANDBOX_BIN alone, a directory
	 * holding a link named bin_names[i] to bin_paths[i] (host paths the
	 * sandbox shows, from sandbox_find) for each i. With mode none PATH
	 * stays SANDBOX_PATH (there is no private directory to make). */
	const char *const *bin_names;
	const char *const *bin_paths;
	/* NULL, or the run's project directory: bound read-write at
	 * TOOLS_WORKDIR, and the working directory. */
	const struct sandbox_dir *workdir;
	/* Skills' directories, bound read-only at TOOLS_SKILLS/<name> (at
	 * most TOOLS_SKILLS_MAX; names distinct and usable). */
	const struct sandbox_dir *skills;
	size_t nskills;
};

/* HOME of a call with pristine_home. */
#define SANDBOX_PRISTINE_HOME "/run/skillfs-home"

/* A call made ready to run: spec has argv, envp, cwd and the descriptors,
 * mounts and ids the child needs; the caller sets the timeout, output cap
 * and cancel hook, and runs it with proc_run. */
struct sandbox_run {
	struct proc_spec spec;
	struct strlist argv, env;
	const char **av, **ev;
	int *tree_fds;             /* detached copies of the directories */
	size_t ntrees;
	struct proc_mount *mounts; /* where the child attaches them */
	struct strlist targets;    /* ... their paths */
	int *keep_fds;             /* what bubblewrap binds from descriptors */
	size_t nkeep;
};

/* Prepares call under sb (usable): the bubblewrap command line (or
 * call->argv itself with mode none) and the clean environment (PATH,
 * HOME, LANG, TERM, tools.env). When the call switches user, each
 * directory (workspace, workdir, skills) reaches the child as a detached
 * mount attached in its own mount namespace (the path to it may not be
 * traversable by that user); otherwise bubblewrap binds it from the
 * descriptor. Skills' directories are bound read-only (files keep their
 * modes, so scripts stay executable). Returns 0, or -1 with a malloc'd
 * reason in *err (NULL on ENOMEM); run is then empty. sandbox_run_free
 * releases it either way. */
int sandbox_prepare(const struct sandbox *sb, const struct sandbox_call *call,
		    struct sandbox_run *run, char **err);

void sandbox_run_free(struct sandbox_run *run);

#endif
