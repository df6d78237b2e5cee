/* dbwatch: the state database's file deleted or replaced while open. */
#include "dbwatch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"

#define DBWATCH_PERIOD_MS 1000

int dbwatch_init(struct dbwatch *w, const char *path, const struct stat *opened)
{
	memset(w, 0, sizeof *w);
	w->path = strdup(path);
	if (!w->path)
		return -1;
	pthread_mutex_init(&w->lock, NULL);
	w->dev = opened->st_dev;
	w->ino = opened->st_ino;
	w->next_ms = clock_ms() + DBWATCH_PERIOD_MS;
	return 0;
}

/* The message for what stat of the path said, or NULL when it still names
 * the opened file. */
static char *what_happened(const struct dbwatch *w, int rc, int err,
			   const struct stat *st)
{
	const char *what;
	if (rc < 0 && err == ENOENT)
		what = "was deleted";
	else if (rc == 0 && (st->st_dev != w->dev || st->st_ino != w->ino))
		what = "was replaced by another file";
	else
		return NULL;
	char *msg = NULL;
	if (asprintf(&msg, "the state database %s %s while mounted: new runs are "
		     "refused (EIO); runs made before keep working on the file "
		     "skillfs opened, which is lost at unmount. Unmount and mount "
		     "again to use %s", w->path, what,
		     rc < 0 ? "a new database there" : "the file now there") < 0)
		return NULL;
	return msg;
}

const char *dbwatch_check(struct dbwatch *w, bool now, bool *first)
{
	if (first)
		*first = false;
	pthread_mutex_lock(&w->lock);
	if (!w->gone && w->path) {
		int64_t t = clock_ms();
		if (now || t >= w->next_ms) {
			w->next_ms = t + DBWATCH_PERIOD_MS;
			struct stat st;
			int rc = stat(w->path, &st);
			w->gone = what_happened(w, rc, errno, &st);
			if (w->gone && first)
				*first = true;
		}
	}
	const char *gone = w->gone;
	pthread_mutex_unlock(&w->lock);
	return gone;
}

void dbwatch_free(struct dbwatch *w)
{
	if (!w->path)
		return;
	pthread_mutex_destroy(&w->lock);
	free(w->path);
	free(w->gone);
	memset(w, 0, sizeof *w);
}
