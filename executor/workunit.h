/*
 * workunit - the WorkUnit file: the task and the authority it requests.
 *
 * Owns: struct workunit and every string in it (workunit_free, which accepts NULL); also
 * struct strlist and struct ceilings, shared with executor/preset.
 * Callers: executor/admission (decides), executor/orchestrate and cmd_check (load).
 *
 * The loader only parses: it records what the file says (presence, values, lines) and
 * leaves every policy decision to admission, so each refusal gets its own reason code.
 * It does refuse, at load time, what must never be read at all: unknown sections or keys
 * (REASON_ADM_INVALID_FILE with file:line), task text under another name (prompt, goal,
 * title: REASON_ADM_INVALID_FILE) and any attempt to name what runs (executable, argv,
 * shell, command ...: REASON_ADM_EXECUTABLE). Layout: docs/workunit.md.
 */
#ifndef EGRESS_WORKUNIT_H
#define EGRESS_WORKUNIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/conf.h"
#include "common/reasons.h"

/* A list of strings from a repeated key. Empty values are dropped: `key =` declares the
 * list present and empty. */
struct strlist {
	char **v;          /* NULL-terminated when non-NULL */
	size_t n;
	bool present;
	unsigned line;     /* first occurrence, 0 when absent */
};
void strlist_free(struct strlist *l);
/* Copy the list key of section sec into *l. Returns 0, or -1 on allocation failure. */
int strlist_from_conf(const struct conf *c, size_t sec, const char *key, struct strlist *l);
/* Same set of strings (order and duplicates ignored). */
bool strlist_set_equal(const struct strlist *a, const struct strlist *b);

/* The resource ceilings a WorkUnit requests and a preset allows. */
enum ceiling_id {
	CEIL_WALL_SECONDS,
	CEIL_CPU_MILLICORES,
	CEIL_MEMORY_BYTES,
	CEIL_DISK_BYTES,
	CEIL_PROCESSES,
	CEIL_OUTPUT_BYTES,
	CEIL_DIFF_BYTES,      /* optional: EGRESS_DIFF_DEFAULT_MAX when absent in both files */
	CEIL__COUNT
};

enum ceiling_state { CEIL_ABSENT = 0, CEIL_OK, CEIL_INVALID /* unparsable, zero or too big */ };

struct ceilings {
	uint64_t value[CEIL__COUNT];
	enum ceiling_state state[CEIL__COUNT];
	unsigned line[CEIL__COUNT];
};

/* Key name of a ceiling ("memory_bytes"). */
const char *ceiling_key(enum ceiling_id id);
/* True when the ceiling must be given by both files (all but diff_bytes). */
bool ceiling_required(enum ceiling_id id);
/* Parse the ceiling keys of section sec (absent keys stay CEIL_ABSENT). Never fails:
 * a bad value is recorded as CEIL_INVALID for admission to refuse with budget_invalid. */
void ceilings_from_conf(const struct conf *c, size_t sec, struct ceilings *out);
/* Schema entries for the ceiling keys in section `section` (for the loaders). */
size_t ceilings_schema(const char *section, struct conf_key *out, size_t max);

enum wu_network { WU_NET_ABSENT = 0, WU_NET_NONE, WU_NET_ALLOWLIST, WU_NET_UNRESTRICTED };

/* A yes/no field: absent, true, or anything else (false or unparsable). */
/* A [security]/[permissions] flag: exactly `true` or `false` (docs/workunit.md); yes, 1,
 * on and the other spellings common/conf accepts for booleans are WU_FLAG_INVALID, so a
 * WorkUnit means one thing whoever reads it. */
enum wu_flag { WU_FLAG_ABSENT = 0, WU_FLAG_TRUE, WU_FLAG_NOT_TRUE, WU_FLAG_INVALID };

struct workunit {
	char *file;                     /* the file name given to the loader */
	char *id;                       /* [A-Za-z0-9._-]{1,64} */
	char *objective;                /* canonical task text (NUL-free, <= EGRESS_OBJECTIVE_MAX) */

	enum wu_flag sandbox_required;  /* [security] sandbox_required */
	unsigned sandbox_required_line;
	enum wu_flag process_execution; /* [permissions] process_execution */
	unsigned process_execution_line;
	struct strlist secrets;         /* [permissions] secrets: must be present and empty */
	enum wu_network network;        /* [permissions] network */
	unsigned network_line;
	struct strlist destinations;    /* [permissions] destinations: grant entries */
	struct strlist filesystem_write;/* [permissions] filesystem_write */

	struct ceilings budget;         /* [budget] */

	struct strlist allowed_paths;   /* [constraints] allowed_paths */
	struct strlist forbidden_paths; /* [constraints] forbidden_paths (must be present) */
};

/*
 * Load a WorkUnit file. `objective_file` is resolved relative to the WorkUnit's directory
 * and must be a canonical repository-style path. Returns NULL with *why and err
 * ("file:line: ...") on refusal; the caller frees the result with workunit_free.
 */
struct workunit *workunit_load(const char *path, enum reason *why, char *err, size_t errlen);
/* Same from memory; `objective_file` is read relative to base_dir, or refused when
 * base_dir is NULL (fuzzing, tests). */
struct workunit *workunit_load_string(const char *name, const char *text, size_t len,
    const char *base_dir, enum reason *why, char *err, size_t errlen);
void workunit_free(struct workunit *wu);

const char *wu_network_str(enum wu_network n);

#endif
