/* service: readiness, reload and stop as a service manager sees them
 * (see service.h). */
#include "service.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Sends msg (newline-separated KEY=VALUE lines) to $NOTIFY_SOCKET when it
 * is set. Returns 0 (also when it is not set), or -errno. */
static int notify_send(const char *msg)
{
	const char *path = getenv("NOTIFY_SOCKET");
	if (!path || !*path)
		return 0;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof sa.sun_path)
		return -EINVAL;
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract: the name has no terminating NUL */
	socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
				      (path[0] == '/' ? 1 : 0));
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int rc = 0;
	if (sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* Sends msg; a failure is logged (the service manager would wait for it). */
static void notify(const char *msg)
{
	int rc = notify_send(msg);
	if (rc < 0)
		fprintf(stderr, "skillfs: warning: cannot tell the service manager (NOTIFY_SOCKET) "
				"%.*s: %s\n", (int)strcspn(msg, "\n"), msg, strerror(-rc));
}

static void *ready_main(void *arg)
{
	struct stat st;
	if (stat(arg, &st) == 0) {
		char msg[64];
		snprintf(msg, sizeof msg, "READY=1\nMAINPID=%ld", (long)getpid());
		notify(msg);
	}
	free(arg);
	return NULL;
}

void service_ready_when_answering(const char *mountpoint)
{
	const char *ns = getenv("NOTIFY_SOCKET");
	if (!ns || !*ns)
		return;
	char *path = strdup(mountpoint);
	pthread_t t;
	pthread_attr_t attr;
	if (!path || pthread_attr_init(&attr) != 0) {
		free(path);
		fprintf(stderr, "skillfs: warning: out of memory: the service manager is not told "
				"the mount is ready\n");
		return;
	}
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, ready_main, path) != 0) {
		fprintf(stderr, "skillfs: warning: cannot start the readiness thread: the service "
				"manager is not told the mount is ready\n");
		free(path);
	}
	pthread_attr_destroy(&attr);
}

void service_reload(struct engine *e)
{
	struct timespec now;
	char msg[96];
	clock_gettime(CLOCK_MONOTONIC, &now);
	snprintf(msg, sizeof msg, "RELOADING=1\nMONOTONIC_USEC=%llu",
		 (unsigned long long)now.tv_sec * 1000000ULL +
			 (unsigned long long)now.tv_nsec / 1000);
	notify(msg);
	fprintf(stderr, "skillfs: SIGHUP: reloading the config file and the skills\n");
	int rc = engine_reload_all(e);
	struct snapshot *s = engine_snapshot(e);
	if (rc < 0)
		fprintf(stderr, "skillfs: SIGHUP: the reload ran out of memory\n");
	else if (s->config_error)
		fprintf(stderr, "skillfs: SIGHUP: the config file was not taken (the last good "
				"one stays in use): %s\n", s->config_error);
	else
		fprintf(stderr, "skillfs: SIGHUP: reloaded (%zu skills, %zu configurations)\n",
			s->catalog->n, snapshot_config(s)->nconfigs);
	snapshot_unref(s);
	notify("READY=1");
}

void service_stopping(int *told)
{
	if (__atomic_exchange_n(told, 1, __ATOMIC_ACQ_REL) == 0)
		notify("STOPPING=1");
}
