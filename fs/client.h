/* client: `skillfs run` and `skillfs runs`, commands that use a mount
 * through its files only, exactly as a script would (read runs/new, mkdir,
 * write config, skills, workdir and prompt, watch status and transcript,
 * read result), so they work with any mount a user can reach, and show
 * whatever the mount's files show. */
#ifndef SKILLFS_CLIENT_H
#define SKILLFS_CLIENT_H

/* Exit statuses of `skillfs run`. */
enum client_exit {
	CLIENT_COMPLETED = 0, /* result on stdout */
	CLIENT_FAILED = 1,    /* the run's error on stderr */
	CLIENT_CANCELLED = 2,
	CLIENT_WAITING = 3,   /* waits for a person: pending on stdout */
	CLIENT_TROUBLE = 4,   /* no run was started: bad usage, no mount, a
	                         write the mount refused */
};

/* The usage lines and options of `run` and `runs`, for skillfs --help. */
extern const char client_usage[];

/* skillfs run [-C MOUNTPOINT] [--config NAME] [--skill NAME]...
 * [--workdir DIR] [PROMPT... | -]: makes a run through the mount, shows
 * its transcript on stderr as it grows, and returns an enum client_exit.
 * argv[0] is "run". */
int client_run(int argc, char **argv);

/* skillfs runs [-C MOUNTPOINT] [--state DB]: one line per run (id, state,
 * configuration, age, first line of the prompt), oldest first, read from
 * the mount or, with --state, read-only from a run database. Returns 0, or
 * CLIENT_TROUBLE. argv[0] is "runs". */
int client_runs(int argc, char **argv);

#endif
