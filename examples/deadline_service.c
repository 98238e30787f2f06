/*
 * deadline_service - a service that spends only what its caller has left.
 *
 *   deadline_service X_DEADLINE_MS UPSTREAM_URL
 *
 * Simulates one inbound request to a service whose caller sent
 * `X-Deadline-Ms: X_DEADLINE_MS` (the caller's remaining budget, in whole
 * milliseconds).  Only a duration crosses a process boundary; on arrival it
 * is turned back into a local monotonic deadline, less an allowance for
 * transit and clock skew.  What remains is the budget of the service's own
 * upstream call (a guarded stream through the libcurl transport), and that
 * call stamps its own lease downstream, fresh on every attempt
 * (deadline_header = true), so the upstream can stop working when nobody
 * will wait for it any more.
 *
 * A floor of 100 ms is kept in reserve: when less than that is left, the
 * upstream is not dialled at all (outcome refused) - a request that cannot
 * finish in time only loads the upstream.  When the upstream is slower than
 * what remains, the attempt ends at the end of its lease with
 * budget_exhausted, not a clock's own name: the caller's deadline, not the
 * upstream, was the limit.
 *
 * The service prints the answer it would send back: 200 for ok, 400 for a
 * malformed deadline, 504 for refused / budget_exhausted / timeouts, 502 for
 * anything else.
 *
 * Exit status: 0 when it answered 200, 1 for any other answer, 2 on a usage
 * or setup error.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <streamguard/curl.h>
#include <streamguard/http.h>

/* Transit and clock skew between the caller's stamp and our reading it. */
#define INBOUND_ALLOWANCE SG_MS(50)
/* Below this the upstream call is not worth starting. */
#define UPSTREAM_FLOOR SG_MS(100)

static int on_item(sg_curl_op *op, const sg_item *item, void *user_data) {
    (void)op;
    (void)item;
    (*(unsigned long *)user_data)++; /* a real service would relay it */
    return 0;
}

static void on_attempt(sg_curl_op *op, const sg_op_attempt *rec, void *user_data) {
    (void)op;
    (void)user_data;
    /* attempt_ns is the lease; X-Deadline-Ms says what was left of it when
     * the request went, after the connection was made: at most this. */
    printf("upstream attempt %u: leased %lld ms outcome=%s phase=%s "
           "elapsed_ms=%lld decision=%s\n",
           rec->n, (long long)(rec->attempt_timeout_ns / SG_MS(1)),
           sg_outcome_name(rec->outcome), sg_phase_name(rec->phase),
           (long long)(rec->elapsed_ns / SG_MS(1)), sg_op_decision_name(rec->decision));
}

static int answer_for(sg_outcome outcome) {
    if (outcome == SG_OUTCOME_OK) {
        return 200;
    }
    if (outcome == SG_OUTCOME_REFUSED || sg_outcome_is_timeout(outcome)) {
        return 504; /* the caller's deadline could not be met */
    }
    return 502;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s X_DEADLINE_MS UPSTREAM_URL\n", argv[0]);
        return 2;
    }
    /* The inbound request arrives: read the clock once, at arrival. */
    int64_t arrival = sg_clock_now(NULL);
    const char *header = argv[1];
    int64_t inbound_ns = 0;
    int rv = sg_deadline_ms_parse(header, strlen(header), &inbound_ns);
    if (rv != 0) {
        /* A sign, a space, a dot, an empty value: never guess a deadline. */
        printf("inbound X-Deadline-Ms '%s' rejected: %s\n", header, sg_errname(rv));
        printf("answer: 400\n");
        return 1;
    }
    int64_t deadline = 0;
    sg_deadline_from_timeout(arrival, inbound_ns, INBOUND_ALLOWANCE, &deadline);

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        return 2;
    }
    CURL *easy = curl_easy_init();
    struct curl_slist *headers =
        curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(easy, CURLOPT_URL, argv[2]);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, "{\"stream\":true}");

    sg_stream_config framing; /* SSE ending at [DONE] */
    sg_stream_config_init(&framing);
    sg_curl_options *opts = NULL;
    if (sg_stream_config_set_terminal_data(&framing, "[DONE]") != 0 ||
        sg_curl_options_new(&opts) != 0 ||
        sg_curl_options_set_framing(opts, &framing) != 0 ||
        sg_curl_options_set_headers(opts, headers) != 0 ||
        /* X-Deadline-Ms: <lease>, fresh per attempt */
        sg_curl_options_set_deadline_header(opts, true) != 0 ||
        sg_curl_options_set_on_item(opts, on_item) != 0 ||
        sg_curl_options_set_on_attempt(opts, on_attempt) != 0) {
        return 2;
    }
    unsigned long items = 0;

    char key[64];
    snprintf(key, sizeof(key), "deadline-service-%ld-%lld", (long)getpid(),
             (long long)arrival);
    sg_op_options *policy = NULL;
    if (sg_op_options_new(&policy) != 0) {
        return 2;
    }
    sg_op_options_set_floor(policy, UPSTREAM_FLOOR);
    sg_op_options_set_connect_timeout(policy, SG_SEC(1));
    sg_op_options_set_first_item_timeout(policy, SG_SEC(5));
    sg_op_options_set_idle_timeout(policy, SG_SEC(2));
    sg_op_options_set_max_attempts(policy, 2);
    sg_op_options_set_idempotency_key(policy, key);

    /* The operation ends at the local deadline itself, an absolute instant:
     * whatever time passes before sg_curl_perform starts is spent from it.
     * A deadline already passed leaves nothing (budget_exhausted); what is
     * left at or below the floor is refused without dialling out. */
    sg_op_options_set_deadline(policy, deadline);
    int64_t now = sg_clock_now(NULL);
    int64_t budget = deadline > now ? deadline - now : 0;
    printf("inbound X-Deadline-Ms=%s: local budget %lld ms (allowance %lld ms, floor "
           "%lld ms)\n",
           header, (long long)(budget / SG_MS(1)),
           (long long)(INBOUND_ALLOWANCE / SG_MS(1)),
           (long long)(UPSTREAM_FLOOR / SG_MS(1)));

    sg_curl_op *op = NULL;
    rv = sg_curl_op_new(&op, easy, policy, opts, &items);
    sg_op_options_free(policy); /* the operation has its own copies */
    sg_curl_options_free(opts);
    if (rv == 0) {
        rv = sg_curl_perform(op);
    }
    int status = 2;
    if (rv != 0) {
        fprintf(stderr, "deadline_service: %s\n", sg_strerror(rv));
    } else {
        const sg_op *pol = sg_curl_op_policy(op);
        uint32_t n = sg_op_attempt_count(pol);
        const sg_op_attempt *last = n > 0 ? sg_op_attempt_at(pol, n - 1) : NULL;
        sg_outcome outcome = sg_curl_op_outcome(op);
        printf("outcome=%s phase=%s attempts=%u items=%lu reason=%s\n",
               sg_outcome_name(outcome), last ? sg_phase_name(last->phase) : "none", n,
               items, sg_op_reason_name(sg_op_final_reason(pol)));
        int answer = answer_for(outcome);
        printf("answer: %d\n", answer);
        status = answer == 200 ? 0 : 1;
    }
    sg_curl_op_free(op);
    curl_slist_free_all(headers);
    curl_easy_cleanup(easy);
    curl_global_cleanup();
    return status;
}
