/* client: `skillfs run` and `skillfs runs` (see client.h). */
#include "client.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "buf.h"
#include "grow.h"
#include "mountinfo.h"
#include "runlist.h"
#include "strlist.h"

const char client_usage[] =
	"       skillfs run [-C MOUNTPOINT] [--config NAME] [--skill NAME]... [--workdir DIR]\n"
	"                   [PROMPT... | -]\n"
	"       skillfs runs [-C MOUNTPOINT] [--state DB]\n"
	"\n"
	"  run and runs use a mount through its files:\n"
	"  -C, --mount MOUNTPOINT  the mount (default: $SKILLFS_MOUNT, else the skillfs\n"
	"                       mount holding the current directory, else the only one)\n"
	"      --config NAME    (run) the configuration (default 'default')\n"
	"      --skill NAME     (run) a skill forced on the run (repeatable)\n"
	"      --workdir DIR    (run) the project directory (under runs.workdir_roots)\n"
	"  PROMPT... | -        (run) the prompt (words joined by spaces), or - or\n"
	"                       nothing: read it from standard input\n"
	"      --state DB       (runs) read a run database instead of a mount\n"
	"  run shows the transcript on stderr as it grows, prints the result on\n"
	"  stdout and exits 0 completed, 1 failed, 2 cancelled, 3 waiting for a\n"
	"  person (pending is printed, with how to answer), 4 when no run started.\n"
	"  Ctrl-C cancels the run (on a terminal, after asking).\n";

/* How often the transcript is looked at while the run goes (and the
 * spinner turns, on a terminal). */
#define TICK_MS 250
#define TICK_TTY_MS 100
#define NEW_ID_TRIES 8

/* ---- files of the mount ---- */

/* Reads the whole file at path into out (appended). Returns 0 or -errno. */
static int read_all(const char *path, struct buf *out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char chunk[65536];
	int rc = 0;
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0)
			break;
		if (buf_append(out, chunk, (size_t)n) < 0) {
			rc = -ENOMEM;
			break;
		}
	}
	close(fd);
	if (rc == 0 && !out->data && buf_puts(out, "") < 0)
		rc = -ENOMEM;
	return rc;
}

/* Writes len bytes to the file at path (truncated first) and closes it;
 * the mount reports a refused value at write or at close. Returns 0 or
 * -errno. */
static int write_all(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = 0;
	while (len > 0) {
		ssize_t n = write(fd, data, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		data += n;
		len -= (size_t)n;
	}
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

/* path = dir/name (name may hold more components). Returns 0, or -1 when
 * it does not fit. */
static int join(char *path, const char *dir, const char *name)
{
	int n = snprintf(path, PATH_MAX, "%s/%s", dir, name);
	return n < 0 || n >= PATH_MAX ? -1 : 0;
}

/* Strips the line breaks that end b. */
static void chomp(struct buf *b)
{
	while (b->len && (b->data[b->len - 1] == '\n' || b->data[b->len - 1] == '\r'))
		b->data[--b->len] = '\0';
}

/* ---- which mount ---- */

/* Whether dir is a skillfs mount's root, by the file only it has. */
static bool is_skillfs(const char *dir)
{
	char p[PATH_MAX];
	struct stat st;
	return join(p, dir, "runs/new") == 0 && stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The mount to use: given (-C), else $SKILLFS_MOUNT, else the skillfs
 * mount holding the current directory (the deepest), else the only
 * skillfs mount of the table. A malloc'd absolute path, or NULL with a
 * message printed. */
static char *find_mount(const char *cmd, const char *given)
{
	const char *env = getenv("SKILLFS_MOUNT");
	const char *pick = given ? given : env && *env ? env : NULL;
	char *r = NULL;
	if (pick) {
		r = realpath(pick, NULL);
		if (!r) {
			fprintf(stderr, "skillfs %s: %s: %s\n", cmd, pick, strerror(errno));
			return NULL;
		}
	} else {
		struct strlist mounts = { 0 };
		char *cwd = realpath(".", NULL);
		if (mountinfo_skillfs_mounts(&mounts) < 0)
			fprintf(stderr, "skillfs %s: cannot read the mount table\n", cmd);
		size_t best = 0;
		for (size_t i = 0; cwd && i < mounts.n; i++) {
			size_t n = strlen(mounts.items[i]);
			if (strncmp(cwd, mounts.items[i], n) == 0 &&
			    (cwd[n] == '\0' || cwd[n] == '/' || n == 1) && n > best) {
				best = n;
				free(r);
				r = strdup(mounts.items[i]);
			}
		}
		if (!r && mounts.n == 1)
			r = strdup(mounts.items[0]);
		if (!r)
			fprintf(stderr, "skillfs %s: %s: give -C MOUNTPOINT or set SKILLFS_MOUNT\n",
				cmd, mounts.n ? "more than one skillfs mount"
					      : "no skillfs mount found");
		free(cwd);
		strlist_free(&mounts);
		if (!r)
			return NULL;
	}
	if (!is_skillfs(r)) {
		fprintf(stderr, "skillfs %s: %s is not a skillfs mount (it has no runs/new)\n",
			cmd, r);
		free(r);
		return NULL;
	}
	return r;
}

/* ---- progress: the transcript's new lines ---- */

struct progress {
	const char *path;     /* runs/<id>/transcript */
	struct buf shown;     /* the transcript as last shown, up to a line break */
	off_t size;
	struct timespec mtime;
	bool tty;             /* stderr is a terminal: spinner and elapsed time */
	bool spinning;        /* a spinner line is on the screen */
	unsigned frame;
	struct timespec start;
};

static uint64_t line_hash(const char *p, size_t n)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
	return h | 1; /* 0 marks a free slot */
}

/* A multiset of lines (by hash), to tell which lines of a transcript that
 * changed in its middle (a sub-agent's steps are placed under the call
 * that started it) were shown already. */
struct lineset {
	uint64_t *keys;
	uint32_t *counts;
	size_t cap;
};

static int lineset_init(struct lineset *s, const char *text, size_t len)
{
	size_t lines = 1;
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	s->cap = 16;
	while (s->cap < lines * 2)
		s->cap *= 2;
	s->keys = calloc(s->cap, sizeof *s->keys);
	s->counts = calloc(s->cap, sizeof *s->counts);
	if (!s->keys || !s->counts)
		return -1;
	for (size_t i = 0; i < len;) {
		size_t n = strcspn(text + i, "\n");
		uint64_t h = line_hash(text + i, n);
		size_t k = h & (s->cap - 1);
		while (s->keys[k] && s->keys[k] != h)
			k = (k + 1) & (s->cap - 1);
		s->keys[k] = h;
		s->counts[k]++;
		i += n + 1;
	}
	return 0;
}

/* Takes one line equal to p[0..n) out of the set; false when none is in it. */
static bool lineset_take(struct lineset *s, const char *p, size_t n)
{
	uint64_t h = line_hash(p, n);
	size_t k = h & (s->cap - 1);
	while (s->keys[k] && s->keys[k] != h)
		k = (k + 1) & (s->cap - 1);
	if (!s->keys[k] || !s->counts[k])
		return false;
	s->counts[k]--;
	return true;
}

static void lineset_free(struct lineset *s)
{
	free(s->keys);
	free(s->counts);
}

static void spinner_clear(struct progress *p)
{
	if (p->spinning)
		fputs("\r\033[K", stderr);
	p->spinning = false;
}

static double elapsed(const struct progress *p)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - p->start.tv_sec) + (now.tv_nsec - p->start.tv_nsec) / 1e9;
}

/* Prints the lines of text[0..len) not shown before: when the transcript
 * only grew, those after what was shown; when it changed in its middle,
 * each line that was not among those shown. */
static void print_new(struct progress *p, const char *text, size_t len)
{
	const char *from = text;
	if (len >= p->shown.len && (p->shown.len == 0 || memcmp(text, p->shown.data, p->shown.len) == 0)) {
		from = text + p->shown.len;
		if (from < text + len)
			spinner_clear(p);
		fwrite(from, 1, (size_t)(text + len - from), stderr);
		return;
	}
	struct lineset seen = { 0 };
	if (lineset_init(&seen, p->shown.data ? p->shown.data : "", p->shown.len) < 0) {
		lineset_free(&seen);
		return; /* out of memory: this change is not shown */
	}
	for (size_t i = 0; i < len;) {
		size_t n = strcspn(text + i, "\n");
		if (n + i > len)
			n = len - i;
		if (!lineset_take(&seen, text + i, n)) {
			spinner_clear(p);
			fwrite(text + i, 1, n, stderr);
			fputc('\n', stderr);
		}
		i += n + 1;
	}
	lineset_free(&seen);
}

/* Shows what the transcript gained since the last look (complete lines
 * only, unless final: then all of it). */
static void progress_update(struct progress *p, bool final)
{
	struct stat st;
	if (stat(p->path, &st) < 0)
		return;
	if (!final && st.st_size == p->size && st.st_mtim.tv_sec == p->mtime.tv_sec &&
	    st.st_mtim.tv_nsec == p->mtime.tv_nsec)
		return;
	struct buf cur = { 0 };
	if (read_all(p->path, &cur) < 0) {
		buf_free(&cur);
		return;
	}
	p->size = st.st_size;
	p->mtime = st.st_mtim;
	size_t complete = cur.len;
	if (!final)
		while (complete && cur.data[complete - 1] != '\n')
			complete--;
	else if (complete && cur.data[complete - 1] != '\n' && buf_puts(&cur, "\n") == 0)
		complete = cur.len;
	print_new(p, cur.data, complete);
	buf_free(&p->shown);
	if (buf_append(&p->shown, cur.data, complete) < 0)
		buf_free(&p->shown); /* shows lines again rather than never */
	buf_free(&cur);
	fflush(stderr);
}

/* On a terminal: a turning spinner with the state and the time so far. */
static void progress_tick(struct progress *p, const char *id, const char *state)
{
	static const char frames[] = "-\\|/";
	if (!p->tty)
		return;
	fprintf(stderr, "\r\033[K%c run %s: %s, %.0f s", frames[p->frame++ % 4], id, state,
		elapsed(p));
	fflush(stderr);
	p->spinning = true;
}

/* ---- skillfs run ---- */

struct run_opts {
	const char *mount_given;
	const char *config;
	struct strlist skills;
	const char *workdir;
	struct buf prompt;
};

static bool valid_id(const char *id)
{
	size_t n = strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-");
	return n >= 1 && n <= 64 && id[n] == '\0';
}

static void run_usage(FILE *f)
{
	fputs("usage: skillfs run [-C MOUNTPOINT] [--config NAME] [--skill NAME]... "
	      "[--workdir DIR] [PROMPT... | -]\n",
	      f);
}

/* Parses run's arguments into o. Returns 0, 1 after --help, or -1. */
static int run_parse(int argc, char **argv, struct run_opts *o)
{
	static const struct option longopts[] = {
		{ "mount", required_argument, NULL, 'C' },
		{ "config", required_argument, NULL, 'c' },
		{ "skill", required_argument, NULL, 's' },
		{ "workdir", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, "+C:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'C':
			o->mount_given = optarg;
			break;
		case 'c':
			o->config = optarg;
			break;
		case 's':
			if (strlist_add(&o->skills, optarg) < 0) {
				fprintf(stderr, "skillfs run: out of memory\n");
				return -1;
			}
			break;
		case 'w':
			o->workdir = optarg;
			break;
		case 'h':
			run_usage(stdout);
			return 1;
		default:
			run_usage(stderr);
			return -1;
		}
	}
	bool from_stdin = optind == argc || (optind == argc - 1 && strcmp(argv[optind], "-") == 0);
	if (from_stdin) {
		int rc = read_all("/dev/stdin", &o->prompt);
		if (rc < 0) {
			fprintf(stderr, "skillfs run: reading the prompt from standard input: %s\n",
				strerror(-rc));
			return -1;
		}
	} else {
		for (int i = optind; i < argc; i++)
			if ((i > optind && buf_puts(&o->prompt, " ") < 0) ||
			    buf_puts(&o->prompt, argv[i]) < 0) {
				fprintf(stderr, "skillfs run: out of memory\n");
				return -1;
			}
		if (buf_puts(&o->prompt, "\n") < 0) {
			fprintf(stderr, "skillfs run: out of memory\n");
			return -1;
		}
	}
	size_t blank = strspn(o->prompt.data ? o->prompt.data : "", " \t\r\n");
	if (blank == o->prompt.len) {
		fprintf(stderr, "skillfs run: the prompt is empty\n");
		return -1;
	}
	return 0;
}

/* Makes a new run in the mount; its id goes to id (size bytes). Returns 0, or -1 with a
 * message printed. */
static int make_run(const char *mnt, char *id, size_t size)
{
	char p[PATH_MAX], newp[PATH_MAX];
	if (join(newp, mnt, "runs/new") < 0)
		return -1;
	for (int i = 0; i < NEW_ID_TRIES; i++) {
		struct buf b = { 0 };
		int rc = read_all(newp, &b);
		chomp(&b);
		if (rc < 0 || !b.data || !valid_id(b.data) || b.len >= size) {
			fprintf(stderr, "skillfs run: reading %s: %s\n", newp,
				rc < 0 ? strerror(-rc) : "not a run id");
			buf_free(&b);
			return -1;
		}
		memcpy(id, b.data, b.len + 1);
		buf_free(&b);
		if (snprintf(p, sizeof p, "%s/runs/%s", mnt, id) >= (int)sizeof p)
			return -1;
		if (mkdir(p, 0700) == 0)
			return 0;
		if (errno != EEXIST) {
			fprintf(stderr, "skillfs run: mkdir %s: %s\n", p, strerror(errno));
			return -1;
		}
		/* Another program took that id first: ask again. */
	}
	fprintf(stderr, "skillfs run: no free run id after %d tries\n", NEW_ID_TRIES);
	return -1;
}

/* Writes text to the run's file name. Returns 0, or -1 with a message
 * naming what (and value, when given). */
static int put(const char *rundir, const char *name, const char *text, size_t len,
	       const char *what, const char *value)
{
	char p[PATH_MAX];
	if (join(p, rundir, name) < 0)
		return -1;
	int rc = write_all(p, text, len);
	if (rc < 0)
		fprintf(stderr, "skillfs run: %s%s%s%s refused: %s (%s)\n", what,
			value ? " '" : "", value ? value : "", value ? "'" : "", strerror(-rc), p);
	return rc < 0 ? -1 : 0;
}

/* Writes the run's files before its prompt, then the prompt (whose close
 * starts it). Returns 0, or -1 with a message printed. */
static int start(const char *rundir, const struct run_opts *o)
{
	struct buf b = { 0 };
	int rc = 0;
	if (o->config) {
		rc = buf_printf(&b, "%s\n", o->config) < 0 ? -1
			: put(rundir, "config", b.data, b.len, "the configuration", o->config);
		buf_free(&b);
	}
	for (size_t i = 0; rc == 0 && i < o->skills.n; i++)
		if (buf_printf(&b, "%s\n", o->skills.items[i]) < 0)
			rc = -1;
	if (rc == 0 && o->skills.n)
		rc = put(rundir, "skills", b.data, b.len, "the skills", NULL);
	buf_free(&b);
	if (rc == 0 && o->workdir) {
		char *abs = realpath(o->workdir, NULL);
		if (!abs) {
			fprintf(stderr, "skillfs run: %s: %s\n", o->workdir, strerror(errno));
			return -1;
		}
		rc = buf_printf(&b, "%s\n", abs) < 0 ? -1
			: put(rundir, "workdir", b.data, b.len, "the workdir", abs);
		free(abs);
		buf_free(&b);
	}
	if (rc == 0)
		rc = put(rundir, "prompt", o->prompt.data, o->prompt.len, "the prompt", NULL);
	return rc;
}

/* Reads the run's status word into state (size bytes). Returns 0 or -1. */
static int status_of(int fd, char *state, size_t size)
{
	ssize_t n = pread(fd, state, size - 1, 0);
	if (n < 0)
		return -1;
	state[n] = '\0';
	state[strcspn(state, "\r\n")] = '\0';
	return 0;
}

static bool settled(const char *s)
{
	return !strcmp(s, "completed") || !strcmp(s, "failed") || !strcmp(s, "cancelled") ||
	       !strcmp(s, "waiting_for_approval") || !strcmp(s, "waiting_for_input");
}

/* Asks on the terminal whether to cancel the run. */
static bool ask_cancel(const char *id, int sfd)
{
	FILE *tty = fopen("/dev/tty", "r+e");
	if (!tty)
		return true;
	fprintf(tty, "\ncancel run %s? [y/N] ", id);
	fflush(tty);
	char line[64] = "";
	bool yes = fgets(line, sizeof line, tty) && (line[0] == 'y' || line[0] == 'Y');
	fclose(tty);
	/* A Ctrl-C at the question says yes as well. */
	struct signalfd_siginfo si;
	while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
		yes = true;
	return yes;
}

/* Follows the run until it settles; returns its state in state. On SIGINT
 * (after asking, on a terminal) or SIGTERM the run is cancelled; a second
 * signal after that leaves at once (returns -1). */
static int follow(const char *rundir, const char *id, struct progress *pg, int sfd,
		  char *state, size_t size)
{
	char statusp[PATH_MAX], ctlp[PATH_MAX];
	if (join(statusp, rundir, "status") < 0 || join(ctlp, rundir, "ctl") < 0)
		return -1;
	int fd = open(statusp, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "skillfs run: %s: %s\n", statusp, strerror(errno));
		return -1;
	}
	bool cancelling = false;
	int rc = 0;
	for (;;) {
		progress_update(pg, false);
		if (status_of(fd, state, size) < 0) {
			fprintf(stderr, "skillfs run: %s: %s\n", statusp, strerror(errno));
			rc = -1;
			break;
		}
		if (settled(state))
			break;
		progress_tick(pg, id, state);
		/* poll() on status wakes when the run settles; the timeout is
		 * for the transcript and the spinner. */
		struct pollfd pfd[2] = { { fd, POLLIN, 0 }, { sfd, POLLIN, 0 } };
		int n = poll(pfd, 2, pg->tty ? TICK_TTY_MS : TICK_MS);
		if (n < 0 && errno != EINTR) {
			rc = -1;
			break;
		}
		if (n > 0 && (pfd[0].revents & (POLLERR | POLLNVAL))) {
			fprintf(stderr, "skillfs run: %s: the mount went away\n", statusp);
			rc = -1;
			break;
		}
		if (n > 0 && (pfd[0].revents & POLLIN)) {
			/* Readable but maybe not settled yet (a wake to look
			 * again): look, without spinning on it. */
			struct timespec t = { 0, 20 * 1000000L };
			nanosleep(&t, NULL);
		}
		if (n > 0 && (pfd[1].revents & POLLIN)) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof si) != (ssize_t)sizeof si)
				continue;
			spinner_clear(pg);
			if (cancelling) {
				fprintf(stderr, "skillfs run: left run %s (being cancelled): %s\n", id,
					rundir);
				rc = -1;
				break;
			}
			bool ask = si.ssi_signo == SIGINT && pg->tty;
			if (ask && !ask_cancel(id, sfd))
				continue;
			int w = write_all(ctlp, "cancel\n", 7);
			if (w < 0)
				fprintf(stderr, "skillfs run: cancel: %s\n", strerror(-w));
			else
				fprintf(stderr, "skillfs run: cancelling run %s\n", id);
			cancelling = true;
		}
	}
	spinner_clear(pg);
	close(fd);
	return rc;
}

/* Prints the run's file name to f (with a line break when it has none). */
static int show(const char *rundir, const char *name, FILE *f)
{
	char p[PATH_MAX];
	struct buf b = { 0 };
	int rc = join(p, rundir, name) < 0 ? -ENAMETOOLONG : read_all(p, &b);
	if (rc == 0) {
		fwrite(b.data, 1, b.len, f);
		if (b.len && b.data[b.len - 1] != '\n')
			fputc('\n', f);
	}
	buf_free(&b);
	return rc;
}

/* What the settled state means for the caller: prints the result, the
 * error or what the run waits for, and returns the exit status. */
static int report(const char *rundir, const char *id, const char *state)
{
	if (!strcmp(state, "completed")) {
		int rc = show(rundir, "result", stdout);
		if (rc < 0) {
			fprintf(stderr, "skillfs run: run %s completed; its result cannot be read: %s\n",
				id, strerror(-rc));
			return CLIENT_TROUBLE;
		}
		return CLIENT_COMPLETED;
	}
	if (!strcmp(state, "failed")) {
		fprintf(stderr, "skillfs run: run %s failed: ", id);
		if (show(rundir, "error", stderr) < 0)
			fputs("(its error cannot be read)\n", stderr);
		return CLIENT_FAILED;
	}
	if (!strcmp(state, "cancelled")) {
		fprintf(stderr, "skillfs run: run %s was cancelled\n", id);
		return CLIENT_CANCELLED;
	}
	bool input = !strcmp(state, "waiting_for_input");
	printf("run %s is %s:\n", id, state);
	show(rundir, "pending", stdout);
	if (input)
		printf("answer with:  echo ANSWER > %s/input\n", rundir);
	else
		printf("answer with:  echo approve > %s/ctl   (or: echo deny > %s/ctl)\n", rundir,
		       rundir);
	printf("then wait:    cat %s/wait\n", rundir);
	return CLIENT_WAITING;
}

int client_run(int argc, char **argv)
{
	struct run_opts o = { 0 };
	int status = CLIENT_TROUBLE;
	char *mnt = NULL;
	int sfd = -1;
	int p = run_parse(argc, argv, &o);
	if (p != 0) {
		status = p > 0 ? 0 : CLIENT_TROUBLE;
		goto out;
	}
	if (!(mnt = find_mount("run", o.mount_given)))
		goto out;
	/* Signals come as reads of sfd, once the run exists. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0 ||
	    (sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
		fprintf(stderr, "skillfs run: signalfd: %s\n", strerror(errno));
		goto out;
	}
	char id[80], rundir[PATH_MAX], txp[PATH_MAX];
	if (make_run(mnt, id, sizeof id) < 0)
		goto out;
	if (snprintf(rundir, sizeof rundir, "%s/runs/%s", mnt, id) >= (int)sizeof rundir ||
	    join(txp, rundir, "transcript") < 0)
		goto out;
	if (start(rundir, &o) < 0) {
		rmdir(rundir); /* nothing started: leave nothing behind */
		goto out;
	}
	fprintf(stderr, "skillfs run: run %s started (%s)\n", id, rundir);
	struct progress pg = { .path = txp, .tty = isatty(STDERR_FILENO) == 1 };
	clock_gettime(CLOCK_MONOTONIC, &pg.start);
	char state[64] = "";
	if (follow(rundir, id, &pg, sfd, state, sizeof state) == 0) {
		progress_update(&pg, true);
		fflush(stderr);
		status = report(rundir, id, state);
	}
	buf_free(&pg.shown);
out:
	if (sfd >= 0)
		close(sfd);
	free(mnt);
	strlist_free(&o.skills);
	buf_free(&o.prompt);
	if (fflush(stdout) != 0 && status == CLIENT_COMPLETED)
		status = CLIENT_TROUBLE;
	return status;
}

/* ---- skillfs runs ---- */

/* Nanoseconds since the epoch of an info.json time ("2024-05-01T10:00:00.123Z"),
 * or 0. */
static int64_t iso_ns(const char *s)
{
	struct tm tm = { 0 };
	const char *rest = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	if (!rest)
		return 0;
	long ms = 0;
	if (*rest == '.')
		ms = strtol(rest + 1, NULL, 10);
	return (int64_t)timegm(&tm) * 1000000000 + (int64_t)ms * 1000000;
}

static char *dup_or(const char *s, const char *dflt)
{
	return strdup(s ? s : dflt);
}

/* One run's summary from its files in the mount; a file it cannot read
 * (another user's run) leaves "?". Returns 0 or -1 on ENOMEM. */
static int summary_from_mount(const char *runs, const char *id, struct run_summary *r)
{
	char p[PATH_MAX];
	struct buf b = { 0 };
	json_t *j = NULL;
	if (snprintf(p, sizeof p, "%s/%s/info.json", runs, id) < (int)sizeof p &&
	    read_all(p, &b) == 0)
		j = json_loadb(b.data, b.len, 0, NULL);
	buf_free(&b);
	r->id = strdup(id);
	r->state = dup_or(json_string_value(json_object_get(j, "state")), "?");
	r->config = dup_or(json_string_value(json_object_get(j, "config")), "?");
	r->created_ns = iso_ns(json_string_value(json_object_get(j, "created_at")));
	json_decref(j);
	if (snprintf(p, sizeof p, "%s/%s/prompt", runs, id) < (int)sizeof p &&
	    read_all(p, &b) == 0 && b.len)
		r->prompt_line = runlist_first_line(b.data);
	buf_free(&b);
	return r->id && r->state && r->config ? 0 : -1;
}

static int by_age(const void *a, const void *b)
{
	const struct run_summary *x = a, *y = b;
	if (x->created_ns != y->created_ns)
		return x->created_ns < y->created_ns ? -1 : 1;
	return strcmp(x->id, y->id);
}

/* Every run directory of the mount's runs/, summarised. Returns 0, or -1
 * with a message printed. */
static int list_mount(const char *mnt, struct run_summary **out, size_t *n)
{
	char runs[PATH_MAX];
	*out = NULL;
	*n = 0;
	if (join(runs, mnt, "runs") < 0)
		return -1;
	DIR *d = opendir(runs);
	if (!d) {
		fprintf(stderr, "skillfs runs: %s: %s\n", runs, strerror(errno));
		return -1;
	}
	struct run_summary *v = NULL;
	size_t cnt = 0, cap = 0;
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = readdir(d))) {
		struct stat st;
		char p[PATH_MAX];
		if (de->d_name[0] == '.' ||
		    (de->d_type != DT_DIR &&
		     (de->d_type != DT_UNKNOWN || snprintf(p, sizeof p, "%s/%s", runs, de->d_name) >= (int)sizeof p ||
		      stat(p, &st) < 0 || !S_ISDIR(st.st_mode))))
			continue;
		struct run_summary *nv = grow(v, &cap, cnt, sizeof *nv, 16);
		if (!nv) {
			rc = -1;
			break;
		}
		v = nv;
		memset(&v[cnt], 0, sizeof v[cnt]);
		rc = summary_from_mount(runs, de->d_name, &v[cnt++]);
	}
	closedir(d);
	if (rc < 0) {
		fprintf(stderr, "skillfs runs: out of memory\n");
		runlist_free(v, cnt);
		return -1;
	}
	if (cnt)
		qsort(v, cnt, sizeof *v, by_age);
	*out = v;
	*n = cnt;
	return 0;
}

/* A short age: 42s, 5m, 3h, 12d; "-" when unknown. */
static void age_text(char *out, size_t size, int64_t created_ns, time_t now)
{
	if (!created_ns) {
		snprintf(out, size, "-");
		return;
	}
	long long s = (long long)now - created_ns / 1000000000;
	if (s < 0)
		s = 0;
	if (s < 60)
		snprintf(out, size, "%llds", s);
	else if (s < 3600)
		snprintf(out, size, "%lldm", s / 60);
	else if (s < 86400)
		snprintf(out, size, "%lldh", s / 3600);
	else
		snprintf(out, size, "%lldd", s / 86400);
}

static void print_runs(const struct run_summary *v, size_t n)
{
	int wid = 2, wst = 5, wcf = 6;
	for (size_t i = 0; i < n; i++) {
		int a = (int)strlen(v[i].id), b = (int)strlen(v[i].state), c = (int)strlen(v[i].config);
		wid = a > wid ? a : wid;
		wst = b > wst ? b : wst;
		wcf = c > wcf ? c : wcf;
	}
	printf("%-*s  %-*s  %-*s  %5s  %s\n", wid, "ID", wst, "STATE", wcf, "CONFIG", "AGE",
	       "PROMPT");
	time_t now = time(NULL);
	for (size_t i = 0; i < n; i++) {
		char age[32];
		age_text(age, sizeof age, v[i].created_ns, now);
		printf("%-*s  %-*s  %-*s  %5s  %s\n", wid, v[i].id, wst, v[i].state, wcf,
		       v[i].config, age, v[i].prompt_line ? v[i].prompt_line : "");
	}
}

int client_runs(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "mount", required_argument, NULL, 'C' },
		{ "state", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *given = NULL, *state = NULL;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, "+C:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'C':
			given = optarg;
			break;
		case 'S':
			state = optarg;
			break;
		case 'h':
			fputs("usage: skillfs runs [-C MOUNTPOINT] [--state DB]\n", stdout);
			return 0;
		default:
			fputs("usage: skillfs runs [-C MOUNTPOINT] [--state DB]\n", stderr);
			return CLIENT_TROUBLE;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "skillfs runs: unexpected argument '%s'\n", argv[optind]);
		return CLIENT_TROUBLE;
	}
	struct run_summary *v = NULL;
	size_t n = 0;
	if (state) {
		char *err = NULL;
		if (runlist_read(state, &v, &n, &err) < 0) {
			fprintf(stderr, "skillfs runs: %s\n", err ? err : "out of memory");
			free(err);
			return CLIENT_TROUBLE;
		}
	} else {
		char *mnt = find_mount("runs", given);
		int rc = mnt ? list_mount(mnt, &v, &n) : -1;
		free(mnt);
		if (rc < 0)
			return CLIENT_TROUBLE;
	}
	print_runs(v, n);
	runlist_free(v, n);
	return fflush(stdout) == 0 ? 0 : CLIENT_TROUBLE;
}
