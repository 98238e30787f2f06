/*
 * The parsers' configurations: every default, one setter per option, each
 * validated where it is set (so a parser's init has nothing left to
 * refuse but its buffer); and the size-first statistics copy.
 */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "framing/internal.h"
#include "framing/mem.h"

#if UINTPTR_MAX == UINT64_MAX
/* The sizes of the structs a caller embeds are the ABI's, fixed for 1.x
 * (tests/unit/abi_sizes_test.c prints them). */
_Static_assert(sizeof(sg_sse_config) == 96, "sg_sse_config is 96 bytes on LP64");
_Static_assert(sizeof(sg_ndjson_config) == 48, "sg_ndjson_config is 48 bytes on LP64");
_Static_assert(sizeof(sg_es_config) == 56, "sg_es_config is 56 bytes on LP64");
_Static_assert(sizeof(sg_sse_parser) == 344, "sg_sse_parser is 344 bytes on LP64");
_Static_assert(sizeof(sg_ndjson_parser) == 144, "sg_ndjson_parser is 144 bytes on LP64");
_Static_assert(sizeof(sg_es_decoder) == 176, "sg_es_decoder is 176 bytes on LP64");
#endif

/* A line limit: 0 (the default), or SG_FRAMING_MIN_LINE .. MAX_LIMIT. */
static int check_line(size_t n) {
    return n == 0 || (n >= SG_FRAMING_MIN_LINE && n <= SG_FRAMING_MAX_LIMIT) ? 0
                                                                             : SG_ERANGE;
}

/* Stores @n in *@field (in @cfg) when it is a line limit check_line takes. */
static int set_line(const void *cfg, size_t *field, size_t n) {
    if (cfg == NULL) {
        return SG_EINVAL;
    }
    int rc = check_line(n);
    if (rc == 0) {
        *field = n;
    }
    return rc;
}

/* Stores @n in *@field (in @cfg): an event limit, 0 (the default) ..
 * SG_FRAMING_MAX_LIMIT. */
static int set_event(const void *cfg, size_t *field, size_t n) {
    if (cfg == NULL) {
        return SG_EINVAL;
    }
    if (n > SG_FRAMING_MAX_LIMIT) {
        return SG_ERANGE;
    }
    *field = n;
    return 0;
}

/* A sentinel: NULL (none) or a non-empty string (an empty one would match
 * every "data:" event, or no type). */
static int check_sentinel(const char *s) {
    return s == NULL || s[0] != '\0' ? 0 : SG_EINVAL;
}

/* ------------------------------------------------------------------ SSE */

void sg_sse_config_init(sg_sse_config *cfg) {
    if (cfg != NULL) {
        memset(cfg, 0, sizeof(*cfg));
    }
}

int sg_sse_config_set_max_line(sg_sse_config *cfg, size_t n) {
    return set_line(cfg, cfg != NULL ? &cfg->max_line_ : NULL, n);
}

int sg_sse_config_set_max_event(sg_sse_config *cfg, size_t n) {
    return set_event(cfg, cfg != NULL ? &cfg->max_event_ : NULL, n);
}

int sg_sse_config_set_terminal_data(sg_sse_config *cfg, const char *data) {
    if (cfg == NULL || check_sentinel(data) != 0) {
        return SG_EINVAL;
    }
    cfg->terminal_data_ = data;
    return 0;
}

int sg_sse_config_set_terminal_type(sg_sse_config *cfg, const char *type) {
    if (cfg == NULL || check_sentinel(type) != 0) {
        return SG_EINVAL;
    }
    cfg->terminal_type_ = type;
    return 0;
}

int sg_sse_config_set_on_event(sg_sse_config *cfg, sg_sse_event_cb fn) {
    SG__SET(cfg, on_event_, fn);
}

int sg_sse_config_set_on_comment(sg_sse_config *cfg, sg_sse_comment_cb fn) {
    SG__SET(cfg, on_comment_, fn);
}

int sg_sse_config_set_on_retry(sg_sse_config *cfg, sg_sse_retry_cb fn) {
    SG__SET(cfg, on_retry_, fn);
}

int sg_sse_config_set_on_other(sg_sse_config *cfg, sg_sse_other_cb fn) {
    SG__SET(cfg, on_other_, fn);
}

/* ------------------------------------------------------------------ NDJSON */

void sg_ndjson_config_init(sg_ndjson_config *cfg) {
    if (cfg != NULL) {
        memset(cfg, 0, sizeof(*cfg));
    }
}

int sg_ndjson_config_set_max_line(sg_ndjson_config *cfg, size_t n) {
    return set_line(cfg, cfg != NULL ? &cfg->max_line_ : NULL, n);
}

int sg_ndjson_config_set_on_item(sg_ndjson_config *cfg, sg_ndjson_item_cb fn) {
    SG__SET(cfg, on_item_, fn);
}

/* ------------------------------------------------------------------ event stream */

void sg_es_config_init(sg_es_config *cfg) {
    if (cfg != NULL) {
        memset(cfg, 0, sizeof(*cfg));
    }
}

int sg_es_config_set_max_message(sg_es_config *cfg, size_t n) {
    if (cfg == NULL) {
        return SG_EINVAL;
    }
    if (n != 0 && (n < SG_ES_MIN_MESSAGE || n > SG_ES_MAX_MESSAGE)) {
        return SG_ERANGE;
    }
    cfg->max_message_ = n;
    return 0;
}

int sg_es_config_set_max_headers(sg_es_config *cfg, size_t n) {
    if (cfg == NULL) {
        return SG_EINVAL;
    }
    if (n > SG_ES_MAX_HEADERS) {
        return SG_ERANGE;
    }
    cfg->max_headers_ = n;
    return 0;
}

int sg_es_config_set_on_message(sg_es_config *cfg, sg_es_message_cb fn) {
    SG__SET(cfg, on_message_, fn);
}

/* ------------------------------------------------------------------ sg_stream */

#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(sg_stream_config) == 104, "sg_stream_config is 104 bytes on LP64");
_Static_assert(sizeof(sg_stream) == 1048, "sg_stream is 1048 bytes on LP64");
#endif

void sg_stream_config_init(sg_stream_config *cfg) {
    if (cfg != NULL) {
        memset(cfg, 0, sizeof(*cfg));
    }
}

int sg_stream_config_set_format(sg_stream_config *cfg, sg_format format) {
    if (cfg == NULL || (format != SG_FORMAT_SSE && format != SG_FORMAT_NDJSON &&
                        format != SG_FORMAT_EVENTSTREAM)) {
        return SG_EINVAL;
    }
    cfg->format_ = format;
    return 0;
}

sg_format sg_stream_config_format(const sg_stream_config *cfg) {
    return cfg != NULL ? cfg->format_ : SG_FORMAT_SSE;
}

int sg_stream_config_set_terminal_data(sg_stream_config *cfg, const char *data) {
    if (cfg == NULL || check_sentinel(data) != 0) {
        return SG_EINVAL;
    }
    cfg->terminal_data_ = data;
    return 0;
}

int sg_stream_config_set_terminal_type(sg_stream_config *cfg, const char *type) {
    if (cfg == NULL || check_sentinel(type) != 0) {
        return SG_EINVAL;
    }
    cfg->terminal_type_ = type;
    return 0;
}

int sg_stream_config_set_max_line(sg_stream_config *cfg, size_t n) {
    return set_line(cfg, cfg != NULL ? &cfg->max_line_ : NULL, n);
}

int sg_stream_config_set_max_event(sg_stream_config *cfg, size_t n) {
    return set_event(cfg, cfg != NULL ? &cfg->max_event_ : NULL, n);
}

int sg_stream_config_set_skip_types(sg_stream_config *cfg, const char *const *types) {
    SG__SET(cfg, skip_types_, types);
}

int sg_stream_config_set_classifier(sg_stream_config *cfg, sg_classify_cb fn,
                                    void *user_data) {
    if (cfg == NULL) {
        return SG_EINVAL;
    }
    cfg->classify_ = fn;
    cfg->classify_data_ = fn != NULL ? user_data : NULL;
    cfg->usage_classify_ = NULL; /* the caller's: it reads no usage */
    return 0;
}

int sg_stream_config_set_meta_at_once(sg_stream_config *cfg, bool on) {
    SG__SET(cfg, meta_at_once_, on);
}

int sg_stream_config_set_end_required(sg_stream_config *cfg, bool on) {
    SG__SET(cfg, end_required_, on);
}

int sg_stream_config_set_end_at_eof(sg_stream_config *cfg, bool on) {
    SG__SET(cfg, end_at_eof_, on);
}

int sg_stream_config_set_other_json(sg_stream_config *cfg, bool on) {
    SG__SET(cfg, other_json_, on);
}

/* ------------------------------------------------------------------ copies */

/* Appends @s (NUL included) at *@at, returns where it went. */
static const char *put_str(char **at, const char *s) {
    size_t n = strlen(s) + 1;
    memcpy(*at, s, n);
    const char *p = *at;
    *at += n;
    return p;
}

int sg__stream_config_copy(sg_stream_config *dst, const sg_stream_config *src,
                           void **block) {
    static const sg_stream_config defaults;
    *block = NULL;
    *dst = src != NULL ? *src : defaults;
    /* one block: the skip_types array (pointers, aligned first), then
     * every string */
    size_t ntypes = 0;
    size_t bytes = 0;
    const char *const *types = dst->skip_types_;
    for (; types != NULL && types[ntypes] != NULL; ntypes++) {
        bytes += strlen(types[ntypes]) + 1;
    }
    bytes += dst->terminal_data_ != NULL ? strlen(dst->terminal_data_) + 1 : 0;
    bytes += dst->terminal_type_ != NULL ? strlen(dst->terminal_type_) + 1 : 0;
    if (bytes == 0 && types == NULL) {
        return 0;
    }
    size_t head = types != NULL ? (ntypes + 1) * sizeof(char *) : 0;
    char *b = malloc(head + bytes);
    if (b == NULL) {
        *dst = defaults;
        return SG_ENOMEM;
    }
    char *at = b + head;
    if (types != NULL) {
        const char **v = (const char **)(void *)b;
        for (size_t i = 0; i < ntypes; i++) {
            v[i] = put_str(&at, types[i]);
        }
        v[ntypes] = NULL;
        dst->skip_types_ = v;
    }
    if (dst->terminal_data_ != NULL) {
        dst->terminal_data_ = put_str(&at, dst->terminal_data_);
    }
    if (dst->terminal_type_ != NULL) {
        dst->terminal_type_ = put_str(&at, dst->terminal_type_);
    }
    *block = b;
    return 0;
}

/* ------------------------------------------------------------------ readers */

bool sg_stream_config_skips(const sg_stream_config *cfg, const char *type, size_t len) {
    const char *const *t = cfg != NULL ? cfg->skip_types_ : NULL;
    for (; t != NULL && *t != NULL; t++) {
        if (strlen(*t) == len && (len == 0 || memcmp(*t, type, len) == 0)) {
            return true;
        }
    }
    return false;
}

bool sg_stream_config_other_json(const sg_stream_config *cfg) {
    return cfg != NULL && cfg->other_json_ && cfg->format_ == SG_FORMAT_SSE;
}

sg_item_kind sg_stream_config_classify(const sg_stream_config *cfg, const sg_item *item,
                                       sg_item_error *err) {
    sg_item_error scratch;
    sg_item_error *e = err != NULL ? err : &scratch;
    memset(e, 0, sizeof(*e));
    if (cfg == NULL || cfg->classify_ == NULL || item == NULL) {
        return SG_ITEM_TOKEN;
    }
    return cfg->classify_(item, e, cfg->classify_data_);
}
