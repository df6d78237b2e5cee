/* mount: the FUSE low-level adapter. It maps requests to core/view calls,
 * keeps the inode table, sets cache lifetimes, and turns engine changes
 * into kernel cache invalidations. No policy lives here. */
#ifndef SKILLFS_MOUNT_H
#define SKILLFS_MOUNT_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"

struct mount_options {
	const char *mountpoint;
	bool foreground;
	bool debug;
	const char *fuse_opts; /* extra -o options, comma separated, or NULL */
	const char *state_path; /* the run database; NULL = the default */
	uint64_t *listings;     /* if set, gets how many directory listings were
				 * taken (one per opendir or rewinddir), for the stats */
};

/* Mounts, serves requests until unmounted or signalled (SIGINT, SIGTERM),
 * then unmounts; SIGHUP reloads the config file and the skills. Daemonises
 * once the mount is ready unless foreground. With $NOTIFY_SOCKET set, tells
 * the service manager READY=1 once the mount answers, RELOADING=1 and
 * READY=1 around a SIGHUP reload, and STOPPING=1 (service.h). Returns a
 * process exit status (0 on a clean unmount). */
int mount_run(struct engine *e, const struct mount_options *opt);

#endif
