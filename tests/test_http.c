/* test_http.c - strict request-head parser, forwarded head, response head, chunked framer
 * (egressd/http). Every refusal has its negative test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <cmocka.h>

#include "common/limits.h"
#include "common/reasons.h"
#include "egressd/http.h"
#include "egressd/httpresp.h"

static struct http_request req;

static enum http_parse
parse(const char *s, enum reason *why)
{
	return http_parse_request(s, strlen(s), &req, why);
}

static void
expect_ok(const char *s)
{
	enum reason why;
	enum http_parse r = parse(s, &why);
	if (r != HTTP_PARSE_OK)
		fail_msg("expected OK for %s, got %d (%s)", s, r, reason_str(why));
}

static void
expect_err(const char *s, enum reason want)
{
	enum reason why = REASON_ALLOWED;
	enum http_parse r = parse(s, &why);
	if (r != HTTP_PARSE_ERROR || why != want)
		fail_msg("expected %s for [%s], got %d (%s)", reason_str(want), s, r,
		    reason_str(why));
}

/* ---------- allowed forms ---------- */

static void
test_connect_ok(void **st)
{
	expect_ok("CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n");
	assert_int_equal(req.method, HTTP_CONNECT);
	assert_int_equal(req.scheme, SCHEME_HTTPS);
	assert_string_equal(req.host.name, "api.example.com");
	assert_int_equal(req.port, 443);
	assert_int_equal(req.minor, 1);
	assert_int_equal(req.nheaders, 1);
	assert_int_equal(req.head_len, strlen("CONNECT api.example.com:443 HTTP/1.1\r\n"
	    "Host: api.example.com:443\r\n\r\n"));

	expect_ok("CONNECT API.Example.COM.:8443 HTTP/1.0\r\n\r\n");
	assert_string_equal(req.host.name, "api.example.com");
	assert_int_equal(req.port, 8443);
	assert_int_equal(req.minor, 0);
	assert_true(req.conn_close);

	expect_ok("CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n");
	assert_int_equal(req.host.kind, HOST_IPV6);
	expect_ok("CONNECT 198.51.100.7:22 HTTP/1.1\r\n\r\n");
	assert_int_equal(req.host.kind, HOST_IPV4);
}

static void
test_absolute_ok(void **st)
{
	static const char *const methods[] = { "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE",
		"OPTIONS" };
	char buf[256];

	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		snprintf(buf, sizeof(buf), "%s http://Mirror.Example.org/a/b?c=d HTTP/1.1\r\n"
		    "Host: mirror.example.org\r\n\r\n", methods[i]);
		expect_ok(buf);
		assert_int_equal(req.scheme, SCHEME_HTTP);
		assert_string_equal(req.host.name, "mirror.example.org");
		assert_int_equal(req.port, 80);
		assert_int_equal(req.path_len, strlen("/a/b?c=d"));
		assert_memory_equal(req.path, "/a/b?c=d", req.path_len);
	}
	expect_ok("GET http://example.org:8080 HTTP/1.0\r\n\r\n");
	assert_int_equal(req.port, 8080);
	assert_int_equal(req.path_len, 0);
	expect_ok("GET HTTP://example.org/ HTTP/1.1\r\nHost: h.example\r\n\r\n");     /* scheme is case-insensitive */
	expect_ok("POST http://example.org/ HTTP/1.1\r\nHost: h.example\r\nContent-Length: 5\r\n\r\nhello");
	assert_int_equal(req.body, HTTP_BODY_LENGTH);
	assert_int_equal(req.content_length, 5);
	expect_ok("POST http://example.org/ HTTP/1.1\r\nHost: h.example\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
	assert_int_equal(req.body, HTTP_BODY_CHUNKED);
	expect_ok("GET http://example.org/ HTTP/1.1\r\nHost: h.example\r\nConnection: close\r\n\r\n");
	assert_true(req.conn_close);
	expect_ok("GET http://example.org/ HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
	assert_false(req.conn_close);
	expect_ok("GET http://example.org/ HTTP/1.1\r\nHost: h.example\r\nX-Obs: caf\xc3\xa9\r\n\r\n"); /* obs-text */
}

static void
test_incomplete(void **st)
{
	enum reason why;
	const char *full = "CONNECT a.example:443 HTTP/1.1\r\nHost: a\r\n\r\n";

	for (size_t i = 0; i < strlen(full); i++)
		assert_int_equal(http_parse_request(full, i, &req, &why), HTTP_PARSE_INCOMPLETE);
	assert_int_equal(http_parse_request(full, strlen(full), &req, &why), HTTP_PARSE_OK);
}

/* ---------- refusals: one negative test each ---------- */

static void
test_refuse_origin_form(void **st)
{
	expect_err("GET / HTTP/1.1\r\nHost: a\r\n\r\n", REASON_ORIGIN_FORM);
	expect_err("OPTIONS * HTTP/1.1\r\n\r\n", REASON_ORIGIN_FORM);
}

static void
test_refuse_https_absolute(void **st)
{
	expect_err("GET https://a.example/ HTTP/1.1\r\n\r\n", REASON_HTTPS_ABSOLUTE_FORM);
	expect_err("GET HTTPS://a.example/ HTTP/1.1\r\n\r\n", REASON_HTTPS_ABSOLUTE_FORM);
}

static void
test_refuse_methods(void **st)
{
	expect_err("get http://a.example/ HTTP/1.1\r\n\r\n", REASON_BAD_METHOD);
	expect_err("Connect a.example:443 HTTP/1.1\r\n\r\n", REASON_BAD_METHOD);
	expect_err("TRACE http://a.example/ HTTP/1.1\r\n\r\n", REASON_BAD_METHOD);
	expect_err("PROPFIND http://a.example/ HTTP/1.1\r\n\r\n", REASON_BAD_METHOD);
	expect_err("G(T http://a.example/ HTTP/1.1\r\n\r\n", REASON_MALFORMED_REQUEST);
}

static void
test_refuse_bare_cr_lf(void **st)
{
	expect_err("GET http://a.example/ HTTP/1.1\r\nA: b\rc\r\n\r\n", REASON_MALFORMED_REQUEST);
	expect_err("GET http://a.example/ HTTP/1.1\rX: y\r\n\r\n", REASON_MALFORMED_REQUEST);
	expect_err("GET http://a.example/ HTTP/1.1\nA: b\n\n", REASON_MALFORMED_REQUEST);
	expect_err("GET http://a.example/ HTTP/1.1\r\nA: b\n\r\n", REASON_MALFORMED_REQUEST);
}

static void
test_refuse_obs_fold(void **st)
{
	expect_err("GET http://a.example/ HTTP/1.1\r\nA: b\r\n c\r\n\r\n",
	    REASON_MALFORMED_REQUEST);
	expect_err("GET http://a.example/ HTTP/1.1\r\nA: b\r\n\tc\r\n\r\n",
	    REASON_MALFORMED_REQUEST);
	expect_err("CONNECT a.example:443 HTTP/1.1\r\n X: y\r\n\r\n", REASON_MALFORMED_REQUEST);
}

static void
test_refuse_token_chars(void **st)
{
	expect_err("GET http://a.example/ HTTP/1.1\r\nBad Name: x\r\n\r\n",
	    REASON_MALFORMED_REQUEST);
	expect_err("GET http://a.example/ HTTP/1.1\r\nName : x\r\n\r\n", REASON_MALFORMED_REQUEST);
	expect_err("GET http://a.example/ HTTP/1.1\r\n(x): y\r\n\r\n", REASON_MALFORMED_REQUEST);
	expect_err("GET http://a.example/ HTTP/1.1\r\n: y\r\n\r\n", REASON_MALFORMED_REQUEST);
	expect_err("GET http://a.example/ HTTP/1.1\r\nNoColon\r\n\r\n", REASON_MALFORMED_REQUEST);
	/* NUL and control characters in a value */
	{
		enum reason why;
		const char s[] = "GET http://a.example/ HTTP/1.1\r\nA: b\0c\r\n\r\n";
		assert_int_equal(http_parse_request(s, sizeof(s) - 1, &req, &why),
		    HTTP_PARSE_ERROR);
		assert_int_equal(why, REASON_MALFORMED_REQUEST);
	}
	expect_err("GET http://a.example/ HTTP/1.1\r\nA: b\x01\r\n\r\n", REASON_MALFORMED_REQUEST);
	expect_err("GET http://a.example/ HTTP/1.1\r\nA: b\x7f\r\n\r\n", REASON_MALFORMED_REQUEST);
	expect_err("GET http://a.example/ HTTP/1.1\r\nConnection: clo se\r\n\r\n",
	    REASON_MALFORMED_REQUEST);
}

static void
test_refuse_request_line(void **st)
{
	expect_err("GET  http://a.example/ HTTP/1.1\r\n\r\n", REASON_MALFORMED_REQUEST);
	expect_err("GET http://a.example/  HTTP/1.1\r\n\r\n", REASON_MALFORMED_REQUEST);
	expect_err("GET http://a.example/ HTTP/2.0\r\n\r\n", REASON_MALFORMED_REQUEST);
	expect_err("GET http://a.example/ HTTP/1.2\r\n\r\n", REASON_MALFORMED_REQUEST);
	expect_err("GET http://a.example/ http/1.1\r\n\r\n", REASON_MALFORMED_REQUEST);
	expect_err("GET http://a.example/\r\n\r\n", REASON_MALFORMED_REQUEST);
	expect_err("GET http://a.example/#frag HTTP/1.1\r\n\r\n", REASON_MALFORMED_REQUEST);
	expect_err("GET ftp://a.example/ HTTP/1.1\r\n\r\n", REASON_MALFORMED_REQUEST);
	expect_err("GET http://a.example/\x80 HTTP/1.1\r\n\r\n", REASON_MALFORMED_REQUEST);
	expect_err("CONNECT /x HTTP/1.1\r\n\r\n", REASON_MALFORMED_REQUEST);
	expect_err("CONNECT http://a.example:443 HTTP/1.1\r\n\r\n", REASON_MALFORMED_REQUEST);
	expect_err(" GET http://a.example/ HTTP/1.1\r\n\r\n", REASON_MALFORMED_REQUEST);
}

static void
test_refuse_hosts_ports(void **st)
{
	expect_err("CONNECT a.example HTTP/1.1\r\n\r\n", REASON_INVALID_PORT);
	expect_err("CONNECT a.example:0 HTTP/1.1\r\n\r\n", REASON_INVALID_PORT);
	expect_err("CONNECT a.example:65536 HTTP/1.1\r\n\r\n", REASON_INVALID_PORT);
	expect_err("CONNECT a.example:0443 HTTP/1.1\r\n\r\n", REASON_INVALID_PORT);
	expect_err("CONNECT user@a.example:443 HTTP/1.1\r\n\r\n", REASON_INVALID_HOST);
	expect_err("CONNECT 010.0.0.1:443 HTTP/1.1\r\n\r\n", REASON_INVALID_HOST);
	expect_err("CONNECT 127.1:443 HTTP/1.1\r\n\r\n", REASON_INVALID_HOST);
	expect_err("CONNECT 2001:db8::1:443 HTTP/1.1\r\n\r\n", REASON_INVALID_HOST);
	expect_err("CONNECT a%2eexample:443 HTTP/1.1\r\n\r\n", REASON_INVALID_HOST);
	expect_err("GET http://user:pw@a.example/ HTTP/1.1\r\n\r\n", REASON_INVALID_HOST);
	expect_err("GET http://a..example/ HTTP/1.1\r\n\r\n", REASON_INVALID_HOST);
	expect_err("GET http:///x HTTP/1.1\r\n\r\n", REASON_INVALID_HOST);
	expect_err("GET http://a.example:99999/ HTTP/1.1\r\n\r\n", REASON_INVALID_PORT);
	/* HTTP/1.1 without Host (RFC 9112 3.2); its twins: with Host, HTTP/1.0, CONNECT */
	expect_err("GET http://a.example/ HTTP/1.1\r\n\r\n", REASON_MISSING_HOST);
	expect_err("POST http://a.example/ HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
	    REASON_MISSING_HOST);
	expect_ok("GET http://a.example/ HTTP/1.1\r\nhost: a.example\r\n\r\n");
	expect_ok("GET http://a.example/ HTTP/1.0\r\n\r\n");
	expect_ok("CONNECT a.example:443 HTTP/1.1\r\n\r\n");
}

static void
test_refuse_framing(void **st)
{
	/* duplicate Content-Length, even equal */
	expect_err("POST http://a.example/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n"
	    "\r\n", REASON_BAD_FRAMING);
	/* conflicting */
	expect_err("POST http://a.example/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n"
	    "\r\n", REASON_BAD_FRAMING);
	expect_err("POST http://a.example/ HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n",
	    REASON_BAD_FRAMING);
	expect_err("POST http://a.example/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
	    REASON_BAD_FRAMING);
	expect_err("POST http://a.example/ HTTP/1.1\r\nContent-Length: +5\r\n\r\n",
	    REASON_BAD_FRAMING);
	expect_err("POST http://a.example/ HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n"
	    "\r\n", REASON_BAD_FRAMING);
	expect_err("POST http://a.example/ HTTP/1.1\r\nContent-Length:\r\n\r\n",
	    REASON_BAD_FRAMING);
	/* CL + TE */
	expect_err("POST http://a.example/ HTTP/1.1\r\nContent-Length: 5\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n", REASON_BAD_FRAMING);
	expect_err("POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
	    "Content-Length: 5\r\n\r\n", REASON_BAD_FRAMING);
	/* TE whose last coding is not chunked */
	expect_err("POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
	    REASON_BAD_FRAMING);
	expect_err("POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
	    REASON_BAD_FRAMING);
	expect_err("POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
	    "Transfer-Encoding: gzip\r\n\r\n", REASON_BAD_FRAMING);
	expect_err("POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n"
	    "\r\n", REASON_BAD_FRAMING);
	expect_err("POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding:\r\n\r\n",
	    REASON_BAD_FRAMING);
	/* TE in HTTP/1.0 */
	expect_err("POST http://a.example/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
	    REASON_BAD_FRAMING);
	/* Connection naming a framing header would strip it while forwarding the body */
	expect_err("POST http://a.example/ HTTP/1.1\r\nContent-Length: 5\r\n"
	    "Connection: content-length\r\n\r\n", REASON_BAD_FRAMING);
	/* a CONNECT has no body */
	expect_err("CONNECT a.example:443 HTTP/1.1\r\nContent-Length: 5\r\n\r\n",
	    REASON_BAD_FRAMING);
	expect_ok("CONNECT a.example:443 HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
	/* duplicate Host */
	expect_err("GET http://a.example/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	    REASON_MALFORMED_REQUEST);
}

static void
test_refuse_too_large(void **st)
{
	enum reason why;
	size_t n = 2 * EGRESS_REQUEST_HEAD_MAX;
	char *b = malloc(n + 1);
	int off;

	assert_non_null(b);
	/* request line over the limit, with and without its CRLF */
	memset(b, 'a', n);
	memcpy(b, "GET http://a.example/", 21);
	b[n] = '\0';
	assert_int_equal(http_parse_request(b, n, &req, &why), HTTP_PARSE_ERROR);
	assert_int_equal(why, REASON_HEAD_TOO_LARGE);
	/* one header line over the limit */
	off = snprintf(b, n, "GET http://a.example/ HTTP/1.1\r\nX: ");
	memset(b + off, 'a', n - (size_t)off);
	assert_int_equal(http_parse_request(b, n, &req, &why), HTTP_PARSE_ERROR);
	assert_int_equal(why, REASON_HEAD_TOO_LARGE);
	/* too many headers */
	off = snprintf(b, n, "GET http://a.example/ HTTP/1.1\r\n");
	for (int i = 0; i <= EGRESS_HEADER_COUNT_MAX; i++)
		off += snprintf(b + off, n - (size_t)off, "X-%d: y\r\n", i);
	off += snprintf(b + off, n - (size_t)off, "\r\n");
	assert_int_equal(http_parse_request(b, (size_t)off, &req, &why), HTTP_PARSE_ERROR);
	assert_int_equal(why, REASON_HEAD_TOO_LARGE);
	/* whole head over the limit with short lines */
	off = snprintf(b, n, "GET http://a.example/ HTTP/1.1\r\n");
	for (int i = 0; i < 60; i++) {
		off += snprintf(b + off, n - (size_t)off, "X-%d: ", i);
		memset(b + off, 'v', 600);
		off += 600;
		off += snprintf(b + off, n - (size_t)off, "\r\n");
	}
	assert_int_equal(http_parse_request(b, (size_t)off, &req, &why), HTTP_PARSE_ERROR);
	assert_int_equal(why, REASON_HEAD_TOO_LARGE);
	free(b);
}

/* ---------- forwarded head ---------- */

static bool
has_line(const char *head, size_t n, const char *line)
{
	size_t l = strlen(line);
	for (size_t i = 0; i + l <= n; i++)
		if ((i == 0 || head[i - 1] == '\n') && strncasecmp(head + i, line, l) == 0)
			return true;
	return false;
}

static void
test_forward_head(void **st)
{
	char out[4096];
	size_t n;

	expect_ok("POST http://Api.Example.com:8080/v1?q=1 HTTP/1.1\r\n"
	    "Host: evil.example\r\n"
	    "Connection: keep-alive, X-Secret\r\n"
	    "X-Secret: s\r\n"
	    "Keep-Alive: timeout=5\r\n"
	    "TE: trailers\r\n"
	    "Trailer: X-T\r\n"
	    "Proxy-Authorization: Basic Zm9vOmJhcg==\r\n"
	    "Proxy-Connection: keep-alive\r\n"
	    "Proxy-Authenticate: x\r\n"
	    "Content-Length: 3\r\n"
	    "Authorization: Bearer t\r\n"
	    "\r\n");
	n = http_build_forward_head(&req, out, sizeof(out));
	assert_true(n > 0);
	out[n] = '\0';
	assert_true(strncmp(out, "POST /v1?q=1 HTTP/1.1\r\nHost: api.example.com:8080\r\n", 51) == 0);
	assert_false(has_line(out, n, "Host: evil"));
	assert_false(has_line(out, n, "X-Secret"));
	assert_false(has_line(out, n, "Keep-Alive"));
	assert_false(has_line(out, n, "TE:"));
	assert_false(has_line(out, n, "Trailer"));
	assert_false(has_line(out, n, "Proxy-"));
	assert_false(has_line(out, n, "Connection: keep-alive"));
	assert_true(has_line(out, n, "Content-Length: 3"));
	assert_true(has_line(out, n, "Authorization: Bearer t"));
	assert_true(has_line(out, n, "Connection: close"));
	assert_true(n >= 4 && memcmp(out + n - 4, "\r\n\r\n", 4) == 0);

	/* default port left out of Host, empty path becomes "/" */
	expect_ok("GET http://a.example HTTP/1.0\r\n\r\n");
	n = http_build_forward_head(&req, out, sizeof(out));
	out[n] = '\0';
	assert_string_equal(out, "GET / HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n");
	expect_ok("GET http://a.example?x HTTP/1.1\r\nHost: h.example\r\n\r\n");
	n = http_build_forward_head(&req, out, sizeof(out));
	assert_true(strncmp(out, "GET /?x HTTP/1.1\r\n", 18) == 0);
	/* too small an output buffer */
	assert_int_equal(http_build_forward_head(&req, out, 10), 0);

	/* through an upstream HTTP proxy: absolute form, egressd's own credential only */
	expect_ok("GET http://Api.Example.com:8080/v1?q=1 HTTP/1.1\r\nHost: h.example\r\n"
	    "Proxy-Authorization: Basic d29ya2VyOnN0b2xlbg==\r\n\r\n");
	n = http_build_proxy_head(&req, NULL, "Basic ZWdyZXNzZDpzM2NyZXQ=", out, sizeof(out));
	assert_true(n > 0);
	out[n] = '\0';
	assert_string_equal(out, "GET http://api.example.com:8080/v1?q=1 HTTP/1.1\r\n"
	    "Host: api.example.com:8080\r\n"
	    "Proxy-Authorization: Basic ZWdyZXNzZDpzM2NyZXQ=\r\n"
	    "Connection: close\r\n\r\n");
	assert_null(strstr(out, "d29ya2VyOnN0b2xlbg=="));   /* the worker's is never forwarded */
	expect_ok("GET http://a.example HTTP/1.1\r\nHost: h.example\r\n\r\n");
	n = http_build_proxy_head(&req, NULL, NULL, out, sizeof(out));
	out[n] = '\0';
	assert_string_equal(out, "GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\n"
	    "Connection: close\r\n\r\n");
	/* pinning = required: the URL names the checked address, Host the destination */
	{
		struct addr a = { .family = AF_INET };
		inet_pton(AF_INET, "198.51.100.7", &a.u.v4);
		expect_ok("GET http://a.example:8080/p HTTP/1.1\r\nHost: h.example\r\n\r\n");
		n = http_build_proxy_head(&req, &a, NULL, out, sizeof(out));
		out[n] = '\0';
		assert_string_equal(out, "GET http://198.51.100.7:8080/p HTTP/1.1\r\n"
		    "Host: a.example:8080\r\nConnection: close\r\n\r\n");
		a.family = AF_INET6;
		inet_pton(AF_INET6, "2001:db8::7", &a.u.v6);
		expect_ok("GET http://a.example/p HTTP/1.1\r\nHost: h.example\r\n\r\n");
		n = http_build_proxy_head(&req, &a, NULL, out, sizeof(out));
		out[n] = '\0';
		assert_true(strncmp(out, "GET http://[2001:db8::7]/p HTTP/1.1\r\nHost: a.example\r\n",
		    54) == 0);
	}
}

/* ---------- response head ---------- */

/* ---------- chunked framer ---------- */

static void
test_chunked(void **st)
{
	struct http_chunked c;
	const char *body = "5\r\nhello\r\n1;ext=1\r\n!\r\n0\r\nX-T: 1\r\n\r\nGET http://next/ ...";
	size_t blen = strlen(body);
	size_t end = (size_t)(strstr(body, "GET") - body);
	bool done = false;
	long k;

	http_chunked_init(&c);
	k = http_chunked_feed(&c, body, blen, &done);
	assert_true(done);
	assert_int_equal(k, (long)end);

	/* byte by byte gives the same end */
	http_chunked_init(&c);
	size_t total = 0;
	done = false;
	for (size_t i = 0; i < blen && !done; i++) {
		k = http_chunked_feed(&c, body + i, 1, &done);
		assert_true(k >= 0);
		total += (size_t)k;
	}
	assert_true(done);
	assert_int_equal(total, end);

	/* malformed: non-hex size, missing CRLF after data, overflow, bare LF */
	const char *bad[] = { "z\r\n", "5\r\nhelloX\r\n", "fffffffffffffffff\r\n", "5\nhello",
		"\r\n", ";x\r\n",
		/* a request line smuggled as a "trailer" after the last chunk */
		"3\r\nabc\r\n0\r\nGET http://evil.test/ HTTP/1.1\r\n\r\n",
		"0\r\nno-colon\r\n\r\n", "0\r\n: empty name\r\n\r\n",
		"0\r\nBad Name: x\r\n\r\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		http_chunked_init(&c);
		assert_int_equal(http_chunked_feed(&c, bad[i], strlen(bad[i]), &done), -1);
	}
	/* a size line over the limit */
	{
		char *b = malloc(EGRESS_CHUNK_LINE_MAX + 10);
		assert_non_null(b);
		b[0] = '1';
		b[1] = ';';
		memset(b + 2, 'e', EGRESS_CHUNK_LINE_MAX + 8);
		http_chunked_init(&c);
		assert_int_equal(http_chunked_feed(&c, b, EGRESS_CHUNK_LINE_MAX + 10, &done), -1);
		free(b);
	}
}

/* The body framer: every kind, split feeds, nothing past the end, the state kept after it. */
static void
test_body_framer(void **st)
{
	struct http_body_framer f;
	const char *chunked = "3\r\nabc\r\n0\r\n\r\nNEXT";
	bool done = true;
	long k;

	(void)st;
	http_body_framer_init(&f, HTTP_RESP_NONE, 0);
	assert_int_equal(http_body_framer_feed(&f, NULL, 7, &done), 0);
	assert_true(done);

	http_body_framer_init(&f, HTTP_RESP_LENGTH, 10);
	assert_int_equal(http_body_framer_feed(&f, NULL, 4, &done), 4);
	assert_false(done);
	assert_int_equal(http_body_framer_feed(&f, NULL, 0, &done), 0);
	assert_false(done);
	assert_int_equal(http_body_framer_feed(&f, NULL, 9, &done), 6);   /* 3 bytes are not its */
	assert_true(done);
	assert_int_equal(http_body_framer_feed(&f, NULL, 5, &done), 0);
	assert_true(done);
	http_body_framer_init(&f, HTTP_RESP_LENGTH, 0);
	assert_int_equal(http_body_framer_feed(&f, NULL, 5, &done), 0);
	assert_true(done);

	http_body_framer_init(&f, HTTP_RESP_CHUNKED, 0);
	k = http_body_framer_feed(&f, chunked, 5, &done);
	assert_int_equal(k, 5);
	assert_false(done);
	k = http_body_framer_feed(&f, chunked + 5, strlen(chunked) - 5, &done);
	assert_int_equal(5 + k, (long)(strstr(chunked, "NEXT") - chunked));
	assert_true(done);
	assert_int_equal(http_body_framer_feed(&f, "NEXT", 4, &done), 0);
	assert_true(done);
	http_body_framer_init(&f, HTTP_RESP_CHUNKED, 0);
	assert_int_equal(http_body_framer_feed(&f, "zz\r\n", 4, &done), -1);

	http_body_framer_init(&f, HTTP_RESP_CLOSE, 0);
	assert_int_equal(http_body_framer_feed(&f, NULL, 1000, &done), 1000);
	assert_false(done);
}

static void
test_refusal_format(void **st)
{
	char out[512];
	size_t n = http_format_refusal(REASON_NOT_GRANTED, out, sizeof(out));

	assert_true(n > 0);
	out[n] = '\0';
	assert_true(strncmp(out, "HTTP/1.1 403 Forbidden\r\n", 24) == 0);
	assert_non_null(strstr(out, "\r\nX-Egress-Reason: not_granted\r\n"));
	assert_non_null(strstr(out, "\r\nConnection: close\r\n"));
	assert_non_null(strstr(out, "\r\n\r\nnot_granted: "));
	assert_int_equal(out[n - 1], '\n');
	assert_null(memchr(strstr(out, "\r\n\r\n") + 4, '\r', strlen(strstr(out, "\r\n\r\n") + 4)));
	n = http_format_refusal(REASON_AUDIT_UNAVAILABLE, out, sizeof(out));
	out[n] = '\0';
	assert_true(strncmp(out, "HTTP/1.1 503 ", 13) == 0);
	/* close reasons are not HTTP refusals; and never a 407 for policy */
	assert_int_equal(http_format_refusal(REASON_CLOSE_IDLE, out, sizeof(out)), 0);
	for (int r = 0; r < REASON__COUNT; r++)
		assert_int_not_equal(reason_http_status((enum reason)r), 407);
	assert_int_equal(http_format_refusal(REASON_NOT_GRANTED, out, 20), 0);
}

/* ---- docs/redirects.md: the forwarding path's builders and the response framing ---- */

static void
test_request_head_forwarding(void **st)
{
	char out[4096];
	size_t n;
	bool stripped = true;

	expect_ok("GET http://b.example/echo HTTP/1.1\r\nHost: h.example\r\nAuthorization: Bearer t\r\n"
	    "Cookie: a=1\r\nVia: 1.1 corp\r\nX-Keep: k\r\n\r\n");
	n = http_build_request_head(&req, 0, NULL, NULL, &stripped, out, sizeof(out));
	assert_true(n > 0);
	out[n] = '\0';
	assert_false(stripped);
	assert_string_equal(out, "GET /echo HTTP/1.1\r\nHost: b.example\r\n"
	    "Authorization: Bearer t\r\nCookie: a=1\r\nVia: 1.1 corp\r\nX-Keep: k\r\n"
	    "Via: 1.1 egressd\r\nConnection: close\r\n\r\n");
	/* after a cross-origin redirect: credentials out, the rest untouched */
	n = http_build_request_head(&req, HTTP_FWD_STRIP_CREDENTIALS, NULL, NULL, &stripped,
	    out, sizeof(out));
	out[n] = '\0';
	assert_true(stripped);
	assert_false(has_line(out, n, "Authorization"));
	assert_false(has_line(out, n, "Cookie"));
	assert_true(has_line(out, n, "X-Keep: k"));
	/* negative twin: nothing to strip */
	expect_ok("GET http://b.example/ HTTP/1.0\r\n\r\n");
	n = http_build_request_head(&req, HTTP_FWD_STRIP_CREDENTIALS, NULL, NULL, &stripped,
	    out, sizeof(out));
	out[n] = '\0';
	assert_false(stripped);
	assert_true(has_line(out, n, "Via: 1.0 egressd"));
	/* proxy form: egressd's credential only, the worker's never */
	expect_ok("GET http://b.example/ HTTP/1.1\r\nHost: h.example\r\nProxy-Authorization: Basic d29ya2Vy\r\n\r\n");
	n = http_build_request_head(&req, HTTP_FWD_PROXY_FORM, NULL, "Basic ZWdyZXNzZA==", NULL,
	    out, sizeof(out));
	out[n] = '\0';
	assert_true(strncmp(out, "GET http://b.example/ HTTP/1.1\r\n", 32) == 0);
	assert_true(has_line(out, n, "Proxy-Authorization: Basic ZWdyZXNzZA=="));
	assert_null(strstr(out, "d29ya2Vy"));
	/* proxy_auth is ignored for origin form */
	n = http_build_request_head(&req, 0, NULL, "Basic ZWdyZXNzZA==", NULL, out, sizeof(out));
	out[n] = '\0';
	assert_null(strstr(out, "Proxy-Authorization"));
	assert_int_equal(http_build_request_head(&req, 0, NULL, NULL, NULL, out, 20), 0);
}

static struct httpresp rsp;

static void
resp_ok(const char *s)
{
	if (httpresp_parse(s, strlen(s), 0, &rsp) != HTTPRESP_OK)
		fail_msg("httpresp_parse(%s)", s);
}

static void
test_client_response(void **st)
{
	char out[4096];
	size_t n;

	resp_ok("HTTP/1.0 200 OK\r\nConnection: keep-alive, X-Hop, content-length\r\n"
	    "X-Hop: 1\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\nX-End: e\r\n\r\n");
	n = http_build_client_response(&rsp, false, out, sizeof(out));
	out[n] = '\0';
	/* named hop-by-hop headers go, the framing stays (the bytes pass unchanged) */
	assert_string_equal(out, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-End: e\r\n"
	    "Via: 1.0 egressd\r\nConnection: close\r\n\r\n");
	n = http_build_client_response(&rsp, true, out, sizeof(out));
	out[n] = '\0';
	assert_null(strstr(out, "Connection"));
	resp_ok("HTTP/1.1 100 Continue\r\n\r\n");
	n = http_build_client_response(&rsp, false, out, sizeof(out));
	out[n] = '\0';
	assert_string_equal(out, "HTTP/1.1 100 Continue\r\nVia: 1.1 egressd\r\n\r\n");
	assert_int_equal(http_build_client_response(&rsp, false, out, 10), 0);
}

static void
framing(const char *s, bool head, int want_rc, enum http_resp_body want, uint64_t want_len)
{
	enum http_resp_body k;
	uint64_t len;

	resp_ok(s);
	int rc = http_response_framing(&rsp, head, &k, &len);
	if (rc != want_rc || (rc == 0 && (k != want || len != want_len)))
		fail_msg("%s: rc %d kind %d len %llu", s, rc, k, (unsigned long long)len);
}

static void
test_response_framing(void **st)
{
	framing("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", false, 0, HTTP_RESP_LENGTH, 12);
	framing("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", true, 0, HTTP_RESP_NONE, 0);
	framing("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, 0, HTTP_RESP_NONE, 0);
	framing("HTTP/1.1 204 No\r\nContent-Length: 7\r\n\r\n", false, 0, HTTP_RESP_NONE, 0);
	framing("HTTP/1.1 304 NM\r\n\r\n", false, 0, HTTP_RESP_NONE, 0);
	framing("HTTP/1.1 103 EH\r\n\r\n", false, 0, HTTP_RESP_NONE, 0);
	framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n", false, 0,
	    HTTP_RESP_CHUNKED, 0);
	framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", false, 0,
	    HTTP_RESP_CLOSE, 0);
	framing("HTTP/1.1 200 OK\r\n\r\n", false, 0, HTTP_RESP_CLOSE, 0);
	framing("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", false,
	    0, HTTP_RESP_LENGTH, 5);
	/* the shapes a proxy must not pass on */
	framing("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
	    false, -1, HTTP_RESP_NONE, 0);
	framing("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", false,
	    -1, HTTP_RESP_NONE, 0);
	framing("HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n", false, -1, HTTP_RESP_NONE, 0);
	framing("HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n", false, -1, HTTP_RESP_NONE, 0);
	framing("HTTP/1.1 200 OK\r\nContent-Length: 1234567890123456789\r\n\r\n", false, -1,
	    HTTP_RESP_NONE, 0);
	framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", false, -1,
	    HTTP_RESP_NONE, 0);
	framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n", false, -1, HTTP_RESP_NONE, 0);
}

/* Inside an intercepted tunnel: origin-form with Host; the proxy forms are refused. */
static void
test_origin_request(void **state)
{
	struct http_request oreq;
	enum reason why;
	const char *ok = "POST /v1/messages?x=1 HTTP/1.1\r\nHost: API.example.com\r\n"
	    "Content-Length: 2\r\n\r\n{}";
	const char *bad[][2] = {
		{ "GET / HTTP/1.1\r\n\r\n", "missing_host" },
		{ "GET / HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n",
		  "malformed_request" },
		{ "GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n",
		  "malformed_request" },
		{ "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example\r\n\r\n", "bad_method" },
		{ "OPTIONS * HTTP/1.1\r\nHost: a.example\r\n\r\n", "malformed_request" },
		{ "GET /#f HTTP/1.1\r\nHost: a.example\r\n\r\n", "malformed_request" },
		{ "GET / HTTP/1.1\r\nHost: a.example:0\r\n\r\n", "invalid_port" },
		{ "GET / HTTP/1.1\r\nHost: user@a.example\r\n\r\n", "invalid_host" },
	};

	assert_int_equal(http_parse_origin_request(ok, strlen(ok), &oreq, &why), HTTP_PARSE_OK);
	assert_string_equal(oreq.host.name, "api.example.com");
	assert_int_equal(oreq.port, 443);
	assert_int_equal(oreq.method, HTTP_POST);
	assert_int_equal(oreq.path_len, 16);
	assert_int_equal(oreq.body, HTTP_BODY_LENGTH);
	ok = "GET / HTTP/1.1\r\nHost: api.example.com:8443\r\n\r\n";
	assert_int_equal(http_parse_origin_request(ok, strlen(ok), &oreq, &why), HTTP_PARSE_OK);
	assert_int_equal(oreq.port, 8443);
	/* the proxy parser still refuses origin-form */
	assert_int_equal(http_parse_request(ok, strlen(ok), &oreq, &why), HTTP_PARSE_ERROR);
	assert_int_equal(why, REASON_ORIGIN_FORM);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(http_parse_origin_request(bad[i][0], strlen(bad[i][0]), &oreq,
		    &why), HTTP_PARSE_ERROR);
		assert_string_equal(reason_str(why), bad[i][1]);
	}
}

/* A head parsed in one buffer and copied to another: every pointer follows the copy (the
 * session parses once, then keeps the head in its own buffer), a constant "" path stays. */
static void
test_request_rebase(void **st)
{
	(void)st;
	static const char h1[] = "GET http://example.com/a?b HTTP/1.1\r\nHost: example.com\r\n"
	    "X-One: 1\r\n\r\nBODY";
	static const char h2[] = "GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n";
	static const char h3[] = "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n";
	const char *heads[] = { h1, h2, h3 };
	struct http_request r, want;
	enum reason why;

	for (size_t k = 0; k < 3; k++) {
		char *src = strdup(heads[k]), *dst;

		assert_non_null(src);
		assert_int_equal(http_parse_request(src, strlen(src), &r, &why), HTTP_PARSE_OK);
		dst = malloc(r.head_len);
		assert_non_null(dst);
		memcpy(dst, src, r.head_len);
		http_request_rebase(&r, src, dst);
		memset(src, 'x', strlen(src));   /* nothing may still point here */
		assert_int_equal(http_parse_request(dst, r.head_len, &want, &why), HTTP_PARSE_OK);
		assert_ptr_equal(r.target, want.target);
		assert_int_equal(r.target_len, want.target_len);
		assert_int_equal(r.path_len, want.path_len);
		if (want.path_len > 0)
			assert_ptr_equal(r.path, want.path);
		else
			assert_memory_equal(r.path, want.path, 1);
		assert_int_equal(r.nheaders, want.nheaders);
		for (size_t i = 0; i < r.nheaders; i++) {
			assert_ptr_equal(r.headers[i].name, want.headers[i].name);
			assert_ptr_equal(r.headers[i].value, want.headers[i].value);
			assert_int_equal(r.headers[i].value_len, want.headers[i].value_len);
		}
		assert_string_equal(r.host.name, want.host.name);
		free(src);
		free(dst);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_connect_ok),
		cmocka_unit_test(test_absolute_ok),
		cmocka_unit_test(test_incomplete),
		cmocka_unit_test(test_refuse_origin_form),
		cmocka_unit_test(test_refuse_https_absolute),
		cmocka_unit_test(test_refuse_methods),
		cmocka_unit_test(test_refuse_bare_cr_lf),
		cmocka_unit_test(test_refuse_obs_fold),
		cmocka_unit_test(test_refuse_token_chars),
		cmocka_unit_test(test_refuse_request_line),
		cmocka_unit_test(test_refuse_hosts_ports),
		cmocka_unit_test(test_refuse_framing),
		cmocka_unit_test(test_refuse_too_large),
		cmocka_unit_test(test_forward_head),
		cmocka_unit_test(test_chunked),
		cmocka_unit_test(test_body_framer),
		cmocka_unit_test(test_refusal_format),
		cmocka_unit_test(test_request_head_forwarding),
		cmocka_unit_test(test_client_response),
		cmocka_unit_test(test_response_framing),
		cmocka_unit_test(test_origin_request),
		cmocka_unit_test(test_request_rebase),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
