/* nodes: the inode table of the mount. Every path the kernel has looked up
 * gets a node with a stable inode number and a lookup count; the node goes
 * away when the kernel forgets it. */
#ifndef SKILLFS_NODES_H
#define SKILLFS_NODES_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct node {
	uint64_t ino;
	uint64_t parent;  /* parent's inode (root: itself) */
	uint64_t nlookup;
	char *path;       /* relative to the root, "" for the root */
	const char *name; /* last component, inside path */
	bool unlinked;    /* removed (rmdir): names nothing, kept for FORGET */
	struct node *next_path, *next_ino; /* hash chains */
	/* The tree of the nodes that have a path: the parent's node (NULL for
	 * the root and once unlinked or the parent freed), its first child, and
	 * the siblings (same parent) before and after it. */
	struct node *up, *child, *prev_sib, *next_sib;
};

struct nodes {
	pthread_mutex_t lock;
	struct node **by_path, **by_ino;
	size_t nbuckets, count;
	uint64_t next_ino;
};

/* One node copied out of the table (nodes_subtree), for sending invalidations without
 * holding the lock. */
struct node_ref {
	uint64_t ino, parent;
	char *path;
};

/* Creates the table holding the root (inode 1, never forgotten).
 * Returns 0 or -1 on ENOMEM. */
int nodes_init(struct nodes *t);
void nodes_destroy(struct nodes *t);

/* The path of inode ino copied into buf (size bytes). Returns 0, -ENOENT
 * for an unknown inode, or -ENAMETOOLONG. */
int nodes_path(struct nodes *t, uint64_t ino, char *buf, size_t size);

/* The directory at path was removed: its node and those below it no
 * longer have a path (the kernel may hold them, the directory dead, until
 * it forgets them; they then name nothing: ENOENT), so a directory made
 * again under that name gets new inode numbers, and a descriptor still
 * open in the old one never reaches the new one. Linear in the nodes
 * below path. */
void nodes_unlink(struct nodes *t, const char *path);

/* The node for parent/name, created if new, with its lookup count raised
 * by one. Returns its inode, or 0 on ENOMEM. */
uint64_t nodes_lookup(struct nodes *t, uint64_t parent, const char *parent_path,
		      const char *name);

/* The inode of a path the kernel knows, or 0. */
uint64_t nodes_find(struct nodes *t, const char *path);

/* Drops n lookups of ino; frees it at zero. */
void nodes_forget(struct nodes *t, uint64_t ino, uint64_t n);

/* Copies the node at path and those below it, at most depth levels down
 * (0: the node alone), out of the table; none when the kernel does not
 * know path. Caller frees with nodes_refs_free. Linear in what is copied.
 * Returns 0 or -1 on ENOMEM. */
int nodes_subtree(struct nodes *t, const char *path, unsigned depth, struct node_ref **out,
		  size_t *n);

void nodes_refs_free(struct node_ref *r, size_t n);

#endif
