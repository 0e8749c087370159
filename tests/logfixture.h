/* logfixture.h - build decision-log chains for the audit tests (test_log*.c,
 * test_report_html.c): records with chosen times and fields, hashed exactly as
 * egressd/dlog.c does (docs/decision-log.md "The chain: exact bytes"), with the fields in
 * the order egressd/session_record.c emits them. Header-only: each test includes it once. */
#ifndef EGRESS_TEST_LOGFIXTURE_H
#define EGRESS_TEST_LOGFIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dlogchain.h"

struct lchain {
	FILE *f;
	unsigned long long seq;      /* last seq written */
	char prev[DLOG_HASH_HEX + 1];
	const char *key;             /* HMAC key (NULL = plain SHA-256 chain) */
	size_t keylen;
};

static inline void
lchain_init(struct lchain *c, FILE *f)
{
	memset(c, 0, sizeof(*c));
	c->f = f;
	memcpy(c->prev, dlog_zero_hash, sizeof(c->prev));
}

/* Append one record: fields is the compact JSON text between "event" and "prev"
 * (without leading/trailing comma; "" for none). Returns the line length. */
static inline size_t
lchain_add(struct lchain *c, const char *time, const char *event, const char *fields)
{
	char *body = NULL, hash[DLOG_HASH_HEX + 1];
	size_t blen;
	int n;

	c->seq++;
	body = malloc(EGRESS_LOG_RECORD_MAX * 2);
	if (body == NULL)
		abort();
	n = snprintf(body, EGRESS_LOG_RECORD_MAX * 2, "{\"v\":1,\"time\":\"%s\",\"seq\":%llu,\"event\":\"%s\"%s%s,"
	    "\"prev\":\"%s\"}", time, c->seq, event, fields[0] ? "," : "", fields, c->prev);
	if (n < 0 || n >= EGRESS_LOG_RECORD_MAX * 2)
		abort();
	blen = (size_t)n;
	if (dlog_hash_body(c->prev, body, blen, hash) != 0)
		abort();
	fwrite(body, 1, blen - 1, c->f);
	fprintf(c->f, ",\"hash\":\"%s\"}\n", hash);
	fflush(c->f);
	memcpy(c->prev, hash, sizeof(c->prev));
	free(body);
	return blen - 1 + 75 + 1;
}

/* A decision record as egressd/session_record.c writes it (direct route unless route given;
 * a denial is never attested: nothing was connected). */
static inline void
lchain_decision(struct lchain *c, const char *time, const char *conn, const char *principal,
    const char *dest, const char *verdict, const char *reason, const char *route,
    int attested)
{
	char f[2048];
	bool direct = route == NULL || strcmp(route, "direct") == 0;

	snprintf(f, sizeof(f), "\"conn\":\"%s\",\"principal\":\"%s\",\"grant_id\":"
	    "\"5c1e9a0b4d2f6e8a1b3c5d7e9f0a2b4c\",\"client\":\"169.254.77.2:43120\","
	    "\"method\":\"CONNECT\",\"target\":\"%s\",\"target_truncated\":false,"
	    "\"dest\":\"%s\",\"verdict\":\"%s\",\"reason\":\"%s\",\"route\":\"%s\","
	    "\"route_source\":\"%s\"%s,\"resolved\":[\"198.51.100.10\"],\"pinned\":%s,"
	    "\"classes_dropped\":[],\"override\":false,\"attested\":%s,\"resolve_us\":1200,"
	    "\"connect_us\":300", conn, principal, dest, dest, verdict, reason,
	    direct ? "direct" : route, direct ? "direct" : "proxy",
	    direct ? "" : ",\"proxy_addr\":\"198.51.100.3:3128\",\"proxy_status\":200,"
	    "\"proxy_auth\":null",
	    strcmp(verdict, "allow") == 0 && attested ? "\"198.51.100.10\"" : "null",
	    strcmp(verdict, "allow") == 0 && attested ? "true" : "false");
	lchain_add(c, time, "decision", f);
}

/* A plain-HTTP decision (absolute-form GET). */
static inline void
lchain_http(struct lchain *c, const char *time, const char *conn, const char *principal,
    const char *url, const char *dest)
{
	char f[2048];

	snprintf(f, sizeof(f), "\"conn\":\"%s\",\"principal\":\"%s\",\"grant_id\":"
	    "\"5c1e9a0b4d2f6e8a1b3c5d7e9f0a2b4c\",\"client\":\"169.254.77.2:43124\","
	    "\"method\":\"GET\",\"target\":\"%s\",\"target_truncated\":false,"
	    "\"dest\":\"%s\",\"verdict\":\"allow\",\"reason\":\"allowed\",\"route\":\"direct\","
	    "\"route_source\":\"direct\",\"resolved\":[\"198.51.100.11\"],"
	    "\"pinned\":\"198.51.100.11\",\"classes_dropped\":[],\"override\":false,"
	    "\"attested\":true,\"resolve_us\":900,\"connect_us\":200", conn, principal, url,
	    dest);
	lchain_add(c, time, "decision", f);
}

static inline void
lchain_close(struct lchain *c, const char *time, const char *conn, const char *principal,
    const char *dest, long long up, long long down, long long dur_us, const char *reason)
{
	char f[1024];

	snprintf(f, sizeof(f), "\"conn\":\"%s\",\"principal\":\"%s\",\"grant_id\":"
	    "\"5c1e9a0b4d2f6e8a1b3c5d7e9f0a2b4c\",\"dest\":\"%s\",\"pinned\":\"198.51.100.10\","
	    "\"reason\":\"%s\",\"bytes_up\":%lld,\"bytes_down\":%lld,\"duration_us\":%lld",
	    conn, principal, dest, reason, up, down, dur_us);
	lchain_add(c, time, "close", f);
}

/* The standard sample: 8 records, two principals, allows, denials, a proxy route,
 * an unattested hop, closes with bytes. Seqs 1..8 (see each line). */
static inline void
lchain_sample(struct lchain *c)
{
	/* 1 */ lchain_decision(c, "2026-11-30T09:00:00.000000Z", "c-1", "run-a",
	    "api.example.com:443", "allow", "allowed", "direct", 1);
	/* 2 */ lchain_decision(c, "2026-11-30T09:00:05.000000Z", "c-2", "run-a",
	    "internal.example.com:443", "deny", "private_address", "direct", 1);
	/* 3 */ lchain_close(c, "2026-11-30T09:00:10.500000Z", "c-1", "run-a",
	    "api.example.com:443", 5120, 88311, 10500000, "client_closed");
	/* 4 */ lchain_decision(c, "2026-11-30T09:01:00.000000Z", "c-3", "run-b",
	    "pypi.example.org:443", "allow", "allowed", "http://proxy.example.net:3128", 0);
	/* 5 */ lchain_decision(c, "2026-11-30T09:02:00.000000Z", "c-4", "run-b",
	    "evil.example.net:443", "deny", "not_granted", "direct", 1);
	/* 6 */ lchain_close(c, "2026-11-30T09:03:00.000000Z", "c-3", "run-b",
	    "pypi.example.org:443", 100, 2000, 120000000, "upstream_closed");
	/* 7 */ lchain_http(c, "2026-11-30T10:00:00.000000Z", "c-5", "run-a",
	    "http://mirror.example.com/debian/a.deb", "mirror.example.com:80");
	/* 8 */ lchain_decision(c, "2026-11-30T10:30:00.000000Z", "c-6", "run-a",
	    "evil.example.net:443", "deny", "not_granted", "direct", 1);
}

#endif
