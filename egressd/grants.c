/*
 * grants.c - live grant registry: ids, refcounts, listeners, expiry, revocation.
 */
#include "egressd/grants.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "common/log.h"
#include "common/util.h"
#include "egressd/listener.h"
#include "egressd/dnsstub.h"
#include "egressd/mitmca.h"
#include "egressd/tpool.h"

struct grants {
	struct event_base *base;
	struct lgrant *head;
	/* Grants retired without killing their connections (a static grant a reload replaced
	 * or removed) while connections still hold them: grants_kill_all (drain end,
	 * shutdown) must reach those connections too, or they would outlive the drain and
	 * never write their close records. Linked through next/prev; no reference. */
	struct lgrant *retired;
	size_t n;
	grants_retire_hook hook;
	void *hook_arg;
};

void
grants_set_retire_hook(struct grants *r, grants_retire_hook fn, void *arg)
{
	r->hook = fn;
	r->hook_arg = arg;
}

struct grants *
grants_new(struct event_base *base)
{
	struct grants *r = calloc(1, sizeof(*r));

	if (r != NULL)
		r->base = base;
	return r;
}

static void
lgrant_close_listeners(struct lgrant *lg)
{
	for (size_t i = 0; i < lg->nlisteners; i++)
		listener_free(lg->listeners[i]);
	lg->nlisteners = 0;
	dnsstub_free(lg->stub);
	lg->stub = NULL;
}

void
lgrant_ref(struct lgrant *lg)
{
	lg->refs++;
}

void
lgrant_unref(struct lgrant *lg)
{
	if (lg == NULL || --lg->refs > 0)
		return;
	if (lg->on_retired) {
		if (lg->prev != NULL)
			lg->prev->next = lg->next;
		else
			lg->reg->retired = lg->next;
		if (lg->next != NULL)
			lg->next->prev = lg->prev;
	}
	lgrant_close_listeners(lg);
	if (lg->expiry != NULL)
		event_free(lg->expiry);
	grant_free(lg->g);
	mitm_ca_free(lg->ca);
	tpool_free(lg->tpool);
	free(lg);
}

static void
lgrant_expire(evutil_socket_t fd, short what, void *arg)
{
	struct lgrant *lg = arg;

	log_info("grant %s (principal %s) expired; closing its listener and connections",
	    lg->id, lg->g->principal);
	grants_retire(lg->reg, lg, REASON_GRANT_EXPIRED, true);
}

int
grant_static_id(const struct grant *g, char out[GRANT_ID_HEX + 1])
{
	static const char label[] = "egressd static grant v1\n";
	unsigned char md[SHA256_DIGEST_LENGTH];
	json_t *j = grant_to_json(g);
	char *text = j != NULL ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int rc = -1;

	json_decref(j);
	if (text != NULL && ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
	    EVP_DigestUpdate(ctx, label, sizeof(label) - 1) == 1 &&
	    EVP_DigestUpdate(ctx, text, strlen(text)) == 1 &&
	    EVP_DigestFinal_ex(ctx, md, NULL) == 1) {
		hex_encode(md, EGRESS_GRANT_ID_BYTES, out);
		rc = 0;
	}
	EVP_MD_CTX_free(ctx);
	free(text);
	return rc;
}

static struct lgrant *
add(struct grants *r, struct grant *g, bool dynamic, const char *name, const char *ifname,
    time_t created)
{
	unsigned char raw[EGRESS_GRANT_ID_BYTES];
	struct lgrant *lg;

	if (r->n >= EGRESS_GRANTS_MAX) {
		grant_free(g);
		errno = ENOSPC;
		return NULL;
	}
	/* Out of memory fails this grant, not the daemon (CONTRIBUTING.md, "Out of memory"). */
	lg = calloc(1, sizeof(*lg));
	if (lg == NULL) {
		grant_free(g);
		errno = ENOMEM;
		return NULL;
	}
	if (dynamic) {
		/* The id is a capability for revoke/list: 128 bits from the CSPRNG, never a
		 * counter. */
		if (RAND_bytes(raw, sizeof(raw)) != 1) {
			/* no id without the CSPRNG (it may have failed to allocate): this grant
			 * is refused, egressd serves on */
			free(lg);
			grant_free(g);
			errno = EIO;
			return NULL;
		}
		hex_encode(raw, sizeof(raw), lg->id);
	} else if (grant_static_id(g, lg->id) != 0) {
		free(lg);
		grant_free(g);
		errno = ENOMEM;
		return NULL;
	}
	lg->refs = 1;
	lg->g = g;
	lg->dynamic = dynamic;
	snprintf(lg->name, sizeof(lg->name), "%s", name != NULL ? name : g->principal);
	snprintf(lg->ifname, sizeof(lg->ifname), "%s", ifname != NULL ? ifname : "");
	lg->created = created;
	lg->dead = REASON_ALLOWED;
	lg->reg = r;
	if (g->lifetime_s > 0) {
		time_t now = time(NULL);
		lg->expires = lg->created + (time_t)g->lifetime_s;
		struct timeval tv = { lg->expires > now ? lg->expires - now : 0, 0 };
		lg->expiry = evtimer_new(r->base, lgrant_expire, lg);
		if (lg->expiry == NULL) {
			free(lg);
			grant_free(g);
			errno = ENOMEM;
			return NULL;
		}
		evtimer_add(lg->expiry, &tv);
	}
	lg->next = r->head;
	if (r->head != NULL)
		r->head->prev = lg;
	r->head = lg;
	r->n++;
	return lg;
}

struct lgrant *
grants_add(struct grants *r, struct grant *g, bool dynamic, const char *name,
    const char *ifname)
{
	return add(r, g, dynamic, name, ifname, time(NULL));
}

struct lgrant *
grants_add_static(struct grants *r, struct grant *g, const char *name, time_t issued)
{
	return add(r, g, false, name, NULL, issued);
}

int
lgrant_add_listener(struct lgrant *lg, struct listener *l)
{
	if (lg->nlisteners >= GRANT_LISTENERS_MAX)
		return -1;
	lg->listeners[lg->nlisteners++] = l;
	listener_set_arg(l, lg);
	return 0;
}

void
lgrant_remove_listener(struct lgrant *lg, struct listener *l)
{
	for (size_t i = 0; i < lg->nlisteners; i++) {
		if (lg->listeners[i] == l) {
			lg->listeners[i] = lg->listeners[--lg->nlisteners];
			return;
		}
	}
}

struct lgrant *
grants_find(struct grants *r, const char *id)
{
	for (struct lgrant *lg = r->head; lg != NULL; lg = lg->next)
		if (strcmp(lg->id, id) == 0)
			return lg;
	return NULL;
}

struct lgrant *
grants_first(struct grants *r)
{
	return r->head;
}

size_t
grants_count(const struct grants *r)
{
	return r->n;
}

static void
kill_conns(struct lgrant *lg, enum reason why)
{
	/* kill() detaches the connection (and may free it): always restart from the head. */
	size_t guard = 0;

	while (lg->conns != NULL && guard++ < 1000000) {
		struct grant_conn *gc = lg->conns;
		gc->kill(gc, why);
		if (lg->conns == gc)             /* kill did not detach: do it ourselves */
			lgrant_detach(lg, gc);
	}
}

void
grants_retire(struct grants *r, struct lgrant *lg, enum reason why, bool kill)
{
	if (lg->dead != REASON_ALLOWED)
		return;
	lg->dead = why;
	if (r->hook != NULL)            /* before the listeners go: the hook may name them */
		r->hook(r->hook_arg, lg, why);
	lgrant_close_listeners(lg);
	if (lg->expiry != NULL)
		event_del(lg->expiry);
	if (lg->prev != NULL)
		lg->prev->next = lg->next;
	else
		r->head = lg->next;
	if (lg->next != NULL)
		lg->next->prev = lg->prev;
	lg->next = lg->prev = NULL;
	r->n--;
	if (!kill) {
		/* its connections finish with it: keep it where grants_kill_all finds them (the
		 * last unref takes it off this list) */
		lg->next = r->retired;
		if (r->retired != NULL)
			r->retired->prev = lg;
		r->retired = lg;
		lg->on_retired = true;
	}
	lgrant_ref(lg);                 /* keep it alive while killing */
	if (kill)
		kill_conns(lg, REASON_CLOSE_REVOKED);
	lgrant_unref(lg);               /* the registry's reference */
	lgrant_unref(lg);
}

void
grants_kill_all(struct grants *r, enum reason why)
{
	/* Killing connections never unlinks live grants, so this walk is stable. */
	for (struct lgrant *lg = r->head; lg != NULL; lg = lg->next)
		kill_conns(lg, why);
	/* Retired grants still held by connections: killing the last one frees the grant
	 * (and unlinks it), so start again from the head each time; each round empties one
	 * grant's list (bounded by the grants retired, with a guard). */
	for (size_t guard = 0; guard < 1000000; guard++) {
		struct lgrant *lg = r->retired;

		while (lg != NULL && lg->conns == NULL)
			lg = lg->next;
		if (lg == NULL)
			break;
		lgrant_ref(lg);
		kill_conns(lg, why);
		lgrant_unref(lg);
	}
}

void
grants_close_listeners(struct grants *r)
{
	for (struct lgrant *lg = r->head; lg != NULL; lg = lg->next)
		lgrant_close_listeners(lg);
}

void
grants_free(struct grants *r)
{
	if (r == NULL)
		return;
	while (r->head != NULL)
		grants_retire(r, r->head, REASON_GRANT_REVOKED, true);
	/* Retired grants something still holds outlive the registry: off the list, so their
	 * last unref does not touch it. */
	while (r->retired != NULL) {
		struct lgrant *lg = r->retired;
		r->retired = lg->next;
		lg->next = lg->prev = NULL;
		lg->on_retired = false;
	}
	free(r);
}

void
lgrant_attach(struct lgrant *lg, struct grant_conn *gc)
{
	gc->prev = NULL;
	gc->next = lg->conns;
	if (lg->conns != NULL)
		lg->conns->prev = gc;
	lg->conns = gc;
}

void
lgrant_detach(struct lgrant *lg, struct grant_conn *gc)
{
	if (gc->prev != NULL)
		gc->prev->next = gc->next;
	else if (lg->conns == gc)
		lg->conns = gc->next;
	if (gc->next != NULL)
		gc->next->prev = gc->prev;
	gc->next = gc->prev = NULL;
}

size_t
grants_self_addrs(struct grants *r, struct addr *out, size_t max)
{
	size_t n = 0;

	for (struct lgrant *lg = r->head; lg != NULL; lg = lg->next)
		for (size_t i = 0; i < lg->nlisteners && n < max; i++)
			listener_addr(lg->listeners[i], &out[n++], NULL);
	return n;
}
