/*
 * egressctl - talk to a running egressd over its control socket (docs/control.md) and
 * read decision logs (docs/decision-log.md).
 *
 * Subcommands live in one table (cmds[] below): a new one is a row and a function.
 * Exit codes: 0 success (log intact), 1 failure (log broken, error reply, egressd not
 * reachable), 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/ctlclient.h"
#include "common/limits.h"
#include "common/paths.h"
#include "common/util.h"
#include "common/dlogchain.h"
#include "egressd/ctl/gzread.h"
#include "egressd/ctl/logexport.h"
#include "egressd/ctl/logfiles.h"
#include "egressd/ctl/logextract.h"
#include "egressd/ctl/loggrants.h"
#include "egressd/ctl/logquery.h"
#include "egressd/ctl/logsummary.h"

#define EXIT_BROKEN 1
#define EXIT_USAGE  2

struct ctl {
	const char *sock;
	bool json;
};

struct cmd {
	const char *word1, *word2;  /* word2 NULL: single-word command */
	int (*fn)(struct ctl *c, int argc, char **argv);
	const char *usage;
};

static int cmd_log_verify(struct ctl *c, int argc, char **argv);
static int log_verify_files(bool continued, const struct dlog_key *key, int argc,
    const char **argv);
static int log_verify_extract(const struct dlog_key *key, int argc, const char **argv);
static int cmd_status(struct ctl *c, int argc, char **argv);
static int cmd_grant_list(struct ctl *c, int argc, char **argv);
static int cmd_grant_revoke(struct ctl *c, int argc, char **argv);
static int cmd_grant_unrevoke(struct ctl *c, int argc, char **argv);
static int cmd_grant_show(struct ctl *c, int argc, char **argv);
static int cmd_reload(struct ctl *c, int argc, char **argv);
static int cmd_route(struct ctl *c, int argc, char **argv);
static int cmd_log_query(struct ctl *c, int argc, char **argv);
static int cmd_log_summary(struct ctl *c, int argc, char **argv);
static int cmd_log_export(struct ctl *c, int argc, char **argv);
static int cmd_log_grants(struct ctl *c, int argc, char **argv);

static const struct cmd cmds[] = {
	{ "log", "verify", cmd_log_verify, "log verify [--continued] [--key FILE] [FILE...] (- = stdin)" },
	{ "log", "query", cmd_log_query, "log query [--principal P] [--grant ID] [--verdict allow|deny] [--reason R] [--event E] [--dest GLOB] [--route GLOB] [--attested yes|no] [--since T] [--until T] [--key FILE] [--table] [--follow [--interval MS]] [FILE...]" },
	{ "log", "summary", cmd_log_summary, "log summary [--format text|json|html] [-o OUT] [--title T] [filters as for query] [FILE...]" },
	{ "log", "export", cmd_log_export, "log export --format squid [filters as for query] [FILE...]" },
	{ "log", "grants", cmd_log_grants, "log grants --at TIME [--principal P] [--key FILE] [--json] [FILE...]   (grants in service at TIME)" },
	{ "status", NULL, cmd_status, "status" },
	{ "grant", "list", cmd_grant_list, "grant list" },
	{ "grant", "show", cmd_grant_show, "grant show GRANT_ID   (the whole authority set)" },
	{ "grant", "revoke", cmd_grant_revoke, "grant revoke GRANT_ID   (a static grant stays revoked across reloads and restarts)" },
	{ "grant", "unrevoke", cmd_grant_unrevoke, "grant unrevoke GRANT_ID   (clear a static grant's revocation; it returns at the next reload)" },
	{ "reload", NULL, cmd_reload, "reload" },
	{ "route", NULL, cmd_route, "route URL   (the route egressd would take: https://host[:port]/, http://..., tcp://host:port)" },
};

static void
usage(FILE *f)
{
	fprintf(f, "usage: egressctl [-s SOCKET] [-l LOG] [--json] COMMAND [--help]\n"
	    "       egressctl --help | --version\n"
	    "  -s, --socket SOCKET  control socket (default %s)\n"
	    "  -l, --log LOG        the decision log the log commands read when no FILE is\n"
	    "                       given, with its rotated files (default %s)\n"
	    "  --json               print control replies as JSON\n"
	    "  -h, --help           this text; after a command: that command's usage\n"
	    "  -V, --version        the version\n"
	    "commands:\n", EGRESS_CONTROL_SOCKET_DEFAULT, logfiles_default());
	for (size_t i = 0; i < EGRESS_NELEM(cmds); i++)
		fprintf(f, "  egressctl %s\n", cmds[i].usage);
	fprintf(f, "Several FILEs are read as one chain, in chain order whatever the order given.\n"
	    "See egressctl(8).\n");
}

/* "--help" or "-h" among a command's arguments (before a "--"): print its usage. */
static bool
wants_help(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			return false;
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return true;
	}
	return false;
}

/* The usage of every command whose first word is word1 (or of one command). */
static void
usage_cmd(FILE *f, const char *word1, const char *word2)
{
	for (size_t i = 0; i < EGRESS_NELEM(cmds); i++)
		if (strcmp(cmds[i].word1, word1) == 0 &&
		    (word2 == NULL || cmds[i].word2 == NULL || strcmp(cmds[i].word2, word2) == 0))
			fprintf(f, "usage: egressctl %s\n", cmds[i].usage);
}

/* ---- log verify ---- */

static int
cmd_log_verify(struct ctl *c, int argc, char **argv)
{
	struct dlog_key key = { 0 };
	bool continued = false;
	char kerr[256];
	int i = 0, rc;

	(void)c;
	for (; i < argc; i++) {
		if (strcmp(argv[i], "--continued") == 0) {
			continued = true;
		} else if (strcmp(argv[i], "--key") == 0 && i + 1 < argc && key.len == 0) {
			/* an HMAC-keyed chain (docs/audit.md): proves the key holder wrote it */
			if (dlog_key_load(argv[++i], false, &key, kerr, sizeof(kerr)) != 0) {
				fprintf(stderr, "egressctl: --key %s\n", kerr);
				return EXIT_USAGE;
			}
		} else if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		} else {
			break;
		}
	}
	if (i >= argc) {
		/* No FILE: the default decision log and its rotated files (logfiles.h). */
		const char *files[LOGQUERY_FILES_MAX];
		size_t dropped;
		int n = logfiles_default_set(files, EGRESS_NELEM(files), &dropped, kerr,
		    sizeof(kerr));

		if (n < 0) {
			fprintf(stderr, "egressctl: log verify: %s\n", kerr);
			secret_wipe(&key, sizeof(key));
			return EXIT_USAGE;
		}
		if (dropped > 0) {
			/* The oldest files are left out: the rest continues a chain. */
			fprintf(stderr, "egressctl: warning: %s\n", kerr);
			continued = true;
		}
		rc = log_verify_files(continued, key.len > 0 ? &key : NULL, n, files);
		secret_wipe(&key, sizeof(key));
		return rc;
	}
	{
		const char **files = calloc((size_t)(argc - i), sizeof(*files));

		if (files == NULL) {
			fprintf(stderr, "egressctl: out of memory\n");
			secret_wipe(&key, sizeof(key));
			return EXIT_BROKEN;
		}
		for (int k = i; k < argc; k++)
			files[k - i] = argv[k];
		rc = log_verify_files(continued, key.len > 0 ? &key : NULL, argc - i, files);
		free(files);
	}
	secret_wipe(&key, sizeof(key));
	return rc;
}

static int
log_verify_extract(const struct dlog_key *key, int argc, const char **argv)
{
	struct logextract_result *r = calloc(1, sizeof(*r));
	FILE *f = fopen(argv[0], "re");
	enum dlog_break b;

	if (r == NULL || f == NULL) {
		fprintf(stderr, "egressctl: %s: %s\n", argv[0], strerror(errno));
		free(r);
		if (f != NULL)
			fclose(f);
		return EXIT_BROKEN;
	}
	b = logextract_verify(f, argv[0], key, argv + 1,
	    (size_t)argc - 1, r);
	fclose(f);
	if (b != DLOG_INTACT) {
		printf("BROKEN %s\n", r->message);
		free(r);
		return EXIT_BROKEN;
	}
	printf("intact extract: %llu record(s) of %s %s, seq %llu..%llu, anchored after seq "
	    "%llu (hash %s) of %s; %llu gap(s) hold other principals' records\n",
	    (unsigned long long)r->records, r->anchor.principal[0] ? "principal" : "grant",
	    r->anchor.principal[0] ? r->anchor.principal : r->anchor.grant_id,
	    (unsigned long long)r->first_seq, (unsigned long long)r->last_seq,
	    (unsigned long long)r->anchor.seq, r->anchor.hash, r->anchor.log,
	    (unsigned long long)r->gaps);
	if (r->truncated)
		printf("the extract was cut at its size bound by egress-exec: records after seq "
		    "%llu are not in it\n", (unsigned long long)r->last_seq);
	if (r->against_system)
		printf("matches the system log: the anchor is in it, and every record of the run "
		    "up to seq %llu is in the extract, byte for byte\n",
		    (unsigned long long)(r->truncated ? r->last_seq : r->anchor.through_seq));
	else
		printf("give the system log's files after it to prove that nothing of the run "
		    "was left out or added\n");
	free(r);
	return 0;
}

static int
log_verify_files(bool continued, const struct dlog_key *key, int argc, const char **argv)
{
	struct dlog_verify v;
	int i = 0;

	/* a run's decisions.jsonl (anchor line first), alone or with the system log after it */
	if (argc >= 1 && logextract_is_extract(argv[0]))
		return log_verify_extract(key, argc, argv);
	dlog_verify_init(&v, continued);
	v.key = key;
	/* Several files are one chain. A glob lists them by name (the current file first,
	 * ".1000" before ".999"): verify them in chain order, by the seq of each file's first
	 * record. Reordering cannot hide a break: every link is still checked. */
	if (logfiles_order(argv, (size_t)argc) > 0) {
		fprintf(stderr, "egressctl: verifying in chain order:");
		for (int k = 0; k < argc; k++)
			fprintf(stderr, " %s", argv[k]);
		fputc('\n', stderr);
	}
	for (; i < argc; i++) {
		enum dlog_break b = strcmp(argv[i], "-") == 0 ?
		    dlog_verify_stream(&v, stdin, "<stdin>") : gzread_verify_file(&v, argv[i]);

		if (b != DLOG_INTACT) {
			printf("BROKEN %s\n", v.message);
			printf("%llu record(s) verified before the break\n",
			    (unsigned long long)v.records);
			return EXIT_BROKEN;
		}
	}
	printf("intact: %llu record(s), last seq %llu, last hash %s\n",
	    (unsigned long long)v.records,
	    (unsigned long long)(v.started ? v.next_seq - 1 : 0), v.prev);
	if (key != NULL)
		printf("HMAC-SHA-256 chain: every record was written by the holder of the key\n");
	return 0;
}

/* ---- log query / summary / export (docs/audit.md): the code is in their modules ---- */

static int
cmd_log_query(struct ctl *c, int argc, char **argv)
{
	(void)c;
	return logquery_cli(argc, argv);
}

static int
cmd_log_summary(struct ctl *c, int argc, char **argv)
{
	(void)c;
	return logsummary_cli(argc, argv);
}

static int
cmd_log_grants(struct ctl *c, int argc, char **argv)
{
	(void)c;
	return loggrants_cli(argc, argv);
}

static int
cmd_log_export(struct ctl *c, int argc, char **argv)
{
	(void)c;
	return logexport_cli(argc, argv);
}

/* ---- control socket ---- */

/* One request, one reply line (common/ctlclient.h). Returns the parsed reply or NULL
 * (message printed). */
static json_t *
control_call(struct ctl *c, json_t *req)
{
	char err[512];
	json_t *reply = NULL;

	if (ctlclient_request(c->sock, req, -1, &reply, CTLCLIENT_TIMEOUT_MS, err,
	    sizeof(err)) != 0) {
		fprintf(stderr, "egressctl: %s%s\n", err,
		    errno == ENOENT || errno == ECONNREFUSED || errno == EACCES ?
		    " (is egressd running? are you root?)" : "");
		return NULL;
	}
	return reply;
}

/* Send {"op": op, ...extra}; returns 0 with *out (new ref) on ok:true, else 1. */
static int
control_op(struct ctl *c, const char *op, json_t *extra, json_t **out)
{
	json_t *req = extra != NULL ? extra : json_object();
	json_t *reply;

	*out = NULL;
	json_object_set_new(req, "op", json_string(op));
	reply = control_call(c, req);
	json_decref(req);
	if (reply == NULL)
		return EXIT_BROKEN;
	if (!json_is_true(json_object_get(reply, "ok"))) {
		const char *code = json_string_value(json_object_get(reply, "error"));
		const char *msg = json_string_value(json_object_get(reply, "message"));

		fprintf(stderr, "egressctl: %s: %s%s%s\n", op, code ? code : "error",
		    msg ? ": " : "", msg ? msg : "");
		json_decref(reply);
		return EXIT_BROKEN;
	}
	*out = reply;
	return 0;
}

static void
print_json(json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2));

	if (s != NULL) {
		printf("%s\n", s);
		free(s);
	}
}

static long long
jint(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

static const char *
jstr(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "-";
}

/* The route egressd would take for a destination, and why (not a grant check). */
static int
cmd_route(struct ctl *c, int argc, char **argv)
{
	json_t *r, *req, *ents;
	int rc;

	if (argc != 1) {
		fprintf(stderr, "usage: egressctl route URL\n");
		return EXIT_USAGE;
	}
	req = json_object();
	json_object_set_new(req, "url", json_string(argv[0]));
	if ((rc = control_op(c, "route", req, &r)) != 0)
		return rc;
	if (c->json) {
		print_json(r);
	} else {
		const char *st = jstr(r, "status");
		printf("route source: %s\n", jstr(r, "source"));
		if (strcmp(st, "allowed") == 0) {
			ents = json_object_get(r, "entries");
			for (size_t i = 0; json_is_array(ents) && i < json_array_size(ents); i++)
				printf("  %zu. %s\n", i + 1, json_string_value(json_array_get(ents, i)));
			printf("%s\n", jstr(r, "message"));
		} else {
			printf("no route: %s — %s\n", st, jstr(r, "message"));
		}
		if (jstr(r, "pac")[0] != '\0')
			printf("%s\n", jstr(r, "pac"));
		printf("(a route is not a grant: the destination still needs an allow entry)\n");
	}
	rc = strcmp(jstr(r, "status"), "allowed") == 0 ? 0 : 1;
	json_decref(r);
	return rc;
}

static int
cmd_status(struct ctl *c, int argc, char **argv)
{
	json_t *r, *log, *sy;
	int rc;

	(void)argv;
	if (argc != 0) {
		fprintf(stderr, "usage: egressctl status\n");
		return EXIT_USAGE;
	}
	if ((rc = control_op(c, "status", NULL, &r)) != 0)
		return rc;
	if (c->json) {
		print_json(r);
	} else {
		printf("egressd %s, pid %lld, up %lld s\n", jstr(r, "version"), jint(r, "pid"),
		    jint(r, "uptime_s"));
		printf("grants: %lld, connections: %lld\n", jint(r, "grants"),
		    jint(r, "connections"));
		log = json_object_get(r, "log");
		if (json_is_object(log))
			printf("decision log: %s, seq %lld, %s\n", jstr(log, "path"),
			    jint(log, "seq"), json_is_true(json_object_get(log, "writable")) ?
			    "writable" : "NOT WRITABLE (hops refused: audit_unavailable)");
		sy = json_is_object(log) ? json_object_get(log, "syslog") : NULL;
		if (json_is_object(sy)) {
			const char *tr = jstr(sy, "transport");
			bool stream = strcmp(tr, "tcp") == 0 || strcmp(tr, "tls") == 0;

			printf("syslog mirror: %s, %s, sent %lld, lost %lld", jstr(sy, "target"),
			    !stream ? "datagrams" : json_is_true(json_object_get(sy, "connected")) ?
			    "connected" : "NOT CONNECTED", jint(sy, "sent"), jint(sy, "dropped"));
			if (stream)
				printf(", holding %lld record(s) (%lld bytes)", jint(sy, "spool_records"),
				    jint(sy, "spool_bytes"));
			if (json_is_string(json_object_get(sy, "error")))
				printf(" (%s)", jstr(sy, "error"));
			printf("\n");
		}
	}
	json_decref(r);
	return 0;
}

static int
cmd_grant_list(struct ctl *c, int argc, char **argv)
{
	json_t *r, *grants, *g;
	size_t i;
	int rc;

	(void)argv;
	if (argc != 0) {
		fprintf(stderr, "usage: egressctl grant list\n");
		return EXIT_USAGE;
	}
	if ((rc = control_op(c, "grant.list", NULL, &r)) != 0)
		return rc;
	grants = json_object_get(r, "grants");
	if (c->json) {
		print_json(grants ? grants : r);
	} else {
		printf("%-32s %-20s %-24s %-16s %6s %s\n", "GRANT_ID", "PRINCIPAL", "LISTEN",
		    "INTERFACE", "CONNS", "EXPIRES");
		json_array_foreach(grants, i, g) {
			json_t *exp = json_object_get(g, "expires");
			char ebuf[32];

			if (json_is_string(exp))
				snprintf(ebuf, sizeof(ebuf), "%s", json_string_value(exp));
			else if (json_is_integer(exp))
				snprintf(ebuf, sizeof(ebuf), "%lld",
				    (long long)json_integer_value(exp));
			else
				snprintf(ebuf, sizeof(ebuf), "never");
			printf("%-32s %-20s %-24s %-16s %6lld %s\n", jstr(g, "grant_id"),
			    jstr(g, "principal"), jstr(g, "listen"), jstr(g, "interface"),
			    jint(g, "connections"), ebuf);
		}
		json_array_foreach(json_object_get(r, "revoked_static"), i, g)
			printf("%-32s %-20s revoked static grant (since %lld): egressctl grant "
			    "unrevoke, or change it in the file\n", jstr(g, "grant_id"),
			    jstr(g, "principal"), jint(g, "revoked"));
	}
	json_decref(r);
	return 0;
}

/* One grant in full: who, where, what it allows, its limits and use so far. */
static int
cmd_grant_show(struct ctl *c, int argc, char **argv)
{
	json_t *r, *grants, *g, *found = NULL, *auth, *v;
	size_t i;
	int rc;

	if (argc != 1) {
		fprintf(stderr, "usage: egressctl grant show GRANT_ID\n");
		return EXIT_USAGE;
	}
	if ((rc = control_op(c, "grant.list", NULL, &r)) != 0)
		return rc;
	grants = json_object_get(r, "grants");
	json_array_foreach(grants, i, g)
		if (strcmp(jstr(g, "grant_id"), argv[0]) == 0)
			found = g;
	if (found == NULL) {
		fprintf(stderr, "egressctl: no live grant %s (egressctl grant list shows them)\n",
		    argv[0]);
		json_decref(r);
		return 1;
	}
	if (c->json) {
		print_json(found);
		json_decref(r);
		return 0;
	}
	auth = json_object_get(found, "grant");
	printf("grant      %s\n", jstr(found, "grant_id"));
	printf("principal  %s\n", jstr(found, "principal"));
	printf("listen     %s (interface %s)\n", jstr(found, "listen"),
	    jstr(found, "interface"));
	printf("use        %lld connection(s) now, %lld byte(s)\n", jint(found, "connections"),
	    jint(found, "bytes"));
	printf("pinning    %s\n", jstr(auth, "pinning"));
	json_array_foreach(json_object_get(auth, "allow"), i, v)
		printf("allow      %s\n", json_string_value(v));
	json_array_foreach(json_object_get(auth, "allow_address"), i, v)
		printf("address    %s\n", json_string_value(v));
	json_array_foreach(json_object_get(auth, "credential_origin"), i, v)
		printf("creds to   %s\n", json_string_value(v));
	v = json_object_get(auth, "limits");
	printf("limits     %lld connection(s), %lld byte(s) (0 = unlimited), lifetime %lld s\n",
	    jint(v, "connections"), jint(v, "bytes"), jint(v, "lifetime_s"));
	json_decref(r);
	return 0;
}

static int
cmd_grant_revoke(struct ctl *c, int argc, char **argv)
{
	json_t *r;
	int rc;

	if (argc != 1) {
		fprintf(stderr, "usage: egressctl grant revoke GRANT_ID\n");
		return EXIT_USAGE;
	}
	if ((rc = control_op(c, "grant.revoke", json_pack("{s:s}", "grant_id", argv[0]),
	    &r)) != 0)
		return rc;
	if (c->json)
		print_json(r);
	else
		printf("revoked %s\n", argv[0]);
	json_decref(r);
	return 0;
}

static int
cmd_grant_unrevoke(struct ctl *c, int argc, char **argv)
{
	json_t *r;
	int rc;

	if (argc != 1) {
		fprintf(stderr, "usage: egressctl grant unrevoke GRANT_ID\n");
		return EXIT_USAGE;
	}
	if ((rc = control_op(c, "grant.unrevoke", json_pack("{s:s}", "grant_id", argv[0]),
	    &r)) != 0)
		return rc;
	if (c->json)
		print_json(r);
	else
		printf("%s: %s\n", argv[0], jstr(r, "message"));
	json_decref(r);
	return 0;
}

static int
cmd_reload(struct ctl *c, int argc, char **argv)
{
	json_t *r;
	int rc;

	(void)argv;
	if (argc != 0) {
		fprintf(stderr, "usage: egressctl reload\n");
		return EXIT_USAGE;
	}
	if ((rc = control_op(c, "reload", NULL, &r)) != 0)
		return rc;
	if (c->json)
		print_json(r);
	else
		printf("reloaded\n");
	json_decref(r);
	return 0;
}

/* Find the command argv names; *nwords gets how many words named it. NULL: none. */
static const struct cmd *
cmd_find(int argc, char **argv, int *nwords)
{
	for (size_t i = 0; i < EGRESS_NELEM(cmds); i++) {
		const struct cmd *k = &cmds[i];

		if (strcmp(argv[0], k->word1) != 0)
			continue;
		if (k->word2 == NULL) {
			*nwords = 1;
			return k;
		}
		if (argc >= 2 && strcmp(argv[1], k->word2) == 0) {
			*nwords = 2;
			return k;
		}
	}
	return NULL;
}

static bool
is_word1(const char *w)
{
	for (size_t i = 0; i < EGRESS_NELEM(cmds); i++)
		if (strcmp(cmds[i].word1, w) == 0)
			return true;
	return false;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "log", required_argument, NULL, 'l' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl c = { .sock = EGRESS_CONTROL_SOCKET_DEFAULT };
	const struct cmd *k;
	int ch, nwords, rc;

	/* First of all: a closed 0, 1 or 2 must not become a socket or a file (util.h). */
	if (stdio_ensure(false) != 0) {
		fprintf(stderr, "egressctl: standard input, output or error is closed and /dev/null "
		    "cannot be opened: %s\n", strerror(errno));
		return 1;
	}
	/* '+': stop at the first non-option so subcommands keep their own options */
	while ((ch = getopt_long(argc, argv, "+s:l:hV", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			c.sock = optarg;
			break;
		case 'l':
			logfiles_set_default(optarg);
			break;
		case 'j':
			c.json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("egressctl %s\n", EGRESS_VERSION);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1) {
		usage(stderr);
		return EXIT_USAGE;
	}
	/* egressctl help [COMMAND...] */
	if (strcmp(argv[0], "help") == 0) {
		if (argc >= 2 && is_word1(argv[1])) {
			usage_cmd(stdout, argv[1], argc >= 3 ? argv[2] : NULL);
			return 0;
		}
		usage(stdout);
		return 0;
	}
	k = cmd_find(argc, argv, &nwords);
	if (k == NULL) {
		if (is_word1(argv[0])) {
			/* "egressctl log" or "egressctl log --help": the commands under it */
			bool help = argc >= 2 && wants_help(1, argv + 1);

			if (argc >= 2 && !help)
				fprintf(stderr, "egressctl: unknown command: %s %s\n", argv[0],
				    argv[1]);
			usage_cmd(help ? stdout : stderr, argv[0], NULL);
			return help ? 0 : EXIT_USAGE;
		}
		fprintf(stderr, "egressctl: unknown command: %s\n", argv[0]);
		usage(stderr);
		return EXIT_USAGE;
	}
	/* --help anywhere after the command (before "--") is that command's usage, never a
	 * file or a value named "--help" (name such a file ./--help). */
	if (wants_help(argc - nwords, argv + nwords)) {
		usage_cmd(stdout, k->word1, k->word2);
		return 0;
	}
	rc = k->fn(&c, argc - nwords, argv + nwords);
	logfiles_free();
	return rc;
}
