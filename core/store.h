/* store: the durable record of runs, in SQLite (DESIGN.md section 6,
 * R6-R8).
 *
 * Tables: runs (one row per run), messages (every message of every chat of
 * a run, numbered 1, 2, ... per chat), chats (sub-agents), events (the
 * run's log, numbered 1, 2, ... per run), step_starts (the steps committed
 * as started before they ran: at most once, R7). JSON columns hold
 * jansson-dumped text.
 *
 * Schema versions live in PRAGMA user_version and are migrated forward in
 * one transaction when the database is opened:
 *   1  runs, messages, chats, events, without a stored allow-list
 *   2  runs.allowed_tools (NULL for rows written at version 1: R8)
 *   3  chats.tools (NULL for chats written before)
 *   4  fewer pages per commit: no index of runs by state, events keyed
 *      by (run_id, seq) alone (WITHOUT ROWID)
 *   5  runs.owner_uid, runs.owner_gid: who made the run (NULL for rows
 *      written before: the daemon's user owns those)
 *   6  runs.workdir: the project directory the run works in (NULL: none,
 *      as for every row written before)
 *   7  step_starts: the steps (a tool call with side effects, a model
 *      call) committed as started before they run (none for older runs)
 *   8  messages.rendered_bytes: each message's size in messages.json
 *   9  runs.provenance (NULL for older runs), audit (the audit trail),
 *      audit_state (the catalogue as the trail last saw it),
 *      pin_matches (each pinned source's files when it last matched)
 * A database of a newer version than STORE_SCHEMA_VERSION is refused.
 *
 * Durability: WAL journal with synchronous=NORMAL. Every call returns only
 * after its transaction committed, and a committed transaction survives a
 * crash or kill of the daemon process, which is the failure model of
 * section 6 ("nothing acknowledged is ever lost" across a crash or
 * unmount). Surviving an OS crash or power loss as well would need
 * synchronous=FULL, an fsync on every commit.
 *
 * Threads: one connection guarded by one mutex; every function may be called
 * from any thread at once. Each call is one transaction, so a reader never
 * sees half of a write (SQLite's own FULLMUTEX would serialise single calls
 * but not keep a multi-statement transaction together).
 *
 * Errors: functions return 0 or a negative errno:
 *   -ENOENT  no such run (or chat)
 *   -EEXIST  the run (or chat) id is taken
 *   -EINVAL  a bad argument, or a move runstate_can_move() refuses
 *   -EBUSY   the run is not in the state the call requires
 *   -ENOMEM, -ENOSPC, -EROFS, -EIO  from memory or the database
 * and, when err is not NULL, set *err to a malloc'd message for the user
 * (the caller frees it; it is left alone on success). */
#ifndef SKILLFS_STORE_H
#define SKILLFS_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "buf.h"
#include "runstate.h"
#include "strlist.h"

#define STORE_SCHEMA_VERSION 9

struct store;

/* One run as stored. Strings are NULL when unset; times are unix
 * nanoseconds, 0 when unset. */
struct run_row {
	char *id;
	int64_t seq;          /* enqueue order (1, 2, ...); 0 while created */
	char *config;         /* configuration name; "default" until set */
	char *prompt;         /* NULL until enqueued */
	json_t *forced_skills; /* JSON array of names; never NULL */
	json_t *allowed_tools; /* the allow-list stored at enqueue (R6); NULL
				  when none was stored (R8: an older schema
				  wrote the row, or not yet enqueued) */
	enum runstate state;
	char *mode;           /* free text for the engine (e.g. execution mode) */
	char *chat_id;        /* the main chat's id, once running */
	char *model;          /* model name, once running */
	char *error;          /* why it failed */
	char *result;         /* the final answer */
	json_t *pending;      /* what an approval or question is about */
	char *input;          /* the person's last answer */
	json_t *usage;        /* token usage, any JSON */
	int64_t created_at;
	int64_t updated_at;   /* last write touching the run */
	int64_t started_at;   /* first move to running */
	int64_t finished_at;  /* move to a terminal state */
	int64_t owner_uid;    /* who made the run (uid and gid), -1 when */
	int64_t owner_gid;    /* not recorded (made before schema 5) */
	char *workdir;        /* the project directory (resolved, absolute),
	                         or NULL: the run works in its workspace */
	json_t *provenance;   /* what the run saw of its skills when it was
	                         enqueued (provenance.h), or NULL (none
	                         stored: enqueued before schema 9) */
};

/* One chat of a run (a sub-agent; the main chat may have a row too). */
struct chat_row {
	char *chat_id;
	char *parent_chat; /* NULL for a chat started by the main agent's run */
	char *skill;       /* the skill it runs, or NULL */
	enum runstate state;
	char *result;
	json_t *tools;     /* the tools it was offered (array of names); NULL
	                      when not recorded (schema 2 and before) */
	int64_t created_at;
	int64_t updated_at;
};

/* Optional changes applied in the same transaction as a state move (see
 * store_run_transition). Text fields: NULL leaves the column alone. JSON
 * fields: NULL leaves it alone, json_null() clears it, any other value
 * replaces it. With msg set, msg is appended to chat msg_chat (as
 * store_message_append does). */
struct run_change {
	const char *error;
	const char *result;
	const char *input;
	const char *mode;
	const char *chat_id;
	const char *model;
	const json_t *pending;
	const json_t *usage;
	const char *msg_chat;
	const json_t *msg;
	const json_t *msgs; /* more messages for msg_chat: an array, appended
	                       after msg, in order */
};

/* Opens (creating the file, not its directory) the database at path, sets
 * WAL, synchronous=NORMAL, a busy timeout and foreign keys, and migrates the
 * schema to STORE_SCHEMA_VERSION in one transaction. Refuses a database of
 * a newer version, one that holds tables but no skillfs version, or one
 * another store holds open (flock: one daemon per database; other programs
 * may read it meanwhile). A thread with its own connection copies the WAL
 * back into the database, off the commit path. Returns the store, or NULL
 * with *err set. */
struct store *store_open(const char *path, char **err);

/* Waits, holding no lock of the store's, until a write could begin now
 * (no other process holds the database's write lock), for at most
 * timeout_ms. Returns 0; -EAGAIN when it is still held elsewhere then; or
 * the errno of another failure (-EIO for an unusable -shm file, ...).
 * A request about to commit calls it first, before taking locks of its
 * own, so that its wait holds up no one else. */
int store_wait_writable(struct store *st, int timeout_ms);

/* How many rows this store has written so far: a read of the store made
 * after it returned n shows every write counted in n. Never blocks (no
 * lock is taken), so a cache of what was read can be checked cheaply. */
uint64_t store_writes(struct store *st);

/* The identity (st_dev, st_ino, ...) of the database file the store opened,
 * whatever its path names now. Returns 0 or a negative errno. */
int store_file_stat(struct store *st, struct stat *out);

/* Closes the database (checkpointing the WAL). NULL is ignored. No call may
 * be in progress or follow. */
void store_close(struct store *st);

/* Adds a run in state created, config "default", no forced skills, and
 * no recorded owner. -EEXIST when id is taken; -EINVAL for an empty id. */
int store_run_create(struct store *st, const char *id, char **err);

/* As store_run_create, recording the run's owner: uid and gid (both 0 ..
 * 2^32-2), or both -1 for none. -EINVAL for any other pair. */
int store_run_create_owned(struct store *st, const char *id, int64_t uid, int64_t gid,
			   char **err);

/* The owner of a run as recorded: *uid and *gid, both -1 when none was
 * (a run made before schema 5, or by store_run_create). -ENOENT when there
 * is no run; -EIO (and -1, -1) when the stored owner is no uid and gid. */
int store_run_owner(struct store *st, const char *id, int64_t *uid, int64_t *gid,
		    char **err);

/* Reads a run into *out (zeroed first; free with run_row_free). -ENOENT when
 * there is none; -EIO when a stored value cannot be understood. */
int store_run_get(struct store *st, const char *id, struct run_row *out,
		  char **err);

/* Frees the fields of r and zeroes it. NULL is ignored. */
void run_row_free(struct run_row *r);

/* The state of a run alone (cheap: for status and wait). */
int store_run_state(struct store *st, const char *id, enum runstate *out,
		    char **err);

/* Appends the id of every run to out, sorted bytewise, in one query. With
 * states, *states gets a malloc'd array of their states, index for index
 * (NULL when there are none), and a run whose state cannot be read is left
 * out. With updated, *updated gets their last changes the same way
 * (updated_at: nanoseconds since the epoch). */
int store_run_ids(struct store *st, struct strlist *out, enum runstate **states,
		  int64_t **updated, char **err);

/* Appends the ids of the runs in state s to out, in enqueue order (seq). */
int store_runs_in_state(struct store *st, enum runstate s,
			struct strlist *out, char **err);

/* Sets the configuration name of a run that is still created; -EBUSY once
 * it has been enqueued. config must be non-empty. */
int store_run_set_config(struct store *st, const char *id, const char *config,
			 char **err);

/* Sets the workdir of a run that is still created (an absolute path the
 * caller checked, or NULL for none); -EBUSY once it has been enqueued,
 * -EINVAL for a relative path. */
int store_run_set_workdir(struct store *st, const char *id, const char *workdir,
			  char **err);

/* Sets the forced skills (a JSON array) of a run that is still created;
 * -EBUSY once it has been enqueued. */
int store_run_set_forced_skills(struct store *st, const char *id,
				const json_t *skills, char **err);

/* Enqueues a created run, atomically: stores config, prompt (non-empty),
 * forced_skills (a JSON array) and the allow-list resolved now
 * (allowed_tools, required: R6), gives it the next enqueue number (stored
 * in *seq when seq is not NULL), moves it to queued and logs a "state"
 * event. -EBUSY when the run is not created. */
int store_run_enqueue(struct store *st, const char *id, const char *config,
		      const char *prompt, const json_t *forced_skills,
		      const json_t *allowed_tools, int64_t *seq, char **err);

/* store_run_enqueue, storing provenance (any JSON, may be NULL) with the
 * run in the same transaction. */
int store_run_enqueue_with(struct store *st, const char *id, const char *config,
			   const char *prompt, const json_t *forced_skills,
			   const json_t *allowed_tools, const json_t *provenance, int64_t *seq,
			   char **err);

/* Moves a run from `from` to `to` and applies ch (may be NULL), atomically:
 * -EBUSY (nothing changed) when the run's state is not `from` (compare and
 * set); -EINVAL when runstate_can_move(from, to) refuses, or when to is
 * queued from created (that is store_run_enqueue's job). from == to
 * applies ch alone, keeping the state. A real move also sets started_at on
 * the first move to running, finished_at on a move to a terminal state,
 * and logs an event {"type": "state", "from", "to"}. running -> queued
 * keeps the run's enqueue number, so a re-queued run goes first. */
int store_run_transition(struct store *st, const char *id,
			 enum runstate from, enum runstate to,
			 const struct run_change *ch, char **err);

/* Deletes a run with its messages, chats and events, whatever its state
 * (the caller decides when that is allowed). -ENOENT when there is none. */
int store_run_delete(struct store *st, const char *id, char **err);

/* Appends msg (a JSON object with a string "role") to chat chat_id of run
 * run_id and bumps the run's updated_at, atomically. Stores the message's
 * number in the chat (1, 2, ...) in *seq when seq is not NULL. */
int store_message_append(struct store *st, const char *run_id,
			 const char *chat_id, const json_t *msg, int64_t *seq,
			 char **err);

/* Sets *out to a new JSON array of the chat's messages in order (empty when
 * the chat has none). */
int store_messages(struct store *st, const char *run_id, const char *chat_id,
		   json_t **out, char **err);

/* How a chat's messages are rendered as messages.json: the array of
 * store_messages dumped with these flags, then a newline
 * (json_text_append). An array of one element is that element and
 * STORE_MESSAGES_JSON_ONE bytes of framing ("[\n  " and "\n]"); of
 * n > 0 elements, their sizes, n - 1 separators ",\n  " and that
 * framing; of none, "[]". */
#define STORE_MESSAGES_JSON_FLAGS JSON_INDENT(2)
#define STORE_MESSAGES_JSON_ONE 6u
#define STORE_MESSAGES_JSON_SEP 4u
#define STORE_MESSAGES_JSON_EMPTY 2u

/* The bytes msg takes as an element of a chat's messages.json (as a
 * message is stored, each one's is kept: schema 8); -1 on ENOMEM. */
int64_t store_message_rendered_bytes(const json_t *msg);

/* The size of chat chat_id's messages.json (store_messages dumped with
 * STORE_MESSAGES_JSON_FLAGS and a newline) from the sizes kept with its
 * messages, in one query on an index (no message text is read or
 * rendered). -EAGAIN when some message has no size kept (stored before
 * schema 8): render it then. -ENOENT for no such run. */
int store_messages_json_size(struct store *st, const char *run_id, const char *chat_id,
			     uint64_t *size, char **err);

/* What a run has stored so far, for its budgets (runs.budget). */
struct run_totals {
	int64_t assistant_messages; /* every chat's: one per model reply kept */
	int64_t message_bytes;      /* every chat's messages, as stored: the
	                               sum of store_message_bytes() */
	int64_t subagent_chats;     /* chats other than the run's main chat
	                               (runs.chat_id) */
};

/* Fills *out for run run_id in one read (it reads every message's text:
 * once per run loaded, not per step). -ENOENT when there is no run. */
int store_run_totals(struct store *st, const char *run_id, struct run_totals *out,
		     char **err);

/* The bytes msg takes in the store (its JSON text), without storing it;
 * 0 when it cannot be encoded. */
size_t store_message_bytes(const json_t *msg);

/* Records a chat of a run (a sub-agent) in state running, with the tools
 * it is offered (an array of names). parent_chat, skill and tools may be
 * NULL. -EEXIST when the run already has that chat id. */
int store_chat_create(struct store *st, const char *run_id,
		      const char *chat_id, const char *parent_chat,
		      const char *skill, const json_t *tools, char **err);

/* Moves a chat to state to (checked with runstate_can_move from its current
 * state), storing result when not NULL. */
int store_chat_transition(struct store *st, const char *run_id,
			  const char *chat_id, enum runstate to,
			  const char *result, char **err);

/* Sets *rows to the run's chats in creation order and *n to their count
 * (*rows NULL when there are none). Free with chat_rows_free. */
int store_chats(struct store *st, const char *run_id, struct chat_row **rows,
		size_t *n, char **err);

/* Frees rows as returned by store_chats. */
void chat_rows_free(struct chat_row *rows, size_t n);

/* Appends an event of the given type (non-empty) with data (any JSON, or
 * NULL) to the run's log, numbered 1, 2, ...; stores the number in *seq
 * when seq is not NULL. */
int store_event_append(struct store *st, const char *run_id, const char *type,
		       const json_t *data, int64_t *seq, char **err);

/* A started step is a tool call, numbered by its index (0, 1, ...) in the
 * tool_calls of the chat's message msg_seq that makes it, or the model
 * call made after the chat's first msg_seq messages (call
 * STORE_STEP_MODEL). */
#define STORE_STEP_MODEL (-1)

/* Records that a step of chat chat_id of run run_id has started (what: the
 * tool's name, or "model"), committed before it returns: the caller runs
 * the step only after this succeeded (at most once, R7). Recording the
 * same step again replaces the record. -ENOENT when there is no run;
 * -EINVAL for an empty chat_id or what, msg_seq < 0 or call <
 * STORE_STEP_MODEL. The record goes with the run. */
int store_step_start(struct store *st, const char *run_id, const char *chat_id,
		     int64_t msg_seq, int call, const char *what, char **err);

/* Sets *started: whether that step of chat chat_id of run run_id was
 * recorded as started (store_step_start). A step of an unknown run or
 * chat was not. */
int store_step_started(struct store *st, const char *run_id, const char *chat_id,
		       int64_t msg_seq, int call, bool *started, char **err);

/* Appends the run's log to out, one JSON object per line, in order:
 * {"seq": n, "ts": "2025-01-02T03:04:05.678Z", "type": ..., <data>} where
 * an object's members are merged in (they cannot replace seq, ts or type)
 * and any other data value is under "data". -ENOENT when there is no run. */
int store_events_text(struct store *st, const char *run_id, struct buf *out,
		      char **err);

/* ---- the audit trail (issue 19) ----
 * Each event of the catalogue is one line of the audit file, as
 * {"seq": n, "ts": "2025-01-02T03:04:05.678Z", <the event's members>},
 * stored as it is shown: the file is the lines kept, oldest first, and a
 * line once written never changes, so the file only grows (`tail -f`)
 * until it is trimmed (store_audit_trim, and past twice the cap). */

/* Appends events (a JSON array of objects, may be NULL) to the trail and
 * applies states (an object: key to the state to keep, or null to forget
 * it; may be NULL) to audit_state, in one transaction; when more than
 * 2 x keep lines are kept, the oldest go down to keep. -EINVAL for
 * malformed arguments or keep < 1. */
int store_audit_record(struct store *st, const json_t *events, const json_t *states,
		       int64_t keep, char **err);

/* Keeps the newest keep lines of the trail (keep >= 1). */
int store_audit_trim(struct store *st, int64_t keep, char **err);

/* The bytes of the audit file: the lines kept. */
int store_audit_size(struct store *st, uint64_t *size, char **err);

/* Appends to out the bytes [off, off + size) of the audit file (fewer at
 * its end). O(log n + lines read). */
int store_audit_read(struct store *st, uint64_t off, size_t size, struct buf *out, char **err);

/* *out: a new object of every key of audit_state and its state. */
int store_audit_state(struct store *st, json_t **out, char **err);

/* *out: a new object of the keys of audit_state from from to to (both
 * included; NULL: no bound) and their states, in key order (bytewise), at
 * most limit of them (0: no limit). */
int store_audit_state_range(struct store *st, const char *from, const char *to, size_t limit,
			    json_t **out, char **err);

/* The files of pinned source source when it last matched, if that was
 * with digest: 1 with them appended to lines; 0 when none is recorded. */
int store_pin_match(struct store *st, const char *source, const char *digest,
		    struct strlist *lines, char **err);

/* Records the files (lines) of pinned source source, matching digest,
 * replacing what was recorded for it. */
int store_pin_match_put(struct store *st, const char *source, const char *digest,
			const struct strlist *lines, char **err);

#endif
