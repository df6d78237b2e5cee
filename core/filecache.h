/* filecache: the rendered bytes of a run's large files (transcript,
 * messages.json, events), kept while the run does not change. A stat and
 * the reads after it then render such a file once per version of its run,
 * not once per request, and a cached answer needs neither the store nor a
 * render. Bounded in entries and bytes (the least recently used go);
 * every call is thread-safe. */
#ifndef SKILLFS_FILECACHE_H
#define SKILLFS_FILECACHE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "buf.h"

/* Shared, immutable bytes: data[len] is '\0'. */
struct file_bytes {
	unsigned refs; /* atomic */
	size_t len;
	char data[];
};

/* Takes b's bytes (b is left empty). NULL on ENOMEM (b unchanged). */
struct file_bytes *file_bytes_from_buf(struct buf *b);
struct file_bytes *file_bytes_ref(struct file_bytes *fb);
/* Drops a reference; NULL is ignored. */
void file_bytes_unref(struct file_bytes *fb);

struct filecache;

/* The longest run id a cache entry holds (a longer one is never kept). */
#define FILECACHE_ID_MAX 64

/* Which state of a run bytes were rendered from: the run's change time
 * and the store's write count (store_writes), both taken before. */
struct filecache_version {
	struct timespec changed;
	uint64_t writes;
};

/* A cache of at most max_entries files and max_bytes bytes in all; a file
 * larger than max_bytes is never kept. NULL on ENOMEM. */
struct filecache *filecache_new(size_t max_entries, size_t max_bytes);
void filecache_free(struct filecache *c);

/* The bytes of file sub of run id (serial: which run of that id) as they
 * were at version, with a reference for the caller; NULL when not kept
 * for that version. */
struct file_bytes *filecache_get(struct filecache *c, const char *id, uint64_t serial,
				 const char *sub, struct filecache_version version);

/* Keeps fb (a reference is taken) as file sub of run id at version,
 * replacing what was kept of that file. */
void filecache_put(struct filecache *c, const char *id, uint64_t serial, const char *sub,
		   struct filecache_version version, struct file_bytes *fb);

#endif
