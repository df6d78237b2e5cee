#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "buf.h"
#include "proc.h"

#define TOOL_PATH SANDBOX_PATH
#define PROBE_TIMEOUT_MS 10000

/* The top-level system directories beside /usr: merged-/usr links, or
 * directories of their own on older systems. */
static const char *const system_dirs[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};

/* What of /etc a program may need, and nothing that is a secret (no
 * shadow, no keys, no credentials). Missing ones are skipped. */
static const char *const etc_files[] = {
	"alternatives", "bash.bashrc", "ca-certificates", "debian_version",
	"gitconfig", "group", "host.conf", "hostname", "hosts", "inputrc",
	"issue", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "locale.alias",
	"localtime", "mime.types", "nsswitch.conf", "os-release", "passwd",
	"profile", "protocols", "python3", "services", "ssl", "terminfo",
	"timezone", "wgetrc",
};

bool sandbox_usable(const struct sandbox *sb)
{
	return sb && !sb->why && (sb->mode == SANDBOX_NONE || sb->program);
}

void sandbox_free(struct sandbox *sb)
{
	if (!sb)
		return;
	free(sb->program);
	free(sb->prlimit);
	free(sb->user);
	free(sb->why);
	free(sb->python);
	strlist_free(&sb->env);
	strlist_free(&sb->commands);
	strlist_free(&sb->command_paths);
	strlist_free(&sb->commands_missing);
	memset(sb, 0, sizeof *sb);
}

static int dup_opt(char **dst, const char *src)
{
	*dst = NULL;
	return src && !(*dst = strdup(src)) ? -1 : 0;
}

int sandbox_copy(struct sandbox *dst, const struct sandbox *src)
{
	memset(dst, 0, sizeof *dst);
	dst->mode = src->mode;
	dst->network = src->network;
	dst->switch_user = src->switch_user;
	dst->uid = src->uid;
	dst->gid = src->gid;
	if (dup_opt(&dst->program, src->program) < 0 || dup_opt(&dst->prlimit, src->prlimit) < 0 ||
	    dup_opt(&dst->user, src->user) < 0 || dup_opt(&dst->why, src->why) < 0 ||
	    dup_opt(&dst->python, src->python) < 0 ||
	    strlist_extend(&dst->env, &src->env) < 0 ||
	    strlist_extend(&dst->commands, &src->commands) < 0 ||
	    strlist_extend(&dst->command_paths, &src->command_paths) < 0 ||
	    strlist_extend(&dst->commands_missing, &src->commands_missing) < 0) {
		sandbox_free(dst);
		return -1;
	}
	return 0;
}

/* Whether the sandbox shows the host file at path at the same place: its
 * real path is in /usr or in a system directory bound beside it. */
static bool shown_inside(const char *path)
{
	char *real = realpath(path, NULL);
	if (!real)
		return false;
	bool ok = strncmp(real, "/usr/", 5) == 0;
	for (size_t i = 0; !ok && i < sizeof system_dirs / sizeof *system_dirs; i++) {
		char dir[64];
		struct stat st;
		int n = snprintf(dir, sizeof dir, "/%s/", system_dirs[i]);
		/* A link (merged /usr) was resolved by realpath already. */
		ok = strncmp(real, dir, (size_t)n) == 0 && lstat(dir, &st) == 0 &&
		     S_ISDIR(st.st_mode);
	}
	free(real);
	return ok;
}

char *sandbox_find(const char *name, const char *path, enum sandbox_mode mode)
{
	if (!name || !*name || strchr(name, '/') || !path) {
		errno = ENOENT;
		return NULL;
	}
	int err = ENOENT;
	struct buf cand = {0};
	for (const char *p = path;;) {
		const char *colon = strchrnul(p, ':');
		size_t dlen = (size_t)(colon - p);
		struct stat st;
		cand.len = 0;
		if (dlen && p[0] == '/') { /* a relative entry means nothing inside */
			if (buf_append(&cand, p, dlen) < 0 || buf_printf(&cand, "/%s", name) < 0) {
				buf_free(&cand);
				errno = ENOMEM;
				return NULL;
			}
			if (stat(cand.data, &st) == 0 && S_ISREG(st.st_mode)) {
				if (access(cand.data, X_OK) < 0)
					err = EACCES;
				else if (mode == SANDBOX_NONE || shown_inside(cand.data))
					return buf_steal(&cand, NULL);
			}
		}
		if (!*colon)
			break;
		p = colon + 1;
	}
	buf_free(&cand);
	errno = err;
	return NULL;
}

/* The programs the tools start by name: python3 and the terminal's. */
static int find_programs(const struct tools_config *tc, struct sandbox *sb)
{
	sb->python = sandbox_find("python3", TOOL_PATH, sb->mode);
	if (!sb->python && errno == ENOMEM)
		return -1;
	for (size_t i = 0; i < tc->terminal_commands.n; i++) {
		const char *name = tc->terminal_commands.items[i];
		char *found = sandbox_find(name, TOOL_PATH, sb->mode);
		if (!found && errno == ENOMEM)
			return -1;
		int rc = found ? strlist_add(&sb->commands, name)
			       : strlist_add(&sb->commands_missing, name);
		if (rc < 0 || (found && strlist_add_owned(&sb->command_paths, found) < 0)) {
			if (rc < 0)
				free(found);
			return -1;
		}
	}
	return 0;
}

static int set_why(struct sandbox *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int set_why(struct sandbox *sb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	struct buf b = {0};
	int rc = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	free(sb->why);
	sb->why = rc < 0 ? NULL : buf_steal(&b, NULL);
	buf_free(&b);
	return sb->why ? 0 : -1;
}

/* The user calls run as when the daemon is root. */
static int resolve_user(struct sandbox *sb)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	const char *name = sb->user;
	int e = getpwnam_r(name, &pw, buf, sizeof buf, &res);
	if (!res) {
		/* A number is taken as a uid (and its own gid). */
		char *end;
		errno = 0;
		long v = strtol(name, &end, 10);
		if (*name && !*end && !errno && v > 0 && v < INT_MAX) {
			sb->uid = (uid_t)v;
			sb->gid = (gid_t)v;
			return 0;
		}
		return set_why(sb, "tools.user '%s' does not exist%s%s: process tools run "
			       "as that user when skillfs runs as root; name an "
			       "unprivileged user", name, e ? ": " : "", e ? strerror(e) : "");
	}
	if (pw.pw_uid == 0 || pw.pw_gid == 0)
		return set_why(sb, "tools.user '%s' is root: process tools must run as an "
			       "unprivileged user (a process limit does not bind root)", name);
	sb->uid = pw.pw_uid;
	sb->gid = pw.pw_gid;
	return 0;
}

static int add(struct strlist *l, const char *a)
{
	return strlist_add(l, a);
}

static int add2(struct strlist *l, const char *a, const char *b)
{
	return strlist_add(l, a) < 0 || strlist_add(l, b) < 0 ? -1 : 0;
}

static int add3(struct strlist *l, const char *a, const char *b, const char *c)
{
	return add2(l, a, b) < 0 || strlist_add(l, c) < 0 ? -1 : 0;
}

/* The system directories, read-only, and the links beside /usr. */
static int add_system(struct strlist *l)
{
	if (add3(l, "--ro-bind", "/usr", "/usr") < 0)
		return -1;
	for (size_t i = 0; i < sizeof system_dirs / sizeof *system_dirs; i++) {
		char path[64], target[PATH_MAX];
		struct stat st;
		snprintf(path, sizeof path, "/%s", system_dirs[i]);
		if (lstat(path, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(path, target, sizeof target - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			if (add3(l, "--symlink", target, path) < 0)
				return -1;
		} else if (S_ISDIR(st.st_mode) && add3(l, "--ro-bind", path, path) < 0) {
			return -1;
		}
	}
	for (size_t i = 0; i < sizeof etc_files / sizeof *etc_files; i++) {
		char path[64];
		snprintf(path, sizeof path, "/etc/%s", etc_files[i]);
		if (access(path, F_OK) == 0 && add3(l, "--ro-bind-try", path, path) < 0)
			return -1;
	}
	return 0;
}

/* How one directory is named to bubblewrap: "--bind-fd N" or "--bind
 * STAGED" (read-only: "--ro-bind-fd", "--ro-bind"), at dest. */
struct bind {
	const char *kind;
	char src[64];
	char *dest;
};

/* The command line and environment of call; binds[0..nbinds) are its
 * directories (the workspace first, when it has one). */
static int command(const struct sandbox *sb, const struct sandbox_call *call,
		   const struct bind *binds, size_t nbinds,
		   struct strlist *argv, struct strlist *env)
{
	bool none = sb->mode == SANDBOX_NONE;
	bool pristine = call->pristine_home && !none;
	bool own_bin = !none && call->bin_names;
	int rc = add(env, own_bin ? "PATH=" SANDBOX_BIN : "PATH=" TOOL_PATH);
	if (rc == 0)
		rc = strlist_addf(env, "HOME=%s",
				  pristine ? SANDBOX_PRISTINE_HOME
				  : none && call->workspace ? call->workspace : SANDBOX_WORKSPACE);
	/* git reads ~/.gitconfig and /etc/gitconfig, and a config can name
	 * programs for it to run (diff.external, core.pager...). */
	if (rc == 0 && pristine)
		rc = add3(env, "XDG_CONFIG_HOME=" SANDBOX_PRISTINE_HOME, "GIT_CONFIG_NOSYSTEM=1",
			  "GIT_CONFIG_GLOBAL=/dev/null");
	if (rc == 0)
		rc = add2(env, "LANG=C.UTF-8", "TERM=dumb");
	if (rc == 0)
		rc = strlist_extend(env, &sb->env);
	if (rc == 0 && none) {
		for (size_t i = 0; rc == 0 && call->argv[i]; i++)
			rc = add(argv, call->argv[i]);
		goto out;
	}
	char tmp[32], shm[32];
	snprintf(tmp, sizeof tmp, "%ld", SANDBOX_TMP_BYTES);
	snprintf(shm, sizeof shm, "%ld", SANDBOX_SHM_BYTES);
	char nproc[48];
	snprintf(nproc, sizeof nproc, "--nproc=%d:%d", SANDBOX_NPROC, SANDBOX_NPROC);
	if (rc == 0)
		rc = add(argv, sb->program);
	/* Namespaces: a user namespace (implied when not root, asked for
	 * when root), and no further ones inside. */
	const char *const flags[] = {"--unshare-user", "--unshare-pid", "--unshare-ipc",
		"--unshare-uts", "--unshare-cgroup-try", "--disable-userns",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--hostname", "skillfs"};
	for (size_t i = 0; rc == 0 && i < sizeof flags / sizeof *flags; i++)
		rc = add(argv, flags[i]);
	if (rc == 0 && !sb->network)
		rc = add(argv, "--unshare-net");
	else if (rc == 0 && access("/etc/resolv.conf", F_OK) == 0)
		rc = add3(argv, "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf");
	if (rc == 0)
		rc = add_system(argv);
	if (rc == 0)
		rc = add2(argv, "--proc", "/proc") < 0 || add2(argv, "--dev", "/dev") < 0 ||
		     add2(argv, "--size", shm) < 0 || add2(argv, "--tmpfs", "/dev/shm") < 0 ||
		     add2(argv, "--size", tmp) < 0 || add2(argv, "--tmpfs", "/tmp") < 0 ? -1 : 0;
	if (rc == 0 && (!nbinds || strcmp(binds[0].dest, SANDBOX_WORKSPACE) != 0))
		rc = add2(argv, "--dir", SANDBOX_WORKSPACE);
	/* The skills' directories sit on an empty tmpfs of their own, made
	 * read-only once they are bound, so nothing can be added beside
	 * them either. */
	if (rc == 0)
		rc = add2(argv, "--tmpfs", TOOLS_SKILLS);
	for (size_t i = 0; rc == 0 && i < nbinds; i++)
		rc = add3(argv, binds[i].kind, binds[i].src, binds[i].dest);
	if (rc == 0 && own_bin)
		rc = add2(argv, "--dir", SANDBOX_BIN);
	for (size_t i = 0; rc == 0 && own_bin && call->bin_names[i]; i++)
		rc = add2(argv, "--symlink", call->bin_paths[i]) < 0 ||
		     strlist_addf(argv, SANDBOX_BIN "/%s", call->bin_names[i]) < 0 ? -1 : 0;
	if (rc == 0 && pristine)
		rc = add2(argv, "--dir", SANDBOX_PRISTINE_HOME);
	if (rc == 0)
		rc = add2(argv, "--remount-ro", TOOLS_SKILLS);
	/* bubblewrap's own root and /dev are tmpfs without a size (half the
	 * host's memory each), writable by the call: read-only once built.
	 * The mounts on them (/tmp, /dev/shm, the workspace, the workdir, the
	 * device nodes) keep their own flags. */
	if (rc == 0)
		rc = add2(argv, "--remount-ro", "/dev") < 0 ||
		     add2(argv, "--remount-ro", "/") < 0 ? -1 : 0;
	if (rc == 0)
		rc = add2(argv, "--chdir", call->workdir ? TOOLS_WORKDIR : SANDBOX_WORKSPACE);
	/* The process limit is set inside, so that it counts the call's own
	 * user namespace only (set before, it would count every process of
	 * the user on the host). */
	if (rc == 0)
		rc = add3(argv, "--", sb->prlimit, nproc);
	if (rc == 0)
		rc = add(argv, "--");
	for (size_t i = 0; rc == 0 && call->argv[i]; i++)
		rc = add(argv, call->argv[i]);
out:
	if (rc < 0) {
		strlist_free(argv);
		strlist_free(env);
	}
	return rc;
}

/* Where a switched call's directories are attached in its own mount
 * namespace (hidden from everything else; bubblewrap gives the sandbox a
 * /tmp of its own): STAGE_DIR/skillfs-workspace, -workdir, -skill-<i>. */
#define STAGE_DIR "/tmp"

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif

void sandbox_run_free(struct sandbox_run *run)
{
	strlist_free(&run->argv);
	strlist_free(&run->env);
	free(run->av);
	free(run->ev);
	for (size_t i = 0; i < run->ntrees; i++)
		if (run->tree_fds[i] >= 0)
			close(run->tree_fds[i]);
	free(run->tree_fds);
	free(run->mounts);
	strlist_free(&run->targets);
	free(run->keep_fds);
	memset(run, 0, sizeof *run);
}

/* Adds directory fd as bind b: staged (a detached copy the child
 * attaches at STAGE_DIR/skillfs-<stage>) or from the descriptor. what
 * names it in a message. Returns 0, or -1 with *err set (NULL on
 * ENOMEM). */
static int add_dir(struct sandbox_run *run, bool staged, int fd, bool ro, const char *what,
		   const char *stage, struct bind *b, char **err)
{
	if (!staged) {
		run->keep_fds[run->nkeep++] = fd;
		b->kind = ro ? "--ro-bind-fd" : "--bind-fd";
		snprintf(b->src, sizeof b->src, "%d", fd);
		return 0;
	}
	if (strlist_addf(&run->targets, STAGE_DIR "/skillfs-%s", stage) < 0)
		return -1;
	const char *target = run->targets.items[run->targets.n - 1];
	long t = syscall(SYS_open_tree, fd, "", OPEN_TREE_CLONE | O_CLOEXEC | AT_EMPTY_PATH);
	if (t < 0) {
		if (asprintf(err, "cannot bind %s into the sandbox: %s", what, strerror(errno)) < 0)
			*err = NULL;
		return -1;
	}
	run->tree_fds[run->ntrees] = (int)t;
	run->mounts[run->ntrees] = (struct proc_mount){.tree_fd = (int)t, .target = target};
	run->ntrees++;
	b->kind = ro ? "--ro-bind" : "--bind";
	snprintf(b->src, sizeof b->src, "%s", target);
	return 0;
}

int sandbox_prepare(const struct sandbox *sb, const struct sandbox_call *call,
		    struct sandbox_run *run, char **err)
{
	memset(run, 0, sizeof *run);
	*err = NULL;
	bool none = sb->mode == SANDBOX_NONE;
	bool staged = !none && sb->switch_user;
	size_t nskills = call->skills ? call->nskills : 0;
	size_t max = 2 + nskills, nbinds = 0;
	struct bind *binds = calloc(max, sizeof *binds);
	run->tree_fds = calloc(max, sizeof *run->tree_fds);
	run->mounts = calloc(max, sizeof *run->mounts);
	run->keep_fds = calloc(max, sizeof *run->keep_fds);
	int rc = binds && run->tree_fds && run->mounts && run->keep_fds ? 0 : -1;
	if (rc == 0 && !none && call->workspace_fd >= 0) {
		binds[nbinds].dest = strdup(SANDBOX_WORKSPACE);
		rc = binds[nbinds].dest ? add_dir(run, staged, call->workspace_fd, false,
						  "the workspace", "workspace", &binds[nbinds], err)
					: -1;
		nbinds++;
	}
	if (rc == 0 && !none && call->workdir) {
		binds[nbinds].dest = strdup(TOOLS_WORKDIR);
		rc = binds[nbinds].dest ? add_dir(run, staged, call->workdir->fd, false,
						  "the workdir", "workdir", &binds[nbinds], err)
					: -1;
		nbinds++;
	}
	for (size_t i = 0; rc == 0 && !none && i < nskills; i++) {
		const struct sandbox_dir *d = &call->skills[i];
		if (!d->name || !*d->name || strchr(d->name, '/') || !strcmp(d->name, ".") ||
		    !strcmp(d->name, "..")) {
			if (asprintf(err, "skill name '%.64s' cannot name a directory",
				     d->name ? d->name : "") < 0)
				*err = NULL;
			rc = -1;
			break;
		}
		char what[96], stage[32];
		snprintf(what, sizeof what, "the files of skill '%.64s'", d->name);
		snprintf(stage, sizeof stage, "skill-%zu", i);
		if (asprintf(&binds[nbinds].dest, "%s/%s", TOOLS_SKILLS, d->name) < 0) {
			binds[nbinds].dest = NULL;
			rc = -1;
			break;
		}
		rc = add_dir(run, staged, d->fd, true, what, stage, &binds[nbinds], err);
		nbinds++;
	}
	if (rc == 0 && (command(sb, call, binds, nbinds, &run->argv, &run->env) < 0 ||
			!(run->av = strlist_to_argv(&run->argv)) ||
			!(run->ev = strlist_to_argv(&run->env))))
		rc = -1;
	for (size_t i = 0; binds && i < nbinds; i++)
		free(binds[i].dest);
	free(binds);
	if (rc < 0) {
		sandbox_run_free(run);
		return -1;
	}
	const char *cwd = "/";
	if (none)
		cwd = call->workdir ? call->workdir->path : call->workspace;
	run->spec = (struct proc_spec){
		.argv = run->av,
		.envp = run->ev,
		.cwd = cwd,
		.keep_fds = run->nkeep ? run->keep_fds : NULL,
		.nkeep_fds = run->nkeep,
		.mounts = run->ntrees ? run->mounts : NULL,
		.nmounts = run->ntrees,
		.mount_stage = run->ntrees ? STAGE_DIR : NULL,
		.set_ids = !none && sb->switch_user,
		.uid = sb->uid,
		.gid = sb->gid,
	};
	return 0;
}

/* The daemon's own namespace named by /proc/self/ns/<what> ("" without
 * /proc), into ns (size n). */
static void own_ns(const char *what, char *ns, size_t n)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/ns/%s", what);
	ssize_t len = readlink(path, ns, n - 1);
	ns[len > 0 ? len : 0] = '\0';
}

/* What the probe runs inside: it fails unless it is in user, pid and
 * (without network) net namespaces other than the daemon's, so that a
 * program that merely runs its last arguments is not taken for a sandbox. */
#define PROBE_SCRIPT                                                           \
	"[ \"$(readlink /proc/self/ns/user)\" != \"$1\" ] && "                     \
	"[ \"$(readlink /proc/self/ns/pid)\" != \"$2\" ] && "                      \
	"{ [ -z \"$3\" ] || [ \"$(readlink /proc/self/ns/net)\" != \"$3\" ]; } || " \
	"{ echo 'it does not confine: the probe ran in the namespaces of skillfs "  \
	"itself'; exit 1; }"

/* Starts one sandboxed probe; sets sb->why when it does not work. */
static int probe_run(struct sandbox *sb)
{
	char user[64], pid[64], net[64] = "";
	own_ns("user", user, sizeof user);
	own_ns("pid", pid, sizeof pid);
	if (!sb->network)
		own_ns("net", net, sizeof net);
	const char *const inner[] = {"/bin/sh", "-c", PROBE_SCRIPT, "sh", user, pid, net, NULL};
	struct sandbox_call call = {.argv = inner, .workspace_fd = -1};
	struct sandbox_run run;
	char *err = NULL;
	if (sandbox_prepare(sb, &call, &run, &err) < 0) {
		free(err);
		return -1;
	}
	int rc = 0;
	struct proc_spec spec = run.spec;
	spec.timeout_ms = PROBE_TIMEOUT_MS;
	spec.output_max = 4096;
	spec.merge_stderr = true;
	struct proc_result pr = {0};
	int prc = proc_run(&spec, &pr);
	if (prc < 0 || pr.exit_code != 0) {
		const char *out = prc < 0 ? pr.err.data : pr.out.data;
		size_t len = out ? strcspn(out, "\n") : 0;
		rc = set_why(sb, "bubblewrap (%s) cannot make a sandbox here (%.*s): process "
			     "tools are off; allow unprivileged user namespaces, or set "
			     "tools.sandbox: none to run them unconfined",
			     sb->program, (int)(len ? len : 9),
			     len ? out : (pr.timed_out ? "timed out" : "no reason"));
	}
	proc_result_free(&pr);
	sandbox_run_free(&run);
	return rc;
}

int sandbox_probe(const struct tools_config *tc, struct sandbox *out)
{
	memset(out, 0, sizeof *out);
	out->mode = tc->sandbox;
	out->network = tc->network;
	if (dup_opt(&out->user, tc->user ? tc->user : CONFIG_DEFAULT_TOOLS_USER) < 0 ||
	    strlist_extend(&out->env, &tc->env) < 0 || find_programs(tc, out) < 0)
		goto oom;
	if (tc->sandbox == SANDBOX_NONE)
		return 0;
	const char *name = tc->sandbox_program ? tc->sandbox_program : "bwrap";
	out->program = proc_find_program(name, NULL);
	if (out->program && access(out->program, X_OK) < 0) {
		int e = errno;
		free(out->program);
		out->program = NULL;
		errno = e;
	}
	if (!out->program) {
		if (errno == ENOMEM)
			goto oom;
		if (set_why(out, tc->sandbox_program
				    ? "tools.sandbox_program %s: %s: process tools are off"
				    : "bubblewrap (%s) not found on PATH (%s): process tools are "
				      "off; install the bubblewrap package, or set tools.sandbox: "
				      "none to run them unconfined",
			    name, strerror(errno)) < 0)
			goto oom;
		return 0;
	}
	const char *const tool_env[] = {"PATH=" TOOL_PATH, NULL};
	out->prlimit = proc_find_program("prlimit", tool_env);
	if (!out->prlimit) {
		if (errno == ENOMEM)
			goto oom;
		if (set_why(out, "prlimit (util-linux) not found in " TOOL_PATH ": it sets a "
			    "sandboxed call's process limit, so process tools are off") < 0)
			goto oom;
		return 0;
	}
	if (geteuid() == 0) {
		out->switch_user = true;
		if (resolve_user(out) < 0)
			goto oom;
		if (out->why)
			return 0;
	}
	if (probe_run(out) < 0)
		goto oom;
	return 0;
oom:
	sandbox_free(out);
	errno = ENOMEM;
	return -1;
}
