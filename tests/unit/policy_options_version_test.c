/*
 * Options versions: every sg_op_options setter gives its object a version
 * no object of the process had before, so a transport that keeps one
 * frozen copy of the options for the operations it makes from one version
 * (the HTTP/2 connection, per request copy) never hands an operation the
 * options as they were before a setter changed them.  The setters are not
 * listed by hand only: every function the public headers declare that
 * takes a writable sg_op_options (sg_op_options_free aside) must be in the
 * table below, so a setter added later without it fails here.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/health.h>
#include <streamguard/op.h>
#include <streamguard/policy.h>
#include <streamguard/retry.h>
#include <streamguard/unstable/op.h>

#include "../sg_auto.h"

#include "policy/internal.h"

#ifndef SG_INCLUDE_DIR
#    error "SG_INCLUDE_DIR: the public headers' directory (tests/CMakeLists.txt)"
#endif

static uint64_t four(void *ud) {
    (void)ud;
    return 4;
}

static int on_intent(const sg_op *op, const sg_op_intent *in, void *ud) {
    (void)op;
    (void)in;
    (void)ud;
    return 0;
}

static const sg_op_observer *observer(void) {
    static sg_op_observer *obs;
    if (obs == NULL) {
        assert_int_equal(sg_op_observer_new(&obs), 0);
        assert_int_equal(sg_op_observer_set_on_intent(obs, on_intent), 0);
    }
    return obs;
}

/* Each setter, called with arguments it accepts. */
typedef struct setter {
    const char *name;
    int (*call)(sg_op_options *o);
} setter;

static sg_retry_budget *budget;
static sg_health *health;

#define S(fn, ...)                                 \
    static int call_##fn(sg_op_options *o) {       \
        return sg_op_options_##fn(o, __VA_ARGS__); \
    }
#define S0(fn)                               \
    static int call_##fn(sg_op_options *o) { \
        return sg_op_options_##fn(o);        \
    }
static const char *const urls[] = {"https://a.example/v1", "https://b.example/v1"};
static const int statuses[] = {429, 503};
S(set_budget, SG_SEC(5))
S(set_deadline, SG_SEC(9))
S(set_started_at, SG_SEC(1))
S(set_probe, SG_SEC(1), SG_MS(3), false, "probe")
S(set_floor, SG_MS(10))
S(set_connect_timeout, SG_SEC(1))
S(set_attempt_timeout, SG_SEC(2))
S(set_first_item_timeout, SG_SEC(1))
S(set_idle_timeout, SG_SEC(1))
S(set_stream_timeout, SG_SEC(3))
S(set_max_items, 10)
S(set_max_bytes, 100)
S(set_max_attempts, 3)
S(set_backoff, SG_MS(10), SG_MS(100))
S(set_max_retry_after, SG_SEC(1))
S(set_min_attempt, SG_MS(5))
S(set_retryable_statuses, statuses, 2)
S(set_retry_rejections, true)
S(set_method, "PUT")
S(set_idempotency_key, "key-1")
S(set_idempotent, true)
S(set_random, four, NULL)
S(set_seed, 7)
S(set_deadline_header, "X-Budget-Ms")
S(set_target, "https://a.example/v1")
S(set_endpoints, urls, 2)
S(set_hedging, SG_MS(100), 1)
S(set_retry_budget, budget)
S(set_observer, observer(), NULL)
S(add_observer, observer(), NULL)
S0(clear_observers)
S(set_label, "label")
S(set_health, health)
S(set_token_estimate, 100, 10)
S(set_hedge_auto, true)
S(set_hedge_quantile, 0.9)
S(set_hedge_floor, SG_MS(1))
S(set_endpoint_order, SG_ENDPOINT_ORDER_FIRST_TOKEN)
S(set_price, 0, 1.0, 2.0, 0.5)

#define ROW(fn) \
    { "sg_op_options_" #fn, call_##fn }
static const setter setters[] = {
    ROW(set_budget),
    ROW(set_deadline),
    ROW(set_started_at),
    ROW(set_probe),
    ROW(set_floor),
    ROW(set_connect_timeout),
    ROW(set_attempt_timeout),
    ROW(set_first_item_timeout),
    ROW(set_idle_timeout),
    ROW(set_stream_timeout),
    ROW(set_max_items),
    ROW(set_max_bytes),
    ROW(set_max_attempts),
    ROW(set_backoff),
    ROW(set_max_retry_after),
    ROW(set_min_attempt),
    ROW(set_retryable_statuses),
    ROW(set_retry_rejections),
    ROW(set_method),
    ROW(set_idempotency_key),
    ROW(set_idempotent),
    ROW(set_random),
    ROW(set_seed),
    ROW(set_deadline_header),
    ROW(set_target),
    ROW(set_endpoints),
    ROW(set_hedging),
    ROW(set_retry_budget),
    ROW(set_observer),
    ROW(add_observer),
    ROW(clear_observers),
    ROW(set_label),
    ROW(set_health),
    ROW(set_token_estimate),
    ROW(set_hedge_auto),
    ROW(set_hedge_quantile),
    ROW(set_hedge_floor),
    ROW(set_endpoint_order),
    ROW(set_price),
};
#define NSETTERS (sizeof(setters) / sizeof(setters[0]))

static const setter *find(const char *name) {
    for (size_t i = 0; i < NSETTERS; i++) {
        if (strcmp(setters[i].name, name) == 0) {
            return &setters[i];
        }
    }
    return NULL;
}

/* The names of the functions @text declares whose first parameter is a
 * writable sg_op_options (a single pointer, not const), each once. */
static size_t declared_setters(const char *text, char names[][64], size_t n, size_t max) {
    for (const char *p = text; (p = strstr(p, "sg_op_options_")) != NULL; p++) {
        if (p > text && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z'))) {
            continue; /* inside another name */
        }
        size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz_0123456789");
        const char *q = p + len;
        q += strspn(q, " \n\t");
        if (*q != '(') {
            continue;
        }
        q++;
        q += strspn(q, " \n\t");
        static const char param[] = "sg_op_options *";
        if (strncmp(q, param, sizeof(param) - 1) != 0 || q[sizeof(param) - 1] == '*') {
            continue; /* const, a pointer to a pointer (new, dup), or none */
        }
        char name[64];
        assert_true(len < sizeof(name));
        memcpy(name, p, len);
        name[len] = '\0';
        if (strcmp(name, "sg_op_options_free") == 0) {
            continue;
        }
        bool seen = false;
        for (size_t i = 0; i < n; i++) {
            seen = seen || strcmp(names[i], name) == 0;
        }
        if (!seen) {
            assert_true(n < max);
            memcpy(names[n++], name, len + 1);
        }
    }
    return n;
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    assert_true(size >= 0);
    rewind(f);
    char *text = malloc((size_t)size + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)size, f), (size_t)size);
    text[size] = '\0';
    fclose(f);
    return text;
}

/* Every header of @dir (and its subdirectories one deep). */
static size_t scan_dir(const char *dir, char names[][64], size_t n, size_t max,
                       int depth) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') {
            continue;
        }
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        size_t l = strlen(e->d_name);
        if (l > 2 && strcmp(e->d_name + l - 2, ".h") == 0) {
            char *text = read_all(path);
            n = declared_setters(text, names, n, max);
            free(text);
        } else if (depth == 0 && strchr(e->d_name, '.') == NULL) {
            n = scan_dir(path, names, n, max, depth + 1);
        }
    }
    closedir(d);
    return n;
}

static void every_declared_setter_is_in_the_table(void **state) {
    (void)state;
    char names[128][64];
    size_t n = scan_dir(SG_INCLUDE_DIR "/streamguard", names, 0, 128, 0);
    print_message("%zu setters declared, %zu in the table\n", n, NSETTERS);
    for (size_t i = 0; i < n; i++) {
        if (find(names[i]) == NULL) {
            fail_msg("%s is declared but not in this test's table: add it, and "
                     "make it call sg__opt_touch first",
                     names[i]);
        }
    }
    assert_int_equal(n, NSETTERS); /* and nothing in the table is gone */
}

static void every_setter_makes_a_new_version(void **state) {
    (void)state;
    assert_int_equal(sg_retry_budget_new(&budget, 10, 0.1), 0);
    assert_int_equal(sg_health_new(&health), 0);
    SG_AUTO_OPTIONS(o);
    SG_AUTO_OPTIONS(other);
    uint64_t last = sg__op_options_version(o);
    assert_true(last != 0);
    assert_true(sg__op_options_version(other) != last);
    for (size_t i = 0; i < NSETTERS; i++) {
        int rv = setters[i].call(o);
        if (rv != 0) {
            fail_msg("%s failed: %s", setters[i].name, sg_errname(rv));
        }
        uint64_t v = sg__op_options_version(o);
        if (v == last) {
            fail_msg("%s left the version as it was", setters[i].name);
        }
        last = v;
        /* the same value again is a new version too: a setter never
         * looks at what it replaces */
        assert_int_equal(setters[i].call(o), 0);
        assert_true(sg__op_options_version(o) != last);
        last = sg__op_options_version(o);
    }
    /* a copy has a version of its own, and changes alone */
    sg_op_options *copy = NULL;
    assert_int_equal(sg_op_options_dup(&copy, o), 0);
    assert_true(sg__op_options_version(copy) != sg__op_options_version(o));
    sg_op_options_free(copy);
    sg_retry_budget_free(budget);
    sg_health_free(health);
}

static void a_frozen_copy_is_shared_and_refuses_every_setter(void **state) {
    (void)state;
    assert_int_equal(sg_retry_budget_new(&budget, 10, 0.1), 0);
    assert_int_equal(sg_health_new(&health), 0);
    SG_AUTO_OPTIONS(o);
    assert_int_equal(sg_op_options_set_budget(o, SG_SEC(3)), 0);
    const sg_op_options *f = sg__op_options_hold(o);
    assert_non_null(f);
    assert_true(f != o);
    assert_true(sg__op_options_frozen(f));
    assert_false(sg__op_options_frozen(o));
    assert_true(sg__op_options_hold(f) == f); /* held again, not copied */
    const uint64_t v = sg__op_options_version(f);
    for (size_t i = 0; i < NSETTERS; i++) {
        /* (the library never gives a caller a writable frozen copy; this
         * is the guard behind that) */
        sg_op_options *w = (sg_op_options *)(uintptr_t)f;
        assert_int_equal(setters[i].call(w), SG_EINVAL);
        assert_true(sg__op_options_version(f) == v);
    }
    /* two operations started from it share it */
    SG_AUTO_OP(a);
    SG_AUTO_OP(b);
    assert_int_equal(sg_op_start(a, f, SG_SEC(100)), 0);
    assert_int_equal(sg_op_start(b, f, SG_SEC(100)), 0);
    assert_true(sg__op_options_of(a) == f && sg__op_options_of(b) == f);
    assert_int_equal(sg_budget_remaining(sg_op_budget(a), SG_SEC(100)), SG_SEC(3));
    sg__op_options_unhold(f);
    sg__op_options_unhold(f); /* the operations' holds keep it */
    assert_int_equal(sg_budget_remaining(sg_op_budget(b), SG_SEC(100)), SG_SEC(3));
    /* started from a plain object: a copy of its own */
    SG_AUTO_OP(c);
    assert_int_equal(sg_op_start(c, o, SG_SEC(100)), 0);
    assert_true(sg__op_options_of(c) != o && sg__op_options_frozen(sg__op_options_of(c)));
    sg_retry_budget_free(budget);
    sg_health_free(health);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_declared_setter_is_in_the_table),
        cmocka_unit_test(every_setter_makes_a_new_version),
        cmocka_unit_test(a_frozen_copy_is_shared_and_refuses_every_setter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
