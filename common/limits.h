/*
 * limits.h - every limit of the project, named once.
 *
 * A buffer that holds bytes from a worker, an origin, DNS, a PAC file or an upstream proxy
 * is bounded by one of these names. An attacker's number never sizes an allocation: code
 * grows buffers only as bytes arrive, and refuses past the limit named here.
 */
#ifndef EGRESS_LIMITS_H
#define EGRESS_LIMITS_H

/* Names and addresses */
#define EGRESS_HOSTNAME_MAX        253   /* RFC 1035 name length, without trailing dot */
#define EGRESS_LABEL_MAX           63    /* RFC 1035 label length */
#define EGRESS_HOSTPORT_MAX        (EGRESS_HOSTNAME_MAX + 1 + 5 + 2)  /* [v6]:port fits */
#define EGRESS_ADDRSTR_MAX         64    /* text form of any IPv4/IPv6 address + margin */
#define EGRESS_HOST_INPUT_MAX      1024  /* raw host input accepted before canonicalizing */
#define EGRESS_DEST_PATTERN_MAX    300   /* "https://" + "*." + name + ":port" */

/* HTTP request and response heads (egressd/http) */
#define EGRESS_REQUEST_LINE_MAX    8192
#define EGRESS_HEADER_LINE_MAX     8192
#define EGRESS_HEADER_COUNT_MAX    100
#define EGRESS_REQUEST_HEAD_MAX    32768 /* whole head, request line included */
#define EGRESS_RESPONSE_HEAD_MAX   65536
#define EGRESS_LOCATION_MAX        8192
#define EGRESS_CHUNK_LINE_MAX      1024
#define EGRESS_REDIRECT_MEMO_MAX   64    /* allowed redirects remembered per principal */
#define EGRESS_REDIRECT_CHAIN_MAX  10    /* redirects followed in a row per principal */
#define EGRESS_UPOOL_MAX           256   /* idle upstream connections kept for reuse */
#define EGRESS_UPOOL_PER_GRANT     8     /* ... of one grant */
#define EGRESS_UPOOL_IDLE_S        4     /* an idle upstream connection is closed after
                                            (below common origin keep-alive timeouts, 5 s) */
#define EGRESS_REDIRECT_MEMO_TTL_S 30    /* how long a cross-origin redirect strips credentials */

/* Grants and principals */
#define EGRESS_PRINCIPAL_MAX       64    /* principal label length */
#define EGRESS_GRANT_ENTRIES_MAX   256   /* allow entries per grant */
#define EGRESS_GRANT_CIDRS_MAX     64    /* allow_address entries per grant */
#define EGRESS_GRANT_CONNECTIONS_MAX 4096 /* limits.connections of one grant */
#define EGRESS_GRANT_LIFETIME_MAX_S (30 * 24 * 3600) /* limits.lifetime_s of one grant */
#define EGRESS_GRANT_ID_BYTES      16    /* 128 random bits; hex text is twice that */
#define EGRESS_GRANTS_MAX          1024  /* live grants in one egressd */
#define EGRESS_IFNAME_MAX          16    /* IFNAMSIZ */
#define EGRESS_GRANT_STATE_MAX     (1024 * 1024) /* bytes of egressd's static-grant journal */
#define EGRESS_GRANT_STATE_ENTRIES_MAX 4096 /* static grants it remembers */

/* Model connections (egressd/connections, egressd/mitm; docs/model-connections.md) */
#define EGRESS_CONNECTION_NAME_MAX 64    /* [connection NAME] label */
#define EGRESS_CONNECTIONS_MAX     64    /* connections in one file */
#define EGRESS_CONNECTION_RULES_MAX 64   /* allow_method / allow_path / destination entries */
#define EGRESS_CREDENTIAL_MAX      4096  /* one connection's secret, in bytes */
#define EGRESS_HEADER_NAME_MAX     64    /* credential_header field name */
#define EGRESS_CLIENTHELLO_MAX     16384 /* ClientHello bytes looked at before a tunnel (one
                                            TLS record's plaintext limit, 2^14) */
#define EGRESS_CLIENTHELLO_WAIT_MS 10000 /* time a client gets to send its ClientHello */
#define EGRESS_ALPN_MAX            8     /* ALPN protocol names kept from a ClientHello */
#define EGRESS_LEAF_CACHE_MAX      256   /* minted leaf certificates kept per CA */
#define EGRESS_PLACEHOLDER_MAX     128   /* a run's credential placeholder */
#define EGRESS_PLACEHOLDER_MIN     16

/* Control protocol (unix socket, newline-delimited JSON) */
#define EGRESS_CONTROL_LINE_MAX    65536
#define EGRESS_CONTROL_CLIENTS_MAX 32

/* DNS (egressd/resolve) */
#define EGRESS_DNS_ADDRS_MAX       32    /* addresses kept from one answer */
#define EGRESS_DNS_CACHE_MAX       4096  /* cached names */
#define EGRESS_DNS_TTL_CAP_S       300   /* a TTL above this is capped */
#define EGRESS_DNS_PENDING_MAX     64    /* concurrent queries per principal */

/* Transparent capture (egressd/tpool, egressd/dnsstub; docs/transparent.md) */
#define EGRESS_TPOOL_NAMES_MAX     1024  /* names one grant's stub resolver hands addresses to */
#define EGRESS_DNSSTUB_MSG_MAX     1232  /* a query datagram above this is dropped (EDNS's
                                            safe UDP size; our answers are far smaller) */
#define EGRESS_DNSSTUB_BURST       32    /* datagrams read per wake-up: fairness on the loop */
#define EGRESS_DNSSTUB_TTL_S       300   /* TTL of a synthetic answer (the mapping lives as
                                            long as the grant) */
#define EGRESS_DNSSTUB_DENY_BURST  64    /* deny records one stub writes back to back ... */
#define EGRESS_DNSSTUB_DENY_RATE   16    /* ... then at most this many a second; the rest are
                                            counted in one dns_suppressed record a second */
#define EGRESS_DNSSTUB_SUPPRESS_MS 1000  /* how often that count is written while it grows */

/* Tunnels (egressd/tunnel) */
#define EGRESS_SPLICE_PIPES_MAX    2048  /* splice pipes in use at once: 4096 of the 20,000 fds */
#define EGRESS_SPLICE_PIPES_IDLE   256   /* empty pipes kept for reuse */
#define EGRESS_SPLICE_BIG_PIPES    16    /* pipes grown for bulk directions (in use + idle):
                                            16 MiB of pipe capacity, a quarter of the
                                            kernel's default per-user soft limit */
#define EGRESS_SPLICE_BIG_SIZE     (1024 * 1024)  /* their size: the default pipe-max-size */
#define EGRESS_SPLICE_BIG_AFTER    (1024 * 1024)  /* bytes a direction moves before it gets one */

/* Route helper and PAC (egressd/route) */
#define EGRESS_PAC_MAX             (1024 * 1024)
#define EGRESS_ROUTE_LINE_MAX      4096
#define EGRESS_ROUTE_PROXIES_MAX   8     /* entries of one PAC answer kept */
#define EGRESS_ROUTE_CACHE_MAX     4096
#define EGRESS_ROUTE_HELPERS_MAX   4     /* libproxy helper processes, started on demand */

/* Configuration files (INI) */
#define EGRESS_CONF_LINE_MAX       4096
#define EGRESS_CONF_FILE_MAX       (1024 * 1024)
#define EGRESS_CONF_LIST_MAX       1024  /* values of one repeated key */

/* Decision log */
#define EGRESS_LOG_RECORD_MAX      16384 /* one JSON line; the raw target is truncated to fit */
#define EGRESS_LOG_TARGET_MAX      1024  /* raw target kept in a record */
#define EGRESS_LOG_KEPT_MAX        4096  /* close records held while the log is failed */
/* The decision log's syslog mirror over TCP/TLS (egressd/dlog_syslog.h, docs/audit.md) */
#define EGRESS_SYSLOG_SPOOL_DEFAULT (4ULL * 1024 * 1024) /* records held for the collector
                                         (egressd.ini log_syslog_spool); past it the newest
                                         are dropped, counted and recorded */
#define EGRESS_SYSLOG_SPOOL_MIN    (2 * EGRESS_LOG_RECORD_MAX + 4096) /* one record always fits */
#define EGRESS_SYSLOG_SPOOL_MAX    (1024ULL * 1024 * 1024)
#define EGRESS_SYSLOG_BACKOFF_MIN_MS 250  /* first reconnect delay; doubles per failure */
#define EGRESS_SYSLOG_BACKOFF_MAX_MS 8000 /* ... up to this */
#define EGRESS_SYSLOG_CONNECT_MS   5000  /* TCP connect to the collector */
#define EGRESS_SYSLOG_HANDSHAKE_MS 10000 /* TLS handshake with the collector */
#define EGRESS_SYSLOG_STALL_MS     60000 /* a collector that takes no byte for this long is
                                         dropped and reconnected */
#define EGRESS_SYSLOG_DISCARD_MAX  65536 /* bytes read (and discarded) from the collector per
                                         wake-up: it has nothing to say to us */
#define EGRESS_SYSLOG_CLOSE_MS     2000  /* at shutdown: time to hand the spool over */
#define EGRESS_AUDIT_KEYS_MAX      10000 /* principals, destinations, reasons... one log summary
                                            keeps apart; more are counted as "(other)" */
#define EGRESS_AUDIT_MINUTES_MAX   100000 /* per-minute timeline buckets of one summary */
#define EGRESS_AUDIT_PENDING_MAX   65536 /* allowed hops awaiting their close in a squid export */
#define EGRESS_LOG_GZ_OUT_MAX      (64ULL * 1024 * 1024 * 1024) /* bytes one rotated .gz log may
                                         decompress to */
#define EGRESS_LOG_GZ_RATIO_MAX    100   /* decompressed/compressed bytes of a .gz log (a log
                                         of hashed records compresses ~5-10x; a bomb
                                         1000x) */
#define EGRESS_LOG_GZ_RATIO_FREE   (1024 * 1024) /* output below this is not ratio-checked */

/* Executor: artifacts and paths */
#define EGRESS_PATH_MAX            4096
#define EGRESS_REPO_PATH_MAX       1024  /* one repository-relative path */
#define EGRESS_GLOB_MAX            1024
#define EGRESS_CHANGED_PATHS_MAX   100000
#define EGRESS_MASK_GLOB_MAX       4096  /* entries one glob forbidden_paths masks (one
                                          * mount each); more refuses the run */
#define EGRESS_MASK_DEPTH_MAX      256   /* directory depth a glob mask walk enters */
#define EGRESS_ENV_VARS_MAX        256
#define EGRESS_ENV_NAME_MAX        128   /* one environment variable name */
#define EGRESS_ENV_VALUE_MAX       32768 /* one environment value copied to a worker */
#define EGRESS_ENV_FILE_MAX        (8 * 1024 * 1024) /* an --env-file, comments included */
#define EGRESS_CGROUP_FILE_MAX     65536 /* a cgroup control file read (cgroup.procs) */
#define EGRESS_OBJECTIVE_MAX       (256 * 1024)
#define EGRESS_DIFF_DEFAULT_MAX    (8 * 1024 * 1024)
#define EGRESS_DIFF_FILE_MAX       (512ULL << 20) /* largest changed file a candidate diff
                                                   * carries (read whole into memory and
                                                   * deflated); larger: diff_too_large */
#define EGRESS_DIFF_RATIO_MAX      64   /* ... and at most this many times diff_bytes */
#define EGRESS_OUTPUT_DEFAULT_MAX  (1024 * 1024)
#define EGRESS_DECISIONS_ARTIFACT_MAX (16 * 1024 * 1024) /* decisions.jsonl copied into a run's output */
#define EGRESS_COLLECT_FILE_MAX    (2ULL << 30)     /* largest file the collector may write
                                                     * (RLIMIT_FSIZE; diff_bytes is at most 1 GiB) */
#define EGRESS_COLLECT_WALL_MS     (10 * 60 * 1000) /* egress-exec's collector: changed set, diff,
                                            manifest of one run; killed after this */

/* egress-exec: the tmpfs holding the worker's writes to .git (git add/commit inside; dropped
 * with the sandbox), at most this or the run's disk budget, whichever is smaller. */
#define EGRESS_GIT_LAYER_MAX       (256ULL * 1024 * 1024)

#endif
