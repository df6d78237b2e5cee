#include "filecache.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct file_bytes *file_bytes_from_buf(struct buf *b)
{
	struct file_bytes *fb = malloc(sizeof *fb + b->len + 1);
	if (!fb)
		return NULL;
	fb->refs = 1;
	fb->len = b->len;
	if (b->len)
		memcpy(fb->data, b->data, b->len);
	fb->data[b->len] = '\0';
	buf_free(b);
	return fb;
}

struct file_bytes *file_bytes_ref(struct file_bytes *fb)
{
	__atomic_add_fetch(&fb->refs, 1, __ATOMIC_RELAXED);
	return fb;
}

void file_bytes_unref(struct file_bytes *fb)
{
	if (fb && __atomic_sub_fetch(&fb->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(fb);
}

struct entry {
	char id[FILECACHE_ID_MAX + 1];
	uint64_t serial;
	char *sub; /* NULL: a free slot */
	struct filecache_version version;
	struct file_bytes *bytes;
	uint64_t used; /* when last got or put, for eviction */
};

struct filecache {
	pthread_mutex_t lock;
	struct entry *e;
	size_t n, max_bytes, bytes;
	uint64_t clock;
};

struct filecache *filecache_new(size_t max_entries, size_t max_bytes)
{
	struct filecache *c = calloc(1, sizeof *c);
	if (!c || !(c->e = calloc(max_entries ? max_entries : 1, sizeof *c->e))) {
		free(c);
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->n = max_entries ? max_entries : 1;
	c->max_bytes = max_bytes;
	return c;
}

static void entry_clear(struct filecache *c, struct entry *e)
{
	if (e->sub) {
		c->bytes -= e->bytes->len;
		file_bytes_unref(e->bytes);
		free(e->sub);
	}
	memset(e, 0, sizeof *e);
}

void filecache_free(struct filecache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		entry_clear(c, &c->e[i]);
	free(c->e);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static struct entry *find(struct filecache *c, const char *id, uint64_t serial, const char *sub)
{
	for (size_t i = 0; i < c->n; i++) {
		struct entry *e = &c->e[i];
		if (e->sub && e->serial == serial && strcmp(e->id, id) == 0 && strcmp(e->sub, sub) == 0)
			return e;
	}
	return NULL;
}

struct file_bytes *filecache_get(struct filecache *c, const char *id, uint64_t serial,
				 const char *sub, struct filecache_version version)
{
	struct file_bytes *fb = NULL;
	pthread_mutex_lock(&c->lock);
	struct entry *e = find(c, id, serial, sub);
	if (e && e->version.changed.tv_sec == version.changed.tv_sec &&
	    e->version.changed.tv_nsec == version.changed.tv_nsec &&
	    e->version.writes == version.writes) {
		fb = file_bytes_ref(e->bytes);
		e->used = ++c->clock;
	}
	pthread_mutex_unlock(&c->lock);
	return fb;
}

void filecache_put(struct filecache *c, const char *id, uint64_t serial, const char *sub,
		   struct filecache_version version, struct file_bytes *fb)
{
	if (fb->len > c->max_bytes || strlen(id) > FILECACHE_ID_MAX)
		return;
	char *name = strdup(sub);
	if (!name)
		return; /* not kept: the next request renders it again */
	pthread_mutex_lock(&c->lock);
	struct entry *e = find(c, id, serial, sub);
	if (e)
		entry_clear(c, e);
	/* Room for fb: the least recently used go first. */
	for (;;) {
		struct entry *oldest = NULL, *free_slot = NULL;
		for (size_t i = 0; i < c->n; i++) {
			struct entry *x = &c->e[i];
			if (!x->sub)
				free_slot = free_slot ? free_slot : x;
			else if (!oldest || x->used < oldest->used)
				oldest = x;
		}
		if (free_slot && c->bytes + fb->len <= c->max_bytes) {
			e = free_slot;
			break;
		}
		entry_clear(c, oldest); /* there is one: fb fits an empty cache */
	}
	memcpy(e->id, id, strlen(id) + 1);
	e->serial = serial;
	e->sub = name;
	e->version = version;
	e->bytes = file_bytes_ref(fb);
	e->used = ++c->clock;
	c->bytes += fb->len;
	pthread_mutex_unlock(&c->lock);
}
