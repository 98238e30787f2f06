/*
 * The execution report: valid JSON whatever the bytes, every documented
 * field, buffer sizing, FILE output.  A tiny strict JSON checker (RFC 8259,
 * UTF-8 validated) parses every document the tests produce.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/http.h>
#include <streamguard/op.h>
#include <streamguard/policy.h>
#include <streamguard/unstable/op.h>

#include "../sg_auto.h"

#include "policy/internal.h"
#include "sgx/json.h"

#define T0 SG_SEC(1000)
#define WALL INT64_C(1795964400)

/* ------------------------------------------------------------------ checker */

typedef struct jp {
    const unsigned char *p;
    const unsigned char *end;
    int depth;
} jp;

static bool j_value(jp *j);

static void j_ws(jp *j) {
    while (j->p < j->end &&
           (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) {
        j->p++;
    }
}

static bool j_lit(jp *j, const char *lit) {
    size_t n = strlen(lit);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n) != 0) {
        return false;
    }
    j->p += n;
    return true;
}

static bool j_hex4(jp *j, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        if (j->p >= j->end) {
            return false;
        }
        unsigned char c = *j->p++;
        v <<= 4;
        if (c >= '0' && c <= '9') {
            v |= (unsigned)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            v |= (unsigned)(c - 'a' + 10);
        } else if (c >= 'A' && c <= 'F') {
            v |= (unsigned)(c - 'A' + 10);
        } else {
            return false;
        }
    }
    *out = v;
    return true;
}

static bool j_string(jp *j) {
    if (j->p >= j->end || *j->p != '"') {
        return false;
    }
    j->p++;
    while (j->p < j->end) {
        unsigned char c = *j->p;
        if (c == '"') {
            j->p++;
            return true;
        }
        if (c < 0x20) {
            return false; /* raw control characters are not allowed */
        }
        if (c == '\\') {
            j->p++;
            if (j->p >= j->end) {
                return false;
            }
            c = *j->p++;
            if (c == 'u') {
                unsigned u = 0;
                if (!j_hex4(j, &u)) {
                    return false;
                }
                if (u >= 0xD800 && u <= 0xDFFF) {
                    return false; /* the writer never needs surrogates */
                }
            } else if (strchr("\"\\/bfnrt", c) == NULL) {
                return false;
            }
            continue;
        }
        if (c < 0x80) {
            j->p++;
            continue;
        }
        /* Strict UTF-8. */
        size_t len = 0;
        unsigned char lo = 0x80;
        unsigned char hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            lo = c == 0xE0 ? 0xA0 : 0x80;
            hi = c == 0xED ? 0x9F : 0xBF;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            lo = c == 0xF0 ? 0x90 : 0x80;
            hi = c == 0xF4 ? 0x8F : 0xBF;
        } else {
            return false;
        }
        if ((size_t)(j->end - j->p) < len || j->p[1] < lo || j->p[1] > hi) {
            return false;
        }
        for (size_t i = 2; i < len; i++) {
            if (j->p[i] < 0x80 || j->p[i] > 0xBF) {
                return false;
            }
        }
        j->p += len;
    }
    return false;
}

static bool j_number(jp *j) {
    const unsigned char *s = j->p;
    if (j->p < j->end && *j->p == '-') {
        j->p++;
    }
    if (j->p >= j->end || *j->p < '0' || *j->p > '9') {
        return false;
    }
    if (*j->p == '0') {
        j->p++;
    } else {
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
            j->p++;
        }
    }
    return j->p > s;
}

static bool j_value(jp *j) {
    if (++j->depth > 32) {
        return false;
    }
    j_ws(j);
    bool ok = false;
    if (j->p >= j->end) {
        ok = false;
    } else if (*j->p == '{') {
        j->p++;
        j_ws(j);
        if (j->p < j->end && *j->p == '}') {
            j->p++;
            ok = true;
        } else {
            for (;;) {
                j_ws(j);
                if (!j_string(j)) {
                    break;
                }
                j_ws(j);
                if (!j_lit(j, ":") || !j_value(j)) {
                    break;
                }
                j_ws(j);
                if (j_lit(j, ",")) {
                    continue;
                }
                ok = j_lit(j, "}");
                break;
            }
        }
    } else if (*j->p == '[') {
        j->p++;
        j_ws(j);
        if (j->p < j->end && *j->p == ']') {
            j->p++;
            ok = true;
        } else {
            for (;;) {
                if (!j_value(j)) {
                    break;
                }
                j_ws(j);
                if (j_lit(j, ",")) {
                    continue;
                }
                ok = j_lit(j, "]");
                break;
            }
        }
    } else if (*j->p == '"') {
        ok = j_string(j);
    } else if (j_lit(j, "true") || j_lit(j, "false") || j_lit(j, "null")) {
        ok = true;
    } else {
        ok = j_number(j);
    }
    j->depth--;
    return ok;
}

static bool json_valid(const char *s, size_t n) {
    jp j = {(const unsigned char *)s, (const unsigned char *)s + n, 0};
    if (!j_value(&j)) {
        return false;
    }
    j_ws(&j);
    return j.p == j.end;
}

static bool json_valid_str(const char *s) {
    return json_valid(s, strlen(s));
}

static void checker_rejects_what_it_should(void **state) {
    (void)state;
    assert_true(json_valid_str("{\"a\":[1,-2,true,null,\"x\\u00e9\"]}"));
    assert_false(json_valid_str("{\"a\":1,}"));
    assert_false(json_valid_str("\"\x01\""));
    assert_false(json_valid_str("\"\xff\""));
    assert_false(json_valid_str("\"\\x\""));
    assert_false(json_valid_str("{} x"));
    assert_false(json_valid_str("[1 2]"));
}

/* ------------------------------------------------------------------ helpers */

static char report[16384];

static const char *write_report(const sg_op *op, int64_t now) {
    size_t needed = 0;
    int rc = sg_op_report_write(op, now, report, sizeof(report), &needed);
    assert_int_equal(rc, 0);
    assert_int_equal(needed, strlen(report) + 1);
    if (!json_valid(report, strlen(report))) {
        fail_msg("invalid JSON: %s", report);
    }
    return report;
}

static void has(const char *doc, const char *needle) {
    if (strstr(doc, needle) == NULL) {
        fail_msg("missing %s in %s", needle, doc);
    }
}

static void end(sg_op *op, int64_t now, sg_outcome oc, sg_phase ph, int status,
                const char *ra, size_t ra_len, uint64_t items) {
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.outcome = oc;
    r.phase = ph;
    r.sent = ph != SG_PHASE_CONNECT;
    r.headers_received = status != 0;
    r.http_status = status;
    r.retry_after = ra;
    r.retry_after_len = ra_len;
    r.wall_now_s = WALL;
    r.items = items;
    r.bytes = items * 40;
    r.first_item_ns = items > 0 ? SG_MS(350) : -1;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, now, &r, &v), 0);
}

/* A two-attempt operation: a 429 with Retry-After, then a clean stream. */
static void run_two_attempts(sg_op *op, sg_op_options *o) {
    assert_int_equal(sg_op_options_set_budget(o, SG_SEC(30)), 0);
    assert_int_equal(sg_op_options_set_floor(o, SG_MS(250)), 0);
    assert_int_equal(sg_op_options_set_connect_timeout(o, SG_SEC(3)), 0);
    assert_int_equal(sg_op_options_set_first_item_timeout(o, SG_SEC(10)), 0);
    assert_int_equal(sg_op_options_set_idle_timeout(o, SG_SEC(5)), 0);
    assert_int_equal(sg_op_options_set_idempotency_key(o, "secret-key-123"), 0);
    assert_int_equal(sg_op_options_set_seed(o, 7), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    end(op, T0 + SG_MS(120), SG_OUTCOME_HTTP_ERROR, SG_PHASE_WAIT_HEADERS, 429, "2", 1,
        0);
    assert_int_equal(sg_op_next_attempt(op, T0 + SG_MS(2120), &p), 0);
    end(op, T0 + SG_MS(6120), SG_OUTCOME_OK, SG_PHASE_STREAMING, 200, NULL, 0, 87);
}

/* ------------------------------------------------------------------ tests */

static void report_is_valid_json_with_every_documented_field(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    SG_AUTO_OPTIONS(o);
    run_two_attempts(op, o);
    const char *doc = write_report(op, T0 + SG_SEC(99));
    has(doc, "\"version\":1");
    has(doc, "\"finished\":true");
    has(doc, "\"outcome\":\"ok\"");
    has(doc, "\"phase\":\"streaming\"");
    has(doc, "\"decision\":\"done\"");
    has(doc, "\"reason\":\"ok\"");
    has(doc, "\"partial\":false,\"retryable\":false,\"outcome_unknown\":false");
    has(doc, "\"method\":\"POST\"");
    has(doc, "\"idempotency_key\":true");
    has(doc, "\"budget_ms\":30000");
    has(doc, "\"floor_ms\":250");
    /* Ended at +6120 ms: the report freezes there, not at @now. */
    has(doc, "\"elapsed_ms\":6120,\"remaining_ms\":23880");
    has(doc, "\"max_attempts\":3");
    has(doc, "\"n\":1,\"running\":false,\"outcome\":\"http_error\",\"phase\":\"wait_"
             "headers\"");
    has(doc, "\"http_status\":429");
    has(doc, "\"retryable\":true");
    has(doc, "\"granted_ms\":{\"connect\":3000,\"attempt\":29750,\"first_item\":10000,"
             "\"idle\":5000,\"stream_total\":null},\"lease_by\":\"budget\"");
    has(doc, "\"retry_after\":\"2\",\"retry_after_ms\":2000");
    has(doc, "\"decision\":\"retry\",\"reason\":\"retryable\",\"backoff_ms\":2000");
    has(doc, "\"n\":2");
    has(doc, "\"start_ms\":2120,\"remaining_ms\":27880");
    has(doc,
        "\"elapsed_ms\":4000,\"first_item_ms\":350,\"first_token_ms\":350,\"items\":87,"
        "\"bytes\":3480");
    has(doc, "\"backoff_ms\":null");
    /* driven by hand: no stream, no profile */
    has(doc, "\"usage\":null,\"profile\":null");
}

static void report_never_contains_the_idempotency_key(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    SG_AUTO_OPTIONS(o);
    run_two_attempts(op, o);
    const char *doc = write_report(op, T0);
    assert_null(strstr(doc, "secret-key-123"));
}

static void report_escapes_quotes_controls_and_invalid_utf8_in_the_label(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    assert_int_equal(
        sg_op_options_set_label(
            o, "q\"b\\n\n\t\x01\x1f\x7f \xc3\xa9 \xff \xc3 \xf0\x9f\x98\x80"),
        0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    const char *doc = write_report(op, T0);
    has(doc,
        "\"label\":\"q\\\"b\\\\n\\n\\t\\u0001\\u001f\\u007f \xc3\xa9 \\ufffd \\ufffd "
        "\xf0\x9f\x98\x80\"");
}

static void report_escapes_whatever_the_server_sent_as_retry_after(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    static const char evil[] =
        "\"},{\"x\":\x00\r\n\xc0\x80\xed\xa0\x80 and then far too long";
    end(op, T0 + SG_MS(5), SG_OUTCOME_HTTP_ERROR, SG_PHASE_WAIT_HEADERS, 503, evil,
        sizeof(evil) - 1, 0);
    const char *doc = write_report(op, T0);
    has(doc, "\"retry_after_ms\":null,\"retry_after_malformed\":true");
    /* The raw bytes are kept up to SG__OP_RETRY_AFTER_RAW_MAX, NUL and
     * invalid UTF-8 included, and escaped. */
    has(doc, "\"retry_after\":\"\\\"},{\\\"x\\\":\\u0000\\r\\n"
             "\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd and then far t\",");
    const sg_op_attempt *a = sg_op_attempt_at(op, 0);
    assert_true(a->retry_after_malformed);
}

static void
each_attempt_keeps_the_transports_own_error_bounded_and_escaped(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
    assert_int_equal(sg_op_options_set_seed(o, 3), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    char longer[400];
    memset(longer, 'x', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    memcpy(longer, "curl 7 \"quoted\"\n", 16);
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.outcome = SG_OUTCOME_TRANSPORT_ERROR;
    r.phase = SG_PHASE_CONNECT;
    r.error = longer;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, T0 + SG_MS(1), &r, &v), 0);
    const sg_op_attempt *a = sg_op_attempt_at(op, 0);
    assert_int_equal(strlen(a->error), SG_OP_ERROR_MAX);
    assert_int_equal(sg_op_next_attempt(op, v.retry_at, &p), 0);
    end(op, v.retry_at + SG_MS(5), SG_OUTCOME_OK, SG_PHASE_STREAMING, 200, NULL, 0, 3);
    const char *doc = write_report(op, v.retry_at + SG_MS(5));
    has(doc, "\"error\":\"curl 7 \\\"quoted\\\"\\nxx");
    has(doc,
        "\"error\":null,\"provider_error\":null,\"usage\":null,\"profile\":null}]"); /* the
                                                                       clean attempt has
                                                                       none */
}

static void every_byte_value_escapes_to_valid_json(void **state) {
    (void)state;
    char in[256];
    for (int i = 0; i < 256; i++) {
        in[i] = (char)i;
    }
    static char out[4096];
    sg__sink s = {out, sizeof(out), 0, NULL, false};
    sg__sink_json_string(&s, in, sizeof(in));
    assert_true(s.pos < sizeof(out));
    out[s.pos] = '\0';
    assert_true(json_valid(out, s.pos));
    /* Overlong, surrogate and beyond-U+10FFFF forms are replaced. */
    static const char *const bad[] = {
        "\xc0\x80",         "\xc1\xbf",         "\xe0\x80\x80", "\xed\xa0\x80",
        "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xe2\x82"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sg__sink t = {out, sizeof(out), 0, NULL, false};
        sg__sink_json_string(&t, bad[i], strlen(bad[i]));
        out[t.pos] = '\0';
        assert_true(json_valid(out, t.pos));
        assert_non_null(strstr(out, "\\ufffd"));
    }
    /* Valid sequences of every length pass through untouched. */
    static const char good[] = "a\xc2\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    sg__sink u = {out, sizeof(out), 0, NULL, false};
    sg__sink_json_string(&u, good, sizeof(good) - 1);
    out[u.pos] = '\0';
    assert_string_equal(out, "\"a\xc2\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
}

static void small_buffer_returns_the_needed_size(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    SG_AUTO_OPTIONS(o);
    run_two_attempts(op, o);
    size_t needed = 0;
    assert_int_equal(sg_op_report_write(op, T0, NULL, 0, &needed), SG_ENOBUFS);
    assert_true(needed > 100);
    char *buf = malloc(needed);
    assert_non_null(buf);
    size_t again = 0;
    assert_int_equal(sg_op_report_write(op, T0, buf, needed - 1, &again), SG_ENOBUFS);
    assert_int_equal(again, needed);
    assert_int_equal(strlen(buf), needed - 2); /* a NUL-terminated prefix */
    assert_int_equal(sg_op_report_write(op, T0, buf, needed, &again), 0);
    assert_int_equal(strlen(buf), needed - 1);
    assert_true(json_valid(buf, needed - 1));
    free(buf);
    assert_int_equal(sg_op_report_write(op, T0, NULL, 5, NULL), SG_EINVAL);
}

static void file_output_matches_the_buffer(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    SG_AUTO_OPTIONS(o);
    run_two_attempts(op, o);
    const char *doc = write_report(op, T0);
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(sg_op_report_fwrite(op, T0, f), 0);
    long n = ftell(f);
    assert_int_equal(n, (long)strlen(doc));
    rewind(f);
    char *back = calloc((size_t)n + 1, 1);
    assert_non_null(back);
    assert_int_equal(fread(back, 1, (size_t)n, f), (size_t)n);
    assert_string_equal(back, doc);
    free(back);
    fclose(f);
    assert_int_equal(sg_op_report_fwrite(op, T0, NULL), SG_EINVAL);
}

static void running_attempt_is_reported_with_null_outcome(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    const char *doc = write_report(op, T0 + SG_MS(1500));
    has(doc, "\"finished\":false,\"outcome\":null,\"phase\":null,\"decision\":\"none\"");
    has(doc, "\"n\":1,\"running\":true,\"outcome\":null,\"phase\":null");
    has(doc, "\"elapsed_ms\":1500,\"remaining_ms\":58500");
    has(doc, "\"granted_ms\":{\"connect\":null,\"attempt\":60000,\"first_item\":null,"
             "\"idle\":null,\"stream_total\":null},\"lease_by\":\"budget\",\"elapsed_"
             "ms\":null,\"first_item_ms\":"
             "null");
}

/* Each attempt names who set its lease: the caller's attempt timeout while
 * it is the tighter, then the budget once what remains is less. */
static void each_attempt_names_who_set_its_lease(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
    assert_int_equal(sg_op_options_set_budget(o, SG_SEC(10)), 0);
    assert_int_equal(sg_op_options_set_floor(o, 0), 0);
    assert_int_equal(sg_op_options_set_attempt_timeout(o, SG_SEC(6)), 0);
    assert_int_equal(sg_op_options_set_seed(o, 7), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    end(op, T0 + SG_SEC(5), SG_OUTCOME_TRANSPORT_ERROR, SG_PHASE_SEND, 0, NULL, 0, 0);
    assert_int_equal(sg_op_next_attempt(op, T0 + SG_MS(5200), &p), 0);
    const char *doc = write_report(op, T0 + SG_SEC(6));
    has(doc, "\"n\":1,");
    has(doc, "\"attempt\":6000,\"first_item\":null,\"idle\":null,\"stream_total\":"
             "null},\"lease_by\":\"attempt\"");
    has(doc, "\"attempt\":4800,\"first_item\":null,\"idle\":null,\"stream_total\":"
             "null},\"lease_by\":\"budget\"");
    assert_string_equal(sg_op_attempt_lease_by(op, 0), "attempt");
    assert_string_equal(sg_op_attempt_lease_by(op, 1), "budget");
}

/* Between attempts (sleeping before a retry) the operation has no outcome
 * of its own yet: the top level says the last attempt's, as with its phase,
 * never "ok". */
static void a_report_between_attempts_gives_the_last_attempts_outcome(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
    assert_int_equal(sg_op_options_set_seed(o, 7), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    end(op, T0 + SG_MS(20), SG_OUTCOME_TRANSPORT_ERROR, SG_PHASE_SEND, 0, NULL, 0, 0);
    assert_false(sg_op_finished(op));
    const char *doc = write_report(op, T0 + SG_MS(30));
    has(doc, "\"finished\":false,\"outcome\":\"transport_error\",\"phase\":\"send\"");
    /* and while the retry runs, the same */
    assert_int_equal(sg_op_next_attempt(op, T0 + SG_SEC(1), &p), 0);
    doc = write_report(op, T0 + SG_SEC(1) + SG_MS(5));
    has(doc, "\"finished\":false,\"outcome\":\"transport_error\",\"phase\":\"send\"");
}

static void refused_operation_reports_no_attempts(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    assert_int_equal(sg_op_options_set_budget(o, SG_MS(100)), 0);
    assert_int_equal(sg_op_options_set_floor(o, SG_MS(50)), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(op, T0 + SG_MS(60), &p), SG_EREFUSED);
    const char *doc = write_report(op, T0 + SG_SEC(5));
    has(doc, "\"outcome\":\"refused\",\"phase\":null,\"decision\":\"stop\","
             "\"reason\":\"budget_below_floor\"");
    has(doc, "\"elapsed_ms\":60,\"remaining_ms\":40");
    has(doc, "\"attempts\":[]}");
}

static void report_of_an_unstarted_op_is_invalid(void **state) {
    (void)state;
    SG_AUTO_OP(op);

    char buf[8];
    assert_int_equal(sg_op_report_write(op, T0, buf, sizeof(buf), NULL), SG_EINVAL);
    assert_int_equal(sg_op_report_write(NULL, T0, buf, sizeof(buf), NULL), SG_EINVAL);
}

static void json_string_writer_escapes_like_the_report(void **state) {
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    static const char in[] = "a\"b\\c\n\x01\xc3\xa9\xff";
    assert_int_equal(sgx_json_fwrite_string(f, in, sizeof(in) - 1), 0);
    assert_int_equal(sgx_json_fwrite_string(f, NULL, 0), 0);
    assert_int_equal(sgx_json_fwrite_string(NULL, "x", 1), SG_EINVAL);
    assert_int_equal(sgx_json_fwrite_string(f, NULL, 1), SG_EINVAL);
    rewind(f);
    char out[128] = {0};
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    fclose(f);
    out[n] = '\0';
    assert_string_equal(out, "\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\\ufffd\"\"\"");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(checker_rejects_what_it_should),
        cmocka_unit_test(report_is_valid_json_with_every_documented_field),
        cmocka_unit_test(report_never_contains_the_idempotency_key),
        cmocka_unit_test(report_escapes_quotes_controls_and_invalid_utf8_in_the_label),
        cmocka_unit_test(report_escapes_whatever_the_server_sent_as_retry_after),
        cmocka_unit_test(each_attempt_keeps_the_transports_own_error_bounded_and_escaped),
        cmocka_unit_test(every_byte_value_escapes_to_valid_json),
        cmocka_unit_test(small_buffer_returns_the_needed_size),
        cmocka_unit_test(file_output_matches_the_buffer),
        cmocka_unit_test(running_attempt_is_reported_with_null_outcome),
        cmocka_unit_test(each_attempt_names_who_set_its_lease),
        cmocka_unit_test(a_report_between_attempts_gives_the_last_attempts_outcome),
        cmocka_unit_test(refused_operation_reports_no_attempts),
        cmocka_unit_test(report_of_an_unstarted_op_is_invalid),
        cmocka_unit_test(json_string_writer_escapes_like_the_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
