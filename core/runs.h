/* runs: the run manager (DESIGN.md section 6). It owns the store, the
 * queue and the worker threads, and answers everything the mount asks
 * about runs/: which runs and files exist, their bytes, and what a write,
 * truncate, last close, mkdir or rmdir does. FUSE threads only ever call the
 * quick functions here; models and tools run on the workers. */
#ifndef SKILLFS_RUNS_H
#define SKILLFS_RUNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "buf.h"
#include "runstate.h"
#include "strlist.h"

struct engine;
struct file_bytes;
struct runs;

#define RUN_ID_MAX 64

/* What changed in a run, for runs_change_fn (bits). */
enum run_change_what {
	RUN_CHANGED_CREATED = 1 << 0,   /* the run directory appeared */
	RUN_CHANGED_REMOVED = 1 << 1,   /* ... or went away */
	RUN_CHANGED_STATE = 1 << 2,     /* its state (and the files that come
	                                   and go with it) */
	RUN_CHANGED_SUBAGENTS = 1 << 3, /* a sub-agent started or ended */
	RUN_CHANGED_NOW = 1 << 4,       /* from a worker, not a request: show
	                                   it before returning (the run's
	                                   waiters are answered next, and a
	                                   script then lists the directory) */
};

/* Called (from any thread, never with runs locks held) after a change of
 * run id that shows in a listing; what is a set of run_change_what bits.
 * The bytes of run files change without a call: they are never cached. */
typedef void (*runs_change_fn)(void *arg, const char *id, unsigned what);

/* Called once when a wait ends: err is 0 and status the run's state name,
 * or err is EINTR (shutdown) / ENOENT (the run was removed). */
typedef void (*runs_wait_fn)(void *arg, int err, const char *status);

/* Opens the store at state_path (creating its directory), loads every run,
 * re-queues queued runs and resumes interrupted ones (R7), and starts the
 * configured number of workers. Returns NULL with *err set. */
struct runs *runs_open(struct engine *e, const char *state_path, char **err);

/* Sets the change callback (before any run can change). */
void runs_set_change_fn(struct runs *r, runs_change_fn fn, void *arg);

/* Whether users other than the mounting one reach the mount (FUSE's
 * allow_other). Off: every run shows the modes it always had (the
 * mounting user alone gets in). On: a run is its owner's alone: its
 * directories are 0700 and its files 0600 or 0400 (writable or not), owned
 * by the uid and gid that made it; runs/ is 01777, so that anyone can make
 * a run and only its owner (or root) remove it; runs_access and
 * runs_remove refuse everyone else. Call before the mount serves
 * requests. */
void runs_set_allow_other(struct runs *r, bool allow_other);

/* The mode bits of runs/ itself: 0755, or 01777 with allow_other. */
mode_t runs_dir_perm(const struct runs *r);

/* Whether user uid may look into run id, read its files and write them
 * (as their modes say): 0; -EACCES when allow_other is on and uid is
 * neither the run's owner nor root; -ENOENT when there is no such run. */
int runs_access(struct runs *r, const char *id, uid_t uid);

/* Begins shutdown: answers every pending wait with EINTR (and any later
 * one), and tells the workers to stop after the current step. Does not
 * block. */
void runs_stop(struct runs *r);

/* Answers every pending wait with EINTR, stops the workers (a run in the
 * middle of a step stays running and resumes at the next mount), and
 * closes the store. NULL is ignored. */
void runs_close(struct runs *r);

/* runs_close, waiting at most timeout_ms for the workers to end their
 * current step (a model or tool call in flight is abandoned: they are
 * told to stop, which kills its process). Returns true when r is closed;
 * false when some worker still runs: then r is left as it is (still in
 * use; the process is to exit without freeing it), its runs resumable. */
bool runs_close_within(struct runs *r, int timeout_ms);

/* Opens the run store at engine_state_path(e, state_path), starts the
 * workers, opens the catalogue's audit trail in the same database
 * (audit.h) and attaches the manager to e (engine_runs). Returns 0, or -1
 * with *err set. */
int runs_attach(struct engine *e, const char *state_path, char **err);

struct audit;
/* The audit trail runs_attach opened, or NULL (r NULL, or not attached). */
struct audit *runs_audit(struct runs *r);

/* runs_detach, waiting at most timeout_ms (runs_close_within). Returns
 * true when the manager is closed and detached; false when a worker still
 * runs: then the manager stays attached, in use, and the process is to
 * exit (_exit) without closing the engine. */
bool runs_detach_within(struct engine *e, int timeout_ms);

/* Takes the lock of the run store at engine_state_path(e, state_path)
 * (statelock.h; creating its directory): one daemon per state database,
 * whatever becomes of the database file. Returns the descriptor that holds
 * it (keep it open while the store is in use, across the daemon's fork;
 * statelock_release), or -1 with *err set, e.g. when another skillfs holds
 * it. */
int runs_lock_state(struct engine *e, const char *state_path, char **err);

/* Checks that the run store at engine_state_path(e, state_path) opens and
 * migrates (creating its directory), and closes it again: nothing is
 * loaded, no worker starts and no run moves. For errors to be seen before
 * a daemon detaches; runs_attach opens it for use. Returns 0, or -1 with
 * *err set. */
int runs_check_store(struct engine *e, const char *state_path, char **err);

/* Stops e's run manager (runs stay resumable; pending waits are answered)
 * and detaches it. Harmless when none is attached. */
void runs_detach(struct engine *e);

/* Whether id is a valid run id: 1-RUN_ID_MAX of A-Za-z0-9._-, not . or
 * .., and not the name of a file of runs/ ("new", RUNS_ERROR_NAME). Every
 * call here taking an id answers an invalid one as it does an
 * unknown one (-ENOENT, false): an id is never cut to fit. */
bool runs_id_valid(const char *id);

/* mkdir runs/<id> by user uid (group gid), who owns the run from now:
 * -EINVAL for a bad id (a longer one too: it is within the mount's
 * NAME_MAX), -EEXIST when taken, -EIO once the state database's file was
 * deleted or replaced (runs_store_gone). */
int runs_create(struct runs *r, const char *id, uid_t uid, gid_t gid);
/* The name of the file in runs/ that says why new runs are refused. */
#define RUNS_ERROR_NAME "ERROR"

/* Why new runs are refused, once the state database's file is found
 * deleted or replaced while the store holds it open (checked at each
 * runs_create, and here at most once a second): what happened and what to
 * do (remount), valid until runs_close; NULL while all is well. The first
 * call to notice it logs it on stderr. Runs made before keep working on
 * the open database. */
const char *runs_store_gone(struct runs *r);

/* rmdir runs/<id> by user uid: -ENOENT; -EPERM when allow_other is on and
 * uid is neither the owner nor root; -EBUSY while the run is active. */
int runs_remove(struct runs *r, const char *id, uid_t uid);

/* A file of run id was opened (hold true) or closed (false): runs.keep
 * never removes a run while a file of it is open (a reader, `tail -f`). */
void runs_hold(struct runs *r, const char *id, bool hold);
/* A fresh id no run uses (creates nothing), NUL-terminated, new at each
 * call: scripts reading runs/new at once get different ids. Every id has
 * the same length (what stat says of runs/new); *mtime (may be NULL) is
 * the same for all (the run manager's start). */
void runs_new_id(struct runs *r, char *out, size_t size, struct timespec *mtime);
/* Every run id, sorted. */
int runs_list(struct runs *r, struct strlist *out);
/* When a run last came or went (the mtime of runs/). */
void runs_dir_mtime(struct runs *r, struct timespec *out);
/* Whether a run exists. */
bool runs_exists(struct runs *r, const char *id);

/* One file of a run as the mount shows it. */
struct run_file {
	bool dir;              /* the run's directory, subagents/ and
	                          subagents/<chat>/ */
	mode_t perm;           /* 0555 for a directory, 0444 for a file, 0644
	                          while writable; with allow_other 0700, 0400
	                          and 0600 */
	uid_t uid;             /* the run's owner */
	gid_t gid;
	struct buf data;       /* the bytes (files only), unless bytes is set */
	struct file_bytes *bytes; /* or: the bytes of a large file, shared
	                          (transcript, messages.json, events); drop
	                          the reference with file_bytes_unref */
	struct timespec mtime;
	bool sized;            /* runs_attr_file only: the file's size is size,
	                          known without rendering it (data and bytes
	                          are empty) */
	uint64_t size;
};

/* When run id last changed (its state, a message, a write to one of its
 * files): a file of the run rendered since then is still what it shows.
 * Returns 0, or -ENOENT. */
int runs_changed_at(struct runs *r, const char *id, struct timespec *out);

/* Whether every run directory holds a file called name, whatever its
 * state (status, prompt, wait, ...; not result, error, pending,
 * allowed-tools or subagents, which come and go). */
bool runs_file_always_present(const char *name);

/* The names in runs/<id>/<sub> (sub "" = the run directory,
 * "subagents", or "subagents/<chat>"), sorted; -ENOENT/-ENOTDIR. */
int runs_readdir(struct runs *r, const char *id, const char *sub, struct strlist *out);
/* The file or directory runs/<id>/<sub>; free f->data with buf_free and
 * f->bytes with file_bytes_unref. A large file rendered from all of the
 * run's messages or events is rendered once per change of the run: a stat
 * or read at the same version is answered from those bytes. The
 * `wait` file holds the status when the run is settled, else nothing (a
 * reader is held until it settles: fs/ does that). -ENOENT when it does
 * not exist (yet). */
int runs_stat_file(struct runs *r, const char *id, const char *sub, struct run_file *f);
/* As runs_stat_file, for a stat: a messages.json not rendered at this
 * version comes back sized (f->sized, f->size) from the sizes the store
 * keeps, without reading or rendering a message; a read must use
 * runs_stat_file. */
int runs_attr_file(struct runs *r, const char *id, const char *sub, struct run_file *f);

/* Writes to runs/<id>/<name> (prompt, config, skills, workdir, ctl,
 * input), validated at once (D9): -EACCES when the file is read-only now,
 * -EINVAL for an unknown configuration, skill or command, or a workdir
 * workdir_check refuses (its reason is logged as an event
 * "workdir_refused" {"path", "reason"}), -EFBIG over a size cap.
 * A workdir is stored resolved; `: > workdir` takes it away.
 * Returns the bytes taken or a negative errno; nothing changes on error. */
ssize_t runs_write(struct runs *r, const char *id, const char *name, const char *data,
		   size_t len, off_t off);
/* Whether runs/<id>/<name> may be written now (an open for writing is
 * refused otherwise): 0, -EACCES, or -ENOENT for no such run. */
int runs_writable(struct runs *r, const char *id, const char *name);
/* Truncates a writable file (O_TRUNC). Same errors as runs_write. */
int runs_truncate(struct runs *r, const char *id, const char *name, off_t size);
/* An open of runs/<id>/<name> that may write. Opens of prompt and input
 * are counted, so that what a close starts waits for the last one: a
 * shell's `{ echo; cat; } > prompt` closes a copy of the descriptor in
 * each command it runs. Returns the ticket for runs_close_writer; 0 when
 * closing the file starts nothing. */
uint64_t runs_open_writer(struct runs *r, const char *id, const char *name);
/* A close of an open from runs_open_writer (its ticket): release, the
 * end of that open; else a close of the descriptor by the process that
 * opened it (a FLUSH), which does not end the open but answers before
 * the close returns. When that open is (or was) the last one, a written,
 * non-empty prompt enqueues the run (R6) and a written input answers a
 * question; doing so at the opener's close makes the run queued, and
 * stored, by the time its writer's close returns. A ticket of a run since
 * removed (or removed and made again) changes nothing. Returns 0 or a
 * negative errno; for a prompt, the store's (-EAGAIN for a database
 * locked elsewhere, -ENOSPC, -EROFS, -EIO), with the run left created
 * until the prompt is written again. */
int runs_close_writer(struct runs *r, const char *id, const char *name, uint64_t ticket,
		      bool release);

/* Waits until run id is settled (completed, failed, cancelled, or waiting
 * for a person). Returns 0 and copies the state name into status (size
 * bytes) when it is settled now; 1 when fn will be called later (then
 * *handle identifies the wait); or a negative errno. */
int runs_wait(struct runs *r, const char *id, runs_wait_fn fn, void *arg, char *status,
	      size_t size, uint64_t *handle);
/* Cancels a pending wait; returns true when it was still pending (fn will
 * not be called), false when fn has been or is being called. */
bool runs_wait_cancel(struct runs *r, uint64_t handle);

/* The state of a run (-ENOENT when there is none). */
int runs_state(struct runs *r, const char *id, enum runstate *out);

#endif
