/* skillfs: the command line. Parses arguments, opens the engine, and
 * either mounts or runs `skillfs check`; `skillfs run` and `skillfs runs`
 * go to the client (client.h), which needs no engine; `skillfs fingerprint`
 * prints a directory's digest. */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "catalog.h"
#include "check.h"
#include "client.h"
#include "config.h"
#include "engine.h"
#include "model.h"
#include "mount.h"
#include "mountopts.h"
#include "statecheck.h"
#include "strlist.h"
#include "watcher.h"
#include "watchlimit.h"

static const char usage[] =
	"usage: skillfs [-c CONFIG] [-s SKILLS_DIR]... [-r SKILLS_DIR]... [--state DB] [-f] [-d]\n"
	"               [-o OPT,...] MOUNTPOINT\n"
	"       skillfs CONFIG MOUNTPOINT [-o OPT,...]     (as mount -t fuse.skillfs runs it)\n"
	"       skillfs check [-c CONFIG] [-s SKILLS_DIR]... [-r SKILLS_DIR]... [--state DB]\n"
	"                     [--claude]\n"
	"       skillfs fingerprint [-r] DIR\n"
	"%s"
	"       skillfs --help | --version\n"
	"\n"
	"  -c, --config FILE    the instance config (YAML); without it every -s\n"
	"                       or -r directory is a first_party source, every built-in\n"
	"                       tool is registered, and configuration 'default'\n"
	"                       attaches every skill\n"
	"  -s, --skills DIR     a directory of skills, each in a directory of its\n"
	"                       own directly in DIR (repeatable)\n"
	"  -r, --recursive DIR  a directory whose skills lie at any depth below it,\n"
	"                       as a source with recursive: true (repeatable)\n"
	"      --state DB       the run database (default $XDG_STATE_HOME/skillfs/state.db)\n"
	"  -f, --foreground     do not daemonise\n"
	"  -d, --debug          print every FUSE request (implies -f)\n"
	"  -o OPT,...           mount options: state=DB, skills=DIR[:DIR...] and\n"
	"                       recursive=DIR[:DIR...] as --state, -s and -r; the\n"
	"                       others (allow_other, ro...) go to FUSE\n"
	"\n"
	"Unmount with: fusermount3 -u MOUNTPOINT (or send SIGINT/SIGTERM).\n"
	"`skillfs check` lints skills and config and prints each configuration's\n"
	"resolution; it exits 1 when the config or an attached skill is invalid.\n"
	"With --state DB it verifies that run database (integrity, schema version,\n"
	"the runs a mount would take up again) without changing it; it exits 1\n"
	"when the database is damaged or cannot be used.\n"
	"With --claude it also prints each configuration's Claude Code settings,\n"
	"as configs/<cfg>/claude/settings.json holds them, and their warnings.\n"
	"`skillfs fingerprint DIR` prints the digest of the files of DIR's skills\n"
	"(-r: of the skills at any depth below it, as a recursive source) as\n"
	"sha256:HEX, the value of sources[].fingerprint that pins DIR to them.\n";

struct cli {
	const char *config;
	struct strlist dirs;  /* -s and -r, in their order */
	bool *recursive;      /* per dirs item: given with -r */
	const char *state;
	bool foreground, debug;
	struct buf fuse_opts; /* every -o, joined with commas */
	struct mountopts mo;  /* fuse_opts split: skillfs's own, and libfuse's */
	const char *mountpoint;
	bool check;
	bool claude;          /* check --claude */
};

/* Adds a -s (recursive false) or -r directory. Returns 0 or -1 on ENOMEM. */
static int add_dir(struct cli *cli, const char *dir, bool recursive)
{
	bool *r = realloc(cli->recursive, (cli->dirs.n + 1) * sizeof *r);
	if (!r)
		return -1;
	cli->recursive = r;
	if (strlist_add(&cli->dirs, dir) < 0)
		return -1;
	r[cli->dirs.n - 1] = recursive;
	return 0;
}

static void cli_free(struct cli *cli)
{
	strlist_free(&cli->dirs);
	free(cli->recursive);
	cli->recursive = NULL;
	buf_free(&cli->fuse_opts);
	mountopts_free(&cli->mo);
}

/* Takes skillfs's own options (state=, skills=, recursive=) out of the -o
 * options (mountopts.h), as mount.fuse3 passes an fstab line's. Returns 0,
 * or -1 with a message printed. */
static int take_mount_options(struct cli *cli)
{
	char *err = NULL;
	if (mountopts_parse(cli->fuse_opts.data, &cli->mo, &err) < 0) {
		fprintf(stderr, "skillfs: %s\n", err ? err : "out of memory");
		free(err);
		return -1;
	}
	if (cli->mo.state) {
		if (cli->state) {
			fprintf(stderr, "skillfs: the state database is given twice (--state and "
					"-o state=)\n");
			return -1;
		}
		cli->state = cli->mo.state;
	}
	for (size_t i = 0; i < cli->mo.dirs.n; i++)
		if (add_dir(cli, cli->mo.dirs.items[i], cli->mo.recursive.items[i][0] == '1') < 0) {
			fprintf(stderr, "skillfs: out of memory\n");
			return -1;
		}
	return 0;
}

static int parse(int argc, char **argv, struct cli *cli)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "skills", required_argument, NULL, 's' },
		{ "recursive", required_argument, NULL, 'r' },
		{ "state", required_argument, NULL, 'S' },
		{ "claude", no_argument, NULL, 'C' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "debug", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int first = 1;
	if (argc > 1 && strcmp(argv[1], "check") == 0) {
		cli->check = true;
		first = 2;
	}
	optind = first;
	int c;
	while ((c = getopt_long(argc, argv, "c:s:r:fdo:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			cli->config = optarg;
			break;
		case 's':
		case 'r':
			if (add_dir(cli, optarg, c == 'r') < 0) {
				fprintf(stderr, "skillfs: out of memory\n");
				return -1;
			}
			break;
		case 'S':
			cli->state = optarg;
			break;
		case 'C':
			cli->claude = true;
			break;
		case 'f':
			cli->foreground = true;
			break;
		case 'd':
			cli->debug = cli->foreground = true;
			break;
		case 'o':
			/* Each -o adds to the last (as for mount(8)): a second
			 * one must not drop, say, allow_other. */
			if ((cli->fuse_opts.len && buf_puts(&cli->fuse_opts, ",") < 0) ||
			    buf_puts(&cli->fuse_opts, optarg) < 0) {
				fprintf(stderr, "skillfs: out of memory\n");
				return -1;
			}
			break;
		case 'h':
			printf(usage, client_usage);
			exit(0);
		case 'V':
			printf("skillfs %s\n", SKILLFS_VERSION);
			exit(0);
		default:
			fprintf(stderr, usage, client_usage);
			return -1;
		}
	}
	if (cli->claude && !cli->check) {
		fprintf(stderr, "skillfs: --claude is an option of skillfs check\n%s", usage);
		return -1;
	}
	if (cli->check) {
		if (optind != argc) {
			fprintf(stderr, "skillfs check: unexpected argument '%s'\n", argv[optind]);
			fprintf(stderr, usage, client_usage);
			return -1;
		}
	} else {
		/* MOUNTPOINT, or SOURCE MOUNTPOINT as mount.fuse3 runs us (with
		 * the -o options after them): SOURCE is the config file. */
		if (optind != argc - 1 && optind != argc - 2) {
			fputs(optind >= argc ? "skillfs: missing MOUNTPOINT\n"
					     : "skillfs: too many arguments\n",
			      stderr);
			fprintf(stderr, usage, client_usage);
			return -1;
		}
		if (optind == argc - 2) {
			if (cli->config) {
				fprintf(stderr, "skillfs: the config file is given twice (-c %s and "
						"SOURCE %s)\n", cli->config, argv[optind]);
				return -1;
			}
			cli->config = argv[optind++];
		}
		cli->mountpoint = argv[optind];
		if (take_mount_options(cli) < 0)
			return -1;
	}
	if (!cli->config && cli->dirs.n == 0 && !(cli->check && cli->state)) {
		fprintf(stderr, "skillfs: give a config file (-c) or a skills directory (-s or -r)\n");
		return -1;
	}
	return 0;
}

/* path made absolute against the current directory: the daemon works
 * from / once it has started (libfuse changes directory), so a relative
 * mount point or state path would name something else by then. The
 * mount point must exist; the state path may not yet. Returns a malloc'd
 * path, or NULL with a message printed. */
static char *absolute(const char *path, bool must_exist, const char *what)
{
	if (must_exist) {
		char *r = realpath(path, NULL);
		if (!r)
			fprintf(stderr, "skillfs: %s %s: %s\n", what, path, strerror(errno));
		return r;
	}
	char *r = config_path_absolute(path);
	if (!r)
		fprintf(stderr, "skillfs: %s %s: %s\n", what, path, strerror(errno));
	return r;
}

/* Prints a check's report out (and frees it); the exit status for its
 * count of errors: 0 none, 1 some, 2 when the report ran out of memory. */
static int print_report(struct buf *out, int errors)
{
	if (out->data)
		fwrite(out->data, 1, out->len, stdout);
	buf_free(out);
	if (errors < 0) {
		fprintf(stderr, "skillfs check: out of memory\n");
		return 2;
	}
	return errors ? 1 : 0;
}

/* skillfs check --state DB: 0 when the database can be used, 1 when not. */
static int run_state_check(const char *path)
{
	struct buf out = { 0 };
	return print_report(&out, statecheck_report(path, &out));
}

static int run_check(struct engine *e, const char *state, bool claude)
{
	/* A pinned source that does not match is compared with what the
	 * state database recorded when it last matched (read-only). */
	char *path = engine_state_path(e, state);
	struct statecheck_pins *pins = statecheck_pins_open(path);
	free(path);
	if (pins) {
		engine_set_pin_history(e, statecheck_pins(pins));
		engine_reload(e, false, NULL);
	}
	struct snapshot *s = engine_snapshot(e);
	struct buf out = { 0 };
	/* Whether the inotify watch limit leaves a mount enough watches. */
	struct watch_limit lim;
	watch_limit_read(&lim);
	struct check_watch watch = {
		.needed = watcher_dirs_needed(snapshot_config(s), s->catalog, ENGINE_MAX_DEPTH),
		.limit = lim.limit,
		.sysctl = lim.sysctl,
		.in_use = lim.in_use,
	};
	struct check_options opts = { .claude = claude,
				      .watch = watch.needed != SIZE_MAX ? &watch : NULL };
	int errors = check_report_opts(snapshot_config(s), s->catalog, s->config_error, &opts,
				       &out);
	snapshot_unref(s);
	engine_set_pin_history(e, NULL);
	statecheck_pins_close(pins);
	return print_report(&out, errors);
}

/* skillfs fingerprint [-r] DIR: 0 and the digest on stdout; 1 when a
 * file could not be read (the digest printed would never match) or DIR
 * cannot be read; 2 for a usage error. */
static int run_fingerprint(int argc, char **argv)
{
	bool recursive = false;
	int i = 2;
	if (i < argc && (strcmp(argv[i], "-r") == 0 || strcmp(argv[i], "--recursive") == 0)) {
		recursive = true;
		i++;
	}
	if (i != argc - 1) {
		fputs(usage, stderr);
		return 2;
	}
	char digest[FP_TEXT_SIZE], *err = NULL;
	int rc = catalog_fingerprint(argv[i], recursive, NULL, digest, &err);
	if (rc >= 0)
		printf("%s\n", digest);
	if (rc != 0)
		fprintf(stderr, "skillfs fingerprint: %s%s\n", rc > 0 ? "not every file could be "
				"read, so this digest will not match: " : "", err ? err : "out of memory");
	free(err);
	return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "run") == 0)
		return client_run(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "runs") == 0)
		return client_runs(argc - 1, argv + 1);
	struct cli cli = { 0 };
	if (argc > 1 && strcmp(argv[1], "fingerprint") == 0)
		return run_fingerprint(argc, argv);
	if (parse(argc, argv, &cli) < 0) {
		cli_free(&cli);
		return 2;
	}
	if (cli.check && cli.state && !cli.config && cli.dirs.n == 0) {
		int status = run_state_check(cli.state);
		cli_free(&cli);
		return status;
	}
	struct engine_options eo = {
		.config_path = cli.config,
		.dirs = (const char *const *)cli.dirs.items,
		.recursive = cli.recursive,
		.ndirs = cli.dirs.n,
		.watch = !cli.check,
	};
	char *err = NULL;
	if (model_global_init(&err) < 0) {
		fprintf(stderr, "skillfs: %s\n", err ? err : "cannot initialise libcurl");
		free(err);
		cli_free(&cli);
		return 1;
	}
	struct engine *e = engine_open(&eo, &err);
	if (!e) {
		fprintf(stderr, "skillfs: %s\n", err ? err : "out of memory");
		free(err);
		cli_free(&cli);
		return 1;
	}
	int status;
	char *mountpoint = NULL, *state = NULL;
	if (cli.check) {
		status = run_check(e, cli.state, cli.claude);
		if (cli.state) {
			int st = run_state_check(cli.state);
			status = st > status ? st : status;
		}
	} else if (!(mountpoint = absolute(cli.mountpoint, true, "mount point")) ||
		   (cli.state && !(state = absolute(cli.state, false, "state database")))) {
		status = 1;
	} else {
		/* What check would warn about (a mistyped key, a source that
		 * cannot be read) is said once here too; the mount shows it in
		 * every configuration's warnings file. */
		struct snapshot *s = engine_snapshot(e);
		const struct config *c = snapshot_config(s);
		for (size_t i = 0; i < c->warnings.n; i++)
			fprintf(stderr, "skillfs: warning: %s\n", c->warnings.items[i]);
		for (size_t i = 0; s->catalog && i < s->catalog->warnings.n; i++)
			fprintf(stderr, "skillfs: warning: %s\n", s->catalog->warnings.items[i]);
		snapshot_unref(s);
		uint64_t listings = 0;
		struct mount_options mo = {
			.mountpoint = mountpoint,
			.foreground = cli.foreground,
			.debug = cli.debug,
			.fuse_opts = cli.mo.rest.len ? cli.mo.rest.data : NULL,
			.state_path = state,
			.listings = &listings,
		};
		status = mount_run(e, &mo);
		if (getenv("SKILLFS_STATS"))
			fprintf(stderr, "skillfs: stats: listings_taken=%llu resolutions_built=%llu\n",
				(unsigned long long)listings,
				(unsigned long long)engine_resolutions_built(e));
	}
	free(mountpoint);
	free(state);
	engine_close(e);
	model_global_cleanup();
	cli_free(&cli);
	return status;
}
