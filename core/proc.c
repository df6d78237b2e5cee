#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

extern char **environ;

#define READ_CHUNK 16384
#define LEADER_GRACE_MS 1000 /* drain time after the leader exits */
#define CANCEL_POLL_MS 100
#define WAIT_POLL_MS 20      /* exit polling when pidfd is unavailable */
#define FD_SCAN_MAX 65536

#define CHILD_STACK_SIZE (64 * 1024)

/* What the child failed at. */
enum stage { ST_SETPGID, ST_DUP, ST_CHDIR, ST_RLIMIT, ST_MOUNT, ST_IDS, ST_EXEC };

/* Everything the child needs, prepared before it starts so that the child
 * only makes async-signal-safe calls. The child shares the parent's memory
 * (CLONE_VM, like vfork) and writes failed/stage/err back here. */
struct child_plan {
	const char *path;
	char *const *argv;
	char *const *envp;
	const char *cwd;
	int in_fd, out_fd, err_fd; /* become 0, 1, 2 */
	int fd_scan_max;
	bool rlimits;
	struct rlimit cpu, fsize, as, nofile, core;
	const struct proc_spec *spec; /* descriptors, mounts, ids (read only) */
	size_t nkeep_fds, nmounts;    /* 0 when the spec gives none */
	volatile int failed, stage, err;
};

static const char *errstr(int e, char *b, size_t n)
{
	return strerror_r(e, b, n);
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

/* Moves a close-on-exec fd to 3 or above, so that the child's dup2 onto
 * 0..2 can never clobber another source descriptor. */
static int fd_high(int fd)
{
	if (fd < 0 || fd >= 3)
		return fd;
	int n = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	int e = errno;
	close(fd);
	errno = e;
	return n;
}

static int make_pipe(int p[2])
{
	if (pipe2(p, O_CLOEXEC) < 0) {
		p[0] = p[1] = -1;
		return -1;
	}
	p[0] = fd_high(p[0]);
	p[1] = fd_high(p[1]);
	if (p[0] < 0 || p[1] < 0) {
		int e = errno;
		close_fd(&p[0]);
		close_fd(&p[1]);
		errno = e;
		return -1;
	}
	return 0;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	return 0;
}

/* The PATH used to look up argv[0]: envp's when envp is given, else ours. */
static const char *search_path(const char *const *envp)
{
	const char *p = NULL;
	if (envp) {
		for (size_t i = 0; envp[i]; i++)
			if (strncmp(envp[i], "PATH=", 5) == 0) {
				p = envp[i] + 5;
				break;
			}
	} else {
		p = getenv("PATH");
	}
	return p ? p : "/usr/local/bin:/usr/bin:/bin";
}

char *proc_find_program(const char *name, const char *const *envp)
{
	if (!*name) {
		errno = ENOENT;
		return NULL;
	}
	if (strchr(name, '/'))
		return strdup(name);
	const char *p = search_path(envp);
	int err = ENOENT;
	struct buf cand = { 0 };
	for (;;) {
		const char *colon = strchrnul(p, ':');
		size_t dlen = (size_t)(colon - p);
		cand.len = 0;
		if (buf_append(&cand, dlen ? p : ".", dlen ? dlen : 1) < 0 ||
		    buf_printf(&cand, "/%s", name) < 0) {
			buf_free(&cand);
			errno = ENOMEM;
			return NULL;
		}
		struct stat st;
		if (stat(cand.data, &st) == 0 && S_ISREG(st.st_mode)) {
			if (access(cand.data, X_OK) == 0)
				return buf_steal(&cand, NULL);
			err = EACCES;
		}
		if (!*colon)
			break;
		p = colon + 1;
	}
	buf_free(&cand);
	errno = err;
	return NULL;
}

/* The lower of what we want and the current hard limit (an unprivileged
 * process cannot raise it). */
static struct rlimit clamp_limit(int resource, rlim_t soft, rlim_t hard)
{
	struct rlimit cur, r = { soft, hard };
	if (getrlimit(resource, &cur) == 0 && cur.rlim_max != RLIM_INFINITY) {
		if (r.rlim_max > cur.rlim_max)
			r.rlim_max = cur.rlim_max;
		if (r.rlim_cur > r.rlim_max)
			r.rlim_cur = r.rlim_max;
	}
	return r;
}

static void plan_rlimits(struct child_plan *p, int timeout_ms)
{
	rlim_t cpu = (rlim_t)(timeout_ms / 1000) + 1;
	p->cpu = clamp_limit(RLIMIT_CPU, cpu, cpu + 1);
	p->fsize = clamp_limit(RLIMIT_FSIZE, PROC_RLIMIT_FSIZE, PROC_RLIMIT_FSIZE);
	p->as = clamp_limit(RLIMIT_AS, PROC_RLIMIT_AS, PROC_RLIMIT_AS);
	p->nofile = clamp_limit(RLIMIT_NOFILE, PROC_RLIMIT_NOFILE, PROC_RLIMIT_NOFILE);
	p->core = clamp_limit(RLIMIT_CORE, 0, 0);
}

/* Runs in the child, on its own stack in the parent's memory while the
 * parent is suspended (CLONE_VM | CLONE_VFORK): async-signal-safe calls
 * only, and nothing that takes a lock or allocates. */
static int child_exec(void *arg)
{
	struct child_plan *p = arg;
	int stage = ST_SETPGID;
	if (setpgid(0, 0) < 0)
		goto fail;

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		(void)sigaction(s, &sa, NULL); /* fails harmlessly on KILL/STOP */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	stage = ST_DUP;
	if (dup2(p->in_fd, 0) < 0 || dup2(p->out_fd, 1) < 0 || dup2(p->err_fd, 2) < 0)
		goto fail;

	stage = ST_CHDIR;
	if (p->cwd && chdir(p->cwd) < 0)
		goto fail;

	stage = ST_RLIMIT;
	if (p->rlimits &&
	    (setrlimit(RLIMIT_CPU, &p->cpu) < 0 || setrlimit(RLIMIT_FSIZE, &p->fsize) < 0 ||
	     setrlimit(RLIMIT_AS, &p->as) < 0 || setrlimit(RLIMIT_NOFILE, &p->nofile) < 0 ||
	     setrlimit(RLIMIT_CORE, &p->core) < 0))
		goto fail;

	/* A mount namespace of the child's own, so that nothing it attaches
	 * is seen anywhere else. */
	stage = ST_MOUNT;
	if (p->nmounts) {
		if (unshare(CLONE_NEWNS) != 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
		    mount("tmpfs", p->spec->mount_stage, "tmpfs", MS_NOSUID | MS_NODEV,
			  "mode=0755,size=64k") != 0)
			goto fail;
		for (size_t i = 0; i < p->nmounts; i++)
			if (mkdir(p->spec->mounts[i].target, 0755) != 0 ||
			    syscall(SYS_move_mount, p->spec->mounts[i].tree_fd, "", AT_FDCWD,
				    p->spec->mounts[i].target, MOVE_MOUNT_F_EMPTY_PATH) != 0)
				goto fail;
	}

	/* Raw system calls: glibc's set*id would signal the parent's threads,
	 * whose memory this child shares. Groups first, the uid last. */
	stage = ST_IDS;
	const struct proc_spec *sp = p->spec;
	if (sp->set_ids &&
	    (syscall(SYS_setgroups, 0, NULL) != 0 ||
	     syscall(SYS_setresgid, sp->gid, sp->gid, sp->gid) != 0 ||
	     syscall(SYS_setresuid, sp->uid, sp->uid, sp->uid) != 0))
		goto fail;

	/* Nothing but 0..2 and the kept descriptors survives exec. */
	if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
		for (int fd = 3; fd < p->fd_scan_max; fd++)
			(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
	for (size_t i = 0; i < p->nkeep_fds; i++)
		if (sp->keep_fds[i] >= 3)
			(void)fcntl(sp->keep_fds[i], F_SETFD, 0);

	stage = ST_EXEC;
	execve(p->path, p->argv, p->envp);
fail:
	p->err = errno;
	p->stage = stage;
	p->failed = 1;
	_exit(127);
}

/* GCC says __SANITIZE_ADDRESS__; clang (before 16) only __has_feature. */
#if defined(__SANITIZE_ADDRESS__)
#define PROC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PROC_ASAN 1
#endif
#endif

#if defined(PROC_ASAN)
#include <sanitizer/asan_interface.h>
static void unpoison(void *p, size_t n)
{
	__asan_unpoison_memory_region(p, n);
}
#else
static void unpoison(void *p, size_t n)
{
	(void)p;
	(void)n;
}
#endif

/* Starts the child like vfork does: no copy of the daemon's page tables
 * (a fork of a large multi-threaded daemon costs far more than the program
 * it starts). Every signal is blocked across the clone so that no handler
 * of ours runs in the child before it resets them. Returns the pid or -1. */
static pid_t spawn_child(struct child_plan *p)
{
	void *stack = mmap(NULL, CHILD_STACK_SIZE, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		return -1;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t pid = clone(child_exec, (char *)stack + CHILD_STACK_SIZE,
			  CLONE_VM | CLONE_VFORK | SIGCHLD, p);
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* The child's frames left AddressSanitizer's marks on this stack;
	 * memory mapped here later (a thread's stack) must not inherit them. */
	unpoison(stack, CHILD_STACK_SIZE);
	munmap(stack, CHILD_STACK_SIZE);
	errno = e;
	return pid;
}

static void start_error(struct proc_result *res, const struct proc_spec *spec,
			int stage, int e)
{
	char eb[128];
	const char *es = errstr(e, eb, sizeof eb);
	res->err.len = 0;
	switch (stage) {
	case ST_CHDIR:
		buf_printf(&res->err, "cannot change directory to %s: %s", spec->cwd, es);
		break;
	case ST_RLIMIT:
		buf_printf(&res->err, "cannot set resource limits for %s: %s", spec->argv[0], es);
		break;
	case ST_MOUNT:
		buf_printf(&res->err, "cannot prepare the mounts for %s: %s", spec->argv[0], es);
		break;
	case ST_IDS:
		buf_printf(&res->err, "cannot switch to uid %ld gid %ld for %s: %s",
			   (long)spec->uid, (long)spec->gid, spec->argv[0], es);
		break;
	case ST_SETPGID:
	case ST_DUP:
		buf_printf(&res->err, "cannot prepare process for %s: %s", spec->argv[0], es);
		break;
	default:
		buf_printf(&res->err, "cannot execute %s: %s", spec->argv[0], es);
		break;
	}
}

/* Reads what is available from *fd into b (up to max; the rest is read and
 * dropped). Closes *fd at end of file or on error. */
static void drain_fd(int *fd, struct buf *b, size_t max, bool *truncated)
{
	char chunk[READ_CHUNK];
	ssize_t n = read(*fd, chunk, sizeof chunk);
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			close_fd(fd);
		return;
	}
	if (n == 0) {
		close_fd(fd);
		return;
	}
	size_t room = b->len < max ? max - b->len : 0;
	size_t keep = (size_t)n < room ? (size_t)n : room;
	if (keep && buf_append(b, chunk, keep) < 0)
		keep = 0; /* out of memory: count it as truncation */
	if (keep < (size_t)n)
		*truncated = true;
}

/* True once the leader has exited. It stays a zombie (not reaped) so that
 * its pid, which names the group, cannot be reused before the group is
 * killed. */
static bool leader_exited(pid_t pid, int pidfd, short pidfd_revents)
{
	if (pidfd >= 0)
		return pidfd_revents != 0;
	siginfo_t si;
	memset(&si, 0, sizeof si);
	return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
	       si.si_pid == pid;
}

struct io {
	int in, out, err, pidfd;
	const char *data;
	size_t len, off;
	bool epipe;
};

/* The poll loop: feeds stdin, collects output, watches the leader, the
 * deadline and the cancel hook. Returns with the group still unkilled and
 * the leader unreaped. */
static void supervise(const struct proc_spec *spec, struct proc_result *res,
		      pid_t pid, struct io *io)
{
	int64_t deadline = clock_ms() + spec->timeout_ms;
	bool leader_done = false;
	for (;;) {
		if (io->in >= 0 && io->off == io->len)
			close_fd(&io->in);
		if (leader_done && io->out < 0 && io->err < 0)
			return;
		int64_t now = clock_ms();
		if (now >= deadline) {
			/* After the leader exits the deadline is the drain grace. */
			res->timed_out = !leader_done;
			return;
		}
		if (spec->cancel && spec->cancel(spec->cancel_arg)) {
			res->cancelled = true;
			return;
		}
		struct pollfd pf[4];
		int n = 0, iin = -1, iout = -1, ierr = -1, ipid = -1;
		if (io->in >= 0) {
			pf[n] = (struct pollfd){ .fd = io->in, .events = POLLOUT };
			iin = n++;
		}
		if (io->out >= 0) {
			pf[n] = (struct pollfd){ .fd = io->out, .events = POLLIN };
			iout = n++;
		}
		if (io->err >= 0) {
			pf[n] = (struct pollfd){ .fd = io->err, .events = POLLIN };
			ierr = n++;
		}
		if (!leader_done && io->pidfd >= 0) {
			pf[n] = (struct pollfd){ .fd = io->pidfd, .events = POLLIN };
			ipid = n++;
		}
		int64_t wait = deadline - now;
		if (spec->cancel && wait > CANCEL_POLL_MS)
			wait = CANCEL_POLL_MS;
		if (!leader_done && io->pidfd < 0 && wait > WAIT_POLL_MS)
			wait = WAIT_POLL_MS;
		int r = poll(pf, (nfds_t)n, (int)wait);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return; /* cannot supervise: the caller kills the group */
		}
		if (iin >= 0 && pf[iin].revents) {
			ssize_t w = write(io->in, io->data + io->off, io->len - io->off);
			if (w > 0) {
				io->off += (size_t)w;
			} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
				if (errno == EPIPE)
					io->epipe = true;
				close_fd(&io->in); /* the program stopped reading */
			}
		}
		if (iout >= 0 && pf[iout].revents)
			drain_fd(&io->out, &res->out, spec->output_max, &res->out_truncated);
		if (ierr >= 0 && pf[ierr].revents)
			drain_fd(&io->err, &res->err, spec->output_max, &res->err_truncated);
		if (!leader_done &&
		    leader_exited(pid, io->pidfd, ipid >= 0 ? pf[ipid].revents : 0)) {
			leader_done = true;
			/* Stragglers of the group die now; what they wrote
			 * before is still drained, for a bounded time. */
			kill(-pid, SIGKILL);
			close_fd(&io->in);
			int64_t grace = clock_ms() + LEADER_GRACE_MS;
			if (grace < deadline)
				deadline = grace;
		}
	}
}

/* A started program: its group leader and our ends of its pipes. */
struct proc {
	pid_t pid;
	int in, out, err, pidfd;
};

/* Empties res for a run of spec, and checks spec: 0, or -1 with errno
 * EINVAL and the reason in res. */
static int result_open(const struct proc_spec *spec, struct proc_result *res)
{
	memset(res, 0, sizeof *res);
	res->exit_code = -1;
	if (spec && spec->argv && spec->argv[0] && spec->timeout_ms > 0 &&
	    spec->output_max > 0 && (!spec->stdin_len || spec->stdin_data))
		return 0;
	buf_puts(&res->err, "invalid process specification");
	errno = EINVAL;
	return -1;
}

/* Starts spec's program with stdin a pipe (stdin_pipe) or /dev/null.
 * Returns 0, or -1 with errno and res->err set. */
static int start(const struct proc_spec *spec, bool stdin_pipe, struct proc *p,
		 struct proc_result *res)
{
	*p = (struct proc){ .pid = -1, .in = -1, .out = -1, .err = -1, .pidfd = -1 };
	struct child_plan plan = {
		.argv = (char *const *)spec->argv,
		.envp = spec->envp ? (char *const *)spec->envp : environ,
		.cwd = spec->cwd,
		.rlimits = spec->rlimits,
		.fd_scan_max = FD_SCAN_MAX,
		.spec = spec,
		.nkeep_fds = spec->keep_fds ? spec->nkeep_fds : 0,
		.nmounts = spec->mounts && spec->mount_stage ? spec->nmounts : 0,
	};
	char *path = proc_find_program(spec->argv[0], spec->envp);
	if (!path) {
		int e = errno;
		start_error(res, spec, ST_EXEC, e);
		errno = e;
		return -1;
	}
	plan.path = path;
	if (spec->rlimits)
		plan_rlimits(&plan, spec->timeout_ms);
	struct rlimit nf;
	if (getrlimit(RLIMIT_NOFILE, &nf) == 0 && nf.rlim_cur < FD_SCAN_MAX)
		plan.fd_scan_max = (int)nf.rlim_cur;

	int inp[2] = { -1, -1 }, outp[2] = { -1, -1 }, errp[2] = { -1, -1 };
	int ret = -1, e = 0;
	if (stdin_pipe) {
		if (make_pipe(inp) < 0 || set_nonblock(inp[1]) < 0)
			goto sys_fail;
	} else {
		inp[0] = fd_high(open("/dev/null", O_RDONLY | O_CLOEXEC));
		if (inp[0] < 0)
			goto sys_fail;
	}
	if (make_pipe(outp) < 0 || set_nonblock(outp[0]) < 0)
		goto sys_fail;
	if (!spec->merge_stderr && (make_pipe(errp) < 0 || set_nonblock(errp[0]) < 0))
		goto sys_fail;
	plan.in_fd = inp[0];
	plan.out_fd = outp[1];
	plan.err_fd = spec->merge_stderr ? outp[1] : errp[1];

	/* Returns once the child has called execve or failed before it. */
	pid_t pid = spawn_child(&plan);
	if (pid < 0)
		goto sys_fail;
	if (plan.failed) {
		int st;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		start_error(res, spec, plan.stage, plan.err);
		e = plan.err;
		goto out;
	}
	p->pid = pid;
	p->in = inp[1];
	inp[1] = -1;
	p->out = outp[0];
	outp[0] = -1;
	p->err = errp[0];
	errp[0] = -1;
#ifdef SYS_pidfd_open
	p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
#endif
	ret = 0;
	goto out;

sys_fail:
	e = errno;
	{
		char eb[128];
		res->err.len = 0;
		buf_printf(&res->err, "cannot start %s: %s", spec->argv[0],
			   errstr(e, eb, sizeof eb));
	}
out:
	close_fd(&inp[0]);
	close_fd(&inp[1]);
	close_fd(&outp[0]);
	close_fd(&outp[1]);
	close_fd(&errp[0]);
	close_fd(&errp[1]);
	free(path);
	if (ret < 0)
		errno = e;
	return ret;
}

/* Kills p's group (its leader is unreaped, so its pid still names the
 * group), reaps the leader into res (when given) and closes p's pipes. */
static void end(struct proc *p, struct proc_result *res)
{
	kill(-p->pid, SIGKILL);
	int st = 0;
	pid_t w;
	while ((w = waitpid(p->pid, &st, 0)) < 0 && errno == EINTR)
		;
	if (res && w == p->pid) {
		if (WIFEXITED(st))
			res->exit_code = WEXITSTATUS(st);
		else if (WIFSIGNALED(st))
			res->signal = WTERMSIG(st);
	}
	close_fd(&p->in);
	close_fd(&p->out);
	close_fd(&p->err);
	close_fd(&p->pidfd);
}

/* Feeds spec's stdin bytes to started p and supervises it to its end. */
static void finish(const struct proc_spec *spec, struct proc *p, struct proc_result *res)
{
	struct io io = { .in = p->in, .out = p->out, .err = p->err, .pidfd = p->pidfd,
			 .data = spec->stdin_data, .len = spec->stdin_len };
	p->in = p->out = p->err = p->pidfd = -1;
	sigset_t pipeset, oldmask, pending;
	sigemptyset(&pipeset);
	sigaddset(&pipeset, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipeset, &oldmask);
	bool pipe_was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
	supervise(spec, res, p->pid, &io);
	p->in = io.in;
	p->out = io.out;
	p->err = io.err;
	p->pidfd = io.pidfd;
	end(p, res);
	if (io.epipe && !pipe_was_pending) {
		struct timespec zero = { 0, 0 };
		(void)sigtimedwait(&pipeset, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &oldmask, NULL);
}

int proc_run(const struct proc_spec *spec, struct proc_result *res)
{
	if (result_open(spec, res) < 0)
		return -1;
	struct proc p;
	if (start(spec, spec->stdin_len > 0, &p, res) < 0)
		return -1;
	finish(spec, &p, res);
	return 0;
}

struct proc *proc_start(const struct proc_spec *spec, struct proc_result *res)
{
	if (result_open(spec, res) < 0)
		return NULL;
	struct proc *p = malloc(sizeof *p);
	if (!p) {
		buf_puts(&res->err, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	if (start(spec, true, p, res) < 0) {
		int e = errno;
		free(p);
		errno = e;
		return NULL;
	}
	return p;
}

int proc_finish(struct proc *p, const struct proc_spec *spec, struct proc_result *res)
{
	if (result_open(spec, res) < 0) {
		proc_discard(p);
		return -1;
	}
	finish(spec, p, res);
	free(p);
	return 0;
}

void proc_discard(struct proc *p)
{
	if (!p)
		return;
	end(p, NULL);
	free(p);
}

void proc_result_free(struct proc_result *res)
{
	if (!res)
		return;
	buf_free(&res->out);
	buf_free(&res->err);
}
