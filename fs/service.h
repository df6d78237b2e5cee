/* service: the daemon as a service manager sees it (systemd Type=notify,
 * see skillfs@.service). The readiness protocol (sd_notify(3)) is spoken
 * directly, with no library: each message is one datagram to the AF_UNIX
 * socket that $NOTIFY_SOCKET names (a leading '@' names one in the
 * abstract namespace); without $NOTIFY_SOCKET nothing is sent. */
#ifndef SKILLFS_SERVICE_H
#define SKILLFS_SERVICE_H

#include "engine.h"

/* Sends READY=1 once the mount at mountpoint answers: a stat of its root
 * is made on a thread of its own (the caller then runs the request loop
 * that serves it). A mount that goes before it answers is never ready. */
void service_ready_when_answering(const char *mountpoint);

/* SIGHUP (`systemctl reload`): sends RELOADING=1, reloads the config file
 * and every skill (engine_reload_all), logs how it went on stderr, then
 * sends READY=1. Returns once done. */
void service_reload(struct engine *e);

/* Sends STOPPING=1 the first time it is called for *told (an atomic flag,
 * 0 at first). */
void service_stopping(int *told);

#endif
