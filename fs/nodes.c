#include "nodes.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h;
}

static size_t slot_path(const struct nodes *t, const char *path)
{
	return hash_str(path) & (t->nbuckets - 1);
}

static size_t slot_ino(const struct nodes *t, uint64_t ino)
{
	return (ino * 11400714819323198485ULL) >> 20 & (t->nbuckets - 1);
}

static void link_node(struct nodes *t, struct node *n)
{
	size_t a = slot_path(t, n->path), b = slot_ino(t, n->ino);
	if (!n->unlinked) {
		n->next_path = t->by_path[a];
		t->by_path[a] = n;
	}
	n->next_ino = t->by_ino[b];
	t->by_ino[b] = n;
}

static int grow_buckets(struct nodes *t)
{
	size_t old = t->nbuckets;
	struct node **bp = calloc(old * 2, sizeof *bp), **bi = calloc(old * 2, sizeof *bi);
	if (!bp || !bi) {
		free(bp);
		free(bi);
		return -1;
	}
	/* Every node is in by_ino; an unlinked one is in by_path no more. */
	struct node **oi = t->by_ino;
	free(t->by_path);
	t->by_path = bp;
	t->by_ino = bi;
	t->nbuckets = old * 2;
	for (size_t i = 0; i < old; i++) {
		for (struct node *n = oi[i], *next; n; n = next) {
			next = n->next_ino;
			link_node(t, n);
		}
	}
	free(oi);
	return 0;
}

/* Puts n under up in the tree (up may be NULL: n stays out of it). */
static void tree_link(struct node *n, struct node *up)
{
	n->up = up;
	if (!up)
		return;
	n->next_sib = up->child;
	if (up->child)
		up->child->prev_sib = n;
	up->child = n;
}

/* Takes n out of the tree; its children are left without a parent. */
static void tree_unlink(struct node *n)
{
	if (n->up) {
		if (n->prev_sib)
			n->prev_sib->next_sib = n->next_sib;
		else
			n->up->child = n->next_sib;
		if (n->next_sib)
			n->next_sib->prev_sib = n->prev_sib;
	}
	for (struct node *c = n->child, *next; c; c = next) {
		next = c->next_sib;
		c->up = c->prev_sib = c->next_sib = NULL;
	}
	n->up = n->child = n->prev_sib = n->next_sib = NULL;
}

static struct node *find_path(struct nodes *t, const char *path)
{
	for (struct node *n = t->by_path[slot_path(t, path)]; n; n = n->next_path)
		if (strcmp(n->path, path) == 0)
			return n;
	return NULL;
}

static struct node *find_ino(struct nodes *t, uint64_t ino)
{
	for (struct node *n = t->by_ino[slot_ino(t, ino)]; n; n = n->next_ino)
		if (n->ino == ino)
			return n;
	return NULL;
}

static struct node *new_node(uint64_t ino, uint64_t parent, const char *path)
{
	struct node *n = calloc(1, sizeof *n);
	if (!n)
		return NULL;
	n->path = strdup(path);
	if (!n->path) {
		free(n);
		return NULL;
	}
	const char *slash = strrchr(n->path, '/');
	n->name = slash ? slash + 1 : n->path;
	n->ino = ino;
	n->parent = parent;
	return n;
}

int nodes_init(struct nodes *t)
{
	memset(t, 0, sizeof *t);
	pthread_mutex_init(&t->lock, NULL);
	t->nbuckets = 1024;
	t->by_path = calloc(t->nbuckets, sizeof *t->by_path);
	t->by_ino = calloc(t->nbuckets, sizeof *t->by_ino);
	struct node *root = new_node(1, 1, "");
	if (!t->by_path || !t->by_ino || !root) {
		free(root);
		nodes_destroy(t);
		return -1;
	}
	root->nlookup = 1;
	link_node(t, root);
	t->count = 1;
	t->next_ino = 2;
	return 0;
}

void nodes_destroy(struct nodes *t)
{
	for (size_t i = 0; t->by_ino && i < t->nbuckets; i++) {
		for (struct node *n = t->by_ino[i], *next; n; n = next) {
			next = n->next_ino;
			free(n->path);
			free(n);
		}
	}
	free(t->by_path);
	free(t->by_ino);
	t->by_path = t->by_ino = NULL;
	pthread_mutex_destroy(&t->lock);
}

int nodes_path(struct nodes *t, uint64_t ino, char *buf, size_t size)
{
	pthread_mutex_lock(&t->lock);
	struct node *n = find_ino(t, ino);
	int rc = -ENOENT;
	if (n && !n->unlinked)
		rc = snprintf(buf, size, "%s", n->path) < (int)size ? 0 : -ENAMETOOLONG;
	pthread_mutex_unlock(&t->lock);
	return rc;
}

uint64_t nodes_lookup(struct nodes *t, uint64_t parent, const char *parent_path,
		      const char *name)
{
	char path[4096];
	int w = parent_path[0] ? snprintf(path, sizeof path, "%s/%s", parent_path, name)
			       : snprintf(path, sizeof path, "%s", name);
	if (w < 0 || (size_t)w >= sizeof path)
		return 0;
	uint64_t ino = 0;
	pthread_mutex_lock(&t->lock);
	struct node *n;
	for (n = t->by_path[slot_path(t, path)]; n; n = n->next_path)
		if (strcmp(n->path, path) == 0)
			break;
	if (!n) {
		if (t->count >= t->nbuckets && grow_buckets(t) < 0)
			goto out;
		n = new_node(t->next_ino, parent, path);
		if (!n)
			goto out;
		t->next_ino++;
		link_node(t, n);
		struct node *up = find_ino(t, parent);
		tree_link(n, up && !up->unlinked ? up : NULL);
		t->count++;
	}
	n->nlookup++;
	ino = n->ino;
out:
	pthread_mutex_unlock(&t->lock);
	return ino;
}

uint64_t nodes_find(struct nodes *t, const char *path)
{
	pthread_mutex_lock(&t->lock);
	struct node *n = find_path(t, path);
	uint64_t ino = n ? n->ino : 0;
	pthread_mutex_unlock(&t->lock);
	return ino;
}

static void unlink_chain(struct node **head, struct node *n, bool by_path);

/* Unlinks n and everything below it (nodes_unlink). */
static void unlink_tree(struct nodes *t, struct node *n)
{
	while (n->child)
		unlink_tree(t, n->child);
	unlink_chain(&t->by_path[slot_path(t, n->path)], n, true);
	n->unlinked = true;
	tree_unlink(n);
}

void nodes_unlink(struct nodes *t, const char *path)
{
	pthread_mutex_lock(&t->lock);
	struct node *n = find_path(t, path);
	if (n && n->ino != 1)
		unlink_tree(t, n);
	pthread_mutex_unlock(&t->lock);
}

static void unlink_chain(struct node **head, struct node *n, bool by_path)
{
	for (struct node **pp = head; *pp; pp = by_path ? &(*pp)->next_path : &(*pp)->next_ino) {
		if (*pp == n) {
			*pp = by_path ? n->next_path : n->next_ino;
			return;
		}
	}
}

void nodes_forget(struct nodes *t, uint64_t ino, uint64_t count)
{
	pthread_mutex_lock(&t->lock);
	struct node *n = find_ino(t, ino);
	if (n && ino != 1) {
		n->nlookup = n->nlookup > count ? n->nlookup - count : 0;
		if (n->nlookup == 0) {
			if (!n->unlinked)
				unlink_chain(&t->by_path[slot_path(t, n->path)], n, true);
			tree_unlink(n);
			unlink_chain(&t->by_ino[slot_ino(t, n->ino)], n, false);
			t->count--;
			free(n->path);
			free(n);
		}
	}
	pthread_mutex_unlock(&t->lock);
}

struct subtree {
	struct node_ref *r;
	size_t n, cap;
};

static int subtree_add(struct subtree *st, const struct node *n, unsigned depth)
{
	struct node_ref *r = grow(st->r, &st->cap, st->n, sizeof *r, 16);
	if (!r)
		return -1;
	st->r = r;
	struct node_ref *x = &st->r[st->n];
	if (!(x->path = strdup(n->path)))
		return -1;
	x->ino = n->ino;
	x->parent = n->parent;
	st->n++;
	for (const struct node *c = n->child; depth && c; c = c->next_sib)
		if (subtree_add(st, c, depth - 1) < 0)
			return -1;
	return 0;
}

int nodes_subtree(struct nodes *t, const char *path, unsigned depth, struct node_ref **out,
		  size_t *n)
{
	struct subtree st = { 0 };
	pthread_mutex_lock(&t->lock);
	const struct node *top = find_path(t, path);
	int rc = top ? subtree_add(&st, top, depth) : 0;
	pthread_mutex_unlock(&t->lock);
	if (rc < 0) {
		nodes_refs_free(st.r, st.n);
		return -1;
	}
	*out = st.r;
	*n = st.n;
	return 0;
}

void nodes_refs_free(struct node_ref *r, size_t n)
{
	for (size_t i = 0; r && i < n; i++)
		free(r[i].path);
	free(r);
}
