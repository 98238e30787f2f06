/* hello URL: one guarded chat stream - each item as it arrives, then the outcome. */
#include <stdio.h>
#include <streamguard/easy.h>

static int on_token(const sg_item *item, void *out) {
    fprintf(out, "%.*s\n", (int)item->data_len, item->data); /* as it arrives */
    return 0;                                                /* non-zero cancels */
}

int main(int argc, char **argv) {
    static const char body[] =
        "{\"model\":\"gpt-4o-mini\",\"stream\":true,"
        "\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]}";
    char report[16384];
    sg_easy *e = NULL;
    int rv;
    if (argc != 2) {
        fprintf(stderr, "usage: hello URL\n");
        return 2;
    }
    if ((rv = sg_easy_new(&e)) != 0 || (rv = sg_easy_set_url(e, argv[1])) != 0 ||
        (rv = sg_easy_set_profile(e, "openai")) != 0 || /* its [DONE], its errors */
        (rv = sg_easy_set_body(e, body, sizeof(body) - 1)) != 0 || /* a POST */
        (rv = sg_easy_add_header(e, "Content-Type: application/json")) != 0 ||
        (rv = sg_easy_set_budget(e, SG_SEC(30))) != 0 ||             /* all attempts */
        (rv = sg_easy_set_first_item_timeout(e, SG_SEC(10))) != 0 || /* first token */
        (rv = sg_easy_set_idle_timeout(e, SG_SEC(2))) != 0 || /* keepalives don't count */
        (rv = sg_easy_set_idempotency_key(e, "hello-7f3a")) != 0 || /* retry-safe */
        (rv = sg_easy_set_on_item(e, on_token, stdout)) != 0 ||
        (rv = sg_easy_perform(e)) != 0 || /* 0: it ran to an outcome, whichever */
        (rv = sg_easy_report(e, report, sizeof(report), NULL)) != 0) {
        fprintf(stderr, "hello: %s\n", sg_strerror(rv));
        sg_easy_free(e);
        return 2;
    }
    sg_outcome outcome = sg_easy_outcome(e); /* ok, idle_timeout, http_error, ... */
    printf("outcome=%s %s\nreport: %s\n", sg_outcome_name(outcome), sg_easy_error(e),
           report);
    sg_easy_free(e);
    return outcome == SG_OUTCOME_OK ? 0 : 1;
}
