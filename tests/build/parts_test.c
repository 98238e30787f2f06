/*
 * What a build without a part does (README, "Build options"): the calls
 * that reach a part the library was built without say SG_EUNSUPPORTED and
 * do nothing else; with the part they work.  Built in every build, so each
 * combination the test command configures checks its own side.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/streamguard.h>
#ifdef SG_HAVE_LEDGER
#    include <streamguard/ledger.h>
#endif

#ifdef SG_HAVE_EVENTSTREAM
#    define WITH_EVENTSTREAM 1
#else
#    define WITH_EVENTSTREAM 0
#endif

static void event_stream_decoder_is_made_only_with_the_part(void **state) {
    (void)state;
    sg_es_decoder dec;
    size_t n = sg_es_buffer_size(NULL);
    assert_true(n > 0);
    void *buf = malloc(n);
    assert_non_null(buf);
    int rv = sg_es_init(&dec, NULL, NULL, buf, n);
    assert_int_equal(rv, WITH_EVENTSTREAM ? 0 : SG_EUNSUPPORTED);
    /* arguments are still checked first */
    assert_int_equal(sg_es_init(NULL, NULL, NULL, buf, n), SG_EINVAL);
    free(buf);
}

static void stream_with_event_stream_framing_only_with_the_part(void **state) {
    (void)state;
    sg_stream_config cfg;
    sg_stream_config_init(&cfg);
    assert_int_equal(sg_stream_config_set_format(&cfg, SG_FORMAT_EVENTSTREAM), 0);
    sg_stream s;
    int rv = sg_stream_init_mem(&s, &cfg, NULL, NULL, NULL);
    assert_int_equal(rv, WITH_EVENTSTREAM ? 0 : SG_EUNSUPPORTED);
    sg_stream_release(&s);
    /* the other framings are every build's */
    assert_int_equal(sg_stream_config_set_format(&cfg, SG_FORMAT_NDJSON), 0);
    assert_int_equal(sg_stream_init_mem(&s, &cfg, NULL, NULL, NULL), 0);
    sg_stream_release(&s);
}

#ifdef SG_HAVE_LEDGER
/* A PostgreSQL location: refused at once without the backend; with it, a
 * connection is tried (to a port nothing listens on: refused). */
static void postgresql_ledger_only_with_the_part(void **state) {
    (void)state;
    static const char uri[] = "postgresql://127.0.0.1:1/sg?connect_timeout=2";
    sg_ledger *l = NULL;
    int rv = sg_ledger_open(&l, uri, NULL);
    int schema = sg_ledger_init_schema(uri, NULL);
#    ifdef SG_HAVE_POSTGRESQL
    assert_int_not_equal(rv, SG_EUNSUPPORTED);
    assert_int_not_equal(schema, SG_EUNSUPPORTED);
    assert_true(rv < 0 && schema < 0);
#    else
    assert_int_equal(rv, SG_EUNSUPPORTED);
    assert_int_equal(schema, SG_EUNSUPPORTED);
#    endif
    assert_null(l);
}
#endif

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(event_stream_decoder_is_made_only_with_the_part),
        cmocka_unit_test(stream_with_event_stream_framing_only_with_the_part),
#ifdef SG_HAVE_LEDGER
        cmocka_unit_test(postgresql_ledger_only_with_the_part),
#endif
    };
    return cmocka_run_group_tests_name("parts", tests, NULL, NULL);
}
