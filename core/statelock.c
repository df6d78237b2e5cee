/* statelock: one daemon per state database (see statelock.h). */
#include "statelock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

__attribute__((format(printf, 2, 3)))
static void set_err(char **err, const char *fmt, ...)
{
	if (!err)
		return;
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	free(*err);
	*err = s;
}

int statelock_take(const char *db_path, char **err)
{
	char *path = NULL;
	if (!db_path || !*db_path) {
		set_err(err, "state database: no path given");
		return -1;
	}
	if (asprintf(&path, "%s" STATELOCK_SUFFIX, db_path) < 0) {
		set_err(err, "out of memory");
		return -1;
	}
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		set_err(err, "cannot open the lock file %s of the state database: %s", path,
			strerror(errno));
		free(path);
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		/* Who holds it, for the message: the holder writes its pid. */
		char pid[32] = "";
		ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		if (e == EWOULDBLOCK)
			set_err(err, "state database %s is in use by another skillfs%s%s%s "
				"(it holds %s): unmount that one first, or give this one "
				"another --state", db_path, *pid ? " (pid " : "", pid,
				*pid ? ")" : "", path);
		else
			set_err(err, "cannot lock %s: %s", path, strerror(e));
		close(fd);
		free(path);
		return -1;
	}
	free(path);
	statelock_note_owner(fd);
	return fd;
}

void statelock_note_owner(int fd)
{
	/* Only for the message a second daemon prints: the lock does not
	 * depend on it, so a failed write changes nothing. */
	char text[32];
	int len = snprintf(text, sizeof text, "%ld\n", (long)getpid());
	if (fd >= 0 && ftruncate(fd, 0) == 0 && len > 0)
		(void)!pwrite(fd, text, (size_t)len, 0);
}

void statelock_release(int fd)
{
	if (fd >= 0)
		close(fd);
}
